"""The honesty checks of a build: preregistrations, trust rungs and claim kinds, errata, and the
reproduction registry. Each module does one job; this one gathers their results for the pages.

The generator calls, once per build:

    honesty = Honesty(root, errors, cache)          # reads registrations/ (and git), lazily
    info = honesty.study(page, bundle)              # per study page: StudyHonesty for its header
    honesty.check_page(page, rendered)              # rungs and claim kinds of a page and its figures
    files = honesty.pages(render)                   # registrations/ pages; render(template, prefix, **ctx)
    honesty.used                                    # fixtures to publish with a line view

Every problem is added to the build's error list with the file and line an author must edit.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path

from ..errors import BuildError
from ..resolve import Resolver
from . import errata, registrations, reproductions, rungs, signatures, verdict_cache


@dataclass
class StudyHonesty:
    study: str
    reproductions: list = field(default_factory=list)       # reproductions.Reproduction
    reproduction_line: str = "No independent reproduction recorded"
    registrations: list = field(default_factory=list)       # registrations.Verified of this study
    corrections: list = field(default_factory=list)         # dicts for partials/corrections.html
    withdrawals: list = field(default_factory=list)         # dicts for partials/corrections.html
    bundle_sha256: str = ""
    corrections_page: str = ""   # the file beside the study page that holds its corrections, when they do not fit there


# Corrections a study page shows itself; more are a page of their own beside it (a 97-row table
# was 54 kB of the organism page, over the 200 kB a page may weigh before interaction).
CORRECTIONS_INLINE = 20
CORRECTIONS_PAGE = "corrections.html"


class Honesty:
    def __init__(self, root: Path, errors, cache=None, files=None, jinja=None):
        self.root = Path(root).resolve()
        self.errors = errors
        self.jinja = jinja   # the site's templates: receipts are written by templates/partials/receipt.html
        self.resolver = Resolver(self.root, None, cache, files=files)
        # the path policy (site_src.paths.RepoFiles): records are read only when git tracks them
        self.refusal = self.resolver.files.refusal if self.resolver.files is not None else (lambda rel: None)
        self._registrations: list | None = None
        self._machines: set | None = None
        self._signers: dict = {}
        self.studies: dict[str, StudyHonesty] = {}
        self._corrections: dict[str, list] = {}     # study -> errata.Correction
        self._shown: dict[str, list] = {}           # page rel -> corrections rendered for its page
        self._withdrawn: dict[str, list] = {}       # page rel -> withdrawn claims listed on its page

    @property
    def used(self) -> dict[str, bool]:
        """The records and fixtures honesty cited: repo path -> needs a line view."""
        return self.resolver.used

    @property
    def registrations(self) -> list:
        """Every verified registration (the ones that failed a check are build errors instead)."""
        if self._registrations is None:
            # kept between builds by what it reads (verdict_cache.py): an edit to a page does not redo it
            self._registrations = verdict_cache.load_verified(self.root, self.resolver, self.errors,
                                                              refusal=self.refusal)
            for verified in self._registrations:
                self.resolver.used[verified.registration.rel] = True
                if verified.superseded is not None:     # its page links to the entry's line view
                    self.resolver.used["registrations/superseded.yaml"] = True
        return self._registrations

    def registered_studies(self) -> set[str]:
        """The studies some verified registration concerns."""
        return {v.registration.study for v in self.registrations}

    def study(self, page, bundle) -> StudyHonesty:
        """The honesty facts a study page shows; computed once per study."""
        name = bundle.name
        if name in self.studies:
            return self.studies[name]
        if self._machines is None:
            try:
                self._machines = reproductions.project_machines(self.root)
            except BuildError as exc:
                self.errors.add(exc)
                self._machines = set()
            try:
                self._signers = signatures.load_signers(self.root, reproductions.FOLDER, self.refusal)
            except BuildError as exc:
                self.errors.add(exc)
                self._signers = {}
        found = reproductions.load_reproductions(self.root, name, bundle, self.errors, self._machines, self.refusal,
                                                 self._signers)
        for rep in found:
            self.resolver.used[rep.rel] = True
            if rep.signature_rel:     # published raw, so a reader can verify it with ssh-keygen
                self.resolver.used.setdefault(rep.signature_rel, False)
        if any(rep.signature_rel for rep in found):
            self.resolver.used.setdefault(f"{reproductions.FOLDER}/{signatures.ALLOWED}", False)
        info = StudyHonesty(
            study=name, reproductions=found, reproduction_line=reproductions.reproduction_line(found),
            registrations=[v for v in self.registrations if v.registration.study == name],
            corrections=self._shown.get(page.rel, []), withdrawals=self._withdrawn.get(page.rel, []),
            bundle_sha256=getattr(bundle, "sha256", ""))
        if len(info.corrections) > CORRECTIONS_INLINE:
            info.corrections_page = CORRECTIONS_PAGE
        self.studies[name] = info
        return info

    def corrections(self, study: str) -> list:
        """A study's corrections (errata.py), read once; a problem is added to the errors."""
        if study not in self._corrections:
            try:
                self._corrections[study] = errata.load(self.root, study, self.resolver, self.refusal)
            except BuildError as exc:
                self.errors.add(exc)
                self._corrections[study] = []
        return self._corrections[study]

    def check_page(self, page, rendered) -> None:
        """Trust rungs and claim kinds of a rendered page and its figures (rungs.py), and its errata."""
        rungs.check_page(page, rendered, self, self.errors)
        self._errata(page, rendered)

    def _errata(self, page, rendered) -> None:
        """Refuse a corrected value quoted bare; give a study page its corrections, with receipts."""
        from ..receipt_html import receipt_html
        studies = {m.group(1) for r, _t, _i in rendered.values for m in [rungs.BUNDLE_PATH.match(r.source)] if m}
        bundle = page.meta.get("bundle")
        if isinstance(bundle, str):
            studies.add(bundle)
        for study in sorted(studies):
            found = self.corrections(study) if (self.root / "bundles" / study).is_dir() else []
            golden = self._golden(study) if found else None
            for resolved, _text, _rid in rendered.values if golden is not None else ():
                item = errata.corrected_read(resolved, found, golden)
                if item is not None:
                    line = _line_of(page, resolved.expression, item.key_path)
                    self.errors.add(BuildError(
                        f"quotes {item.key_path} of bundles/{study}/golden.json bare, but it was corrected "
                        f"({item.rel}:{item.lines['corrects']}): show both values from the note, the published one "
                        f"struck through: ~~{{{{ {item.ref('published')} }}}}~~ {{{{ {item.ref('corrected')} }}}}",
                        page.where(line)))
            if study != bundle:
                continue
            prefix = "../" * page.depth
            shown = []
            self._withdrawn[page.rel] = [
                {"item": item, "note_href": f"{prefix}source/{item.rel}.html#L{item.lines['withdraws']}"}
                for item in found if isinstance(item, errata.Withdrawal)]
            if self._withdrawn[page.rel]:
                self.resolver.used[self._withdrawn[page.rel][0]["item"].rel] = True   # its line view is linked
            for item in (c for c in found if isinstance(c, errata.Correction)):
                cells = {}
                for field in ("published", "corrected"):
                    try:
                        resolved = self.resolver.resolve(item.ref(field))
                    except Exception as exc:  # the note was checked on load; a failure here is a bug
                        self.errors.add(BuildError(f"cannot cite {item.ref(field)}: {exc}", page.where(1)))
                        continue
                    rid = f"ref-{len(rendered.values) + 1}"
                    rendered.values.append((resolved, resolved.display, rid))
                    cells[field] = receipt_html(self.jinja, resolved, resolved.display, rid, prefix)
                if len(cells) == 2:
                    shown.append({"item": item, **cells,
                                  "note_href": f"{prefix}source/{item.rel}.html#L{item.lines['corrects']}"})
            self._shown[page.rel] = shown

    def _golden(self, study: str):
        """The parsed golden.json of a study (site_src.fixtures.Structured), or None."""
        from ..fixtures import Structured
        try:
            path = self.resolver.path_for(f"bundles/{study}/golden.json")
            fixture = self.resolver.cache.get(path, f"bundles/{study}/golden.json")
        except Exception:  # noqa: BLE001 - the corrections' own check reports an unreadable golden.json
            return None
        return fixture if isinstance(fixture, Structured) else None

    def pages_inputs(self) -> str:
        """Everything `pages` renders from besides the templates, the navigation and site.yaml: each
        verified registration in full (its record, value, verdict, supersession), the study pages'
        URLs and whether registrations/ exists, as one text. The page cache keys the rendered pages
        by it (a repr that is not stable only costs the cache its hits)."""
        verified = sorted(self.registrations, key=lambda v: v.registration.id)
        urls = sorted(getattr(self, "study_urls", {}).items())
        return repr(_canonical((verified, urls, (self.root / "registrations").is_dir())))

    def pages(self, render) -> dict[str, bytes]:
        """The registration pages and their index, rendered with `render(template, prefix, **context)`."""
        from .site_pages import registration_pages
        return registration_pages(self, render)


def _canonical(value):
    """`value` as nested tuples whose repr says everything it holds: a dataclass by its fields, a
    mapping by its items in sorted order (a record read back from the verdict cache has its keys
    sorted; one read from its file, in the file's order, which its text, also held, fixes)."""
    if is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, tuple((f.name, _canonical(getattr(value, f.name))) for f in fields(value)))
    if isinstance(value, dict):
        return ("dict", tuple(sorted(((repr(_canonical(k)), _canonical(v)) for k, v in value.items()), key=repr)))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_canonical(v) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(repr(_canonical(v)) for v in value)))
    return value


def _line_of(page, expression: str, key_path: str) -> int:
    """The page line that holds a reference (or, failing that, names the key path); else 1."""
    for needle in (expression.split("|")[0].strip(), key_path):
        if needle:
            for number, text in enumerate(page.body.split("\n"), 1):
                if needle in text:
                    return number
    return 1
