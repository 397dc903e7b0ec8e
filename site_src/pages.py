"""Content pages: discovery under content/, YAML front matter with the line of every field, clean URLs."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from .errors import BuildError

FIELDS = ("title", "nav_title", "summary", "subject", "question", "access", "trust", "claim", "bundle", "reproduction")
REQUIRED = ("title", "summary")
STUDY_REQUIRED = ("subject", "question", "access", "trust", "claim")
# Computed by the build (site_src/honesty), never typed: a page that types one is refused.
COMPUTED = {"reproduction": "the reproduction line is computed from the records under reproductions/<study>/"}
TRUST = ("exploratory", "calibrated", "registered")
CLAIMS = ("observational", "causal", "observational vs causal")
PROSE_FIELDS = ("title", "nav_title", "summary", "subject", "question", "access", "reproduction")


@dataclass
class Page:
    rel: str                 # content-relative path, e.g. "studies/organism.md"
    repo_rel: str            # repository-relative path, for error messages
    url: str                 # clean URL directory relative to the site root, "" for the home page
    meta: dict
    meta_lines: dict         # field -> 1-based line in the page file
    body: str                # Markdown with the front matter blanked, so line numbers stay true
    number: int = 0          # position in the navigation (1-based): the N of "Fig. N.M"

    @property
    def out_path(self) -> str:
        return f"{self.url}index.html"

    @property
    def is_study(self) -> bool:
        return "bundle" in self.meta

    @property
    def depth(self) -> int:
        return self.url.count("/")

    def where(self, line: int | None = None) -> str:
        return f"{self.repo_rel}:{line}" if line else self.repo_rel

    def field_where(self, name: str) -> str:
        return self.where(self.meta_lines.get(name, 1))


def url_for(rel: str) -> str:
    path = PurePosixPath(rel).with_suffix("")
    if path.name == "index":
        path = path.parent
    text = path.as_posix()
    return "" if text in (".", "") else f"{text}/"


def discover(content_dir: Path) -> list[Path]:
    return sorted(p for p in content_dir.rglob("*.md") if p.is_file())


def load_page(path: Path, root: Path, content_dir: Path, errors) -> Page | None:
    rel = path.relative_to(content_dir).as_posix()
    repo_rel = path.relative_to(root).as_posix()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        errors.add(BuildError(f"cannot read page: {exc}", repo_rel))
        return None
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        errors.add(BuildError("page must start with YAML front matter between '---' lines", f"{repo_rel}:1"))
        return None
    try:
        close = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        errors.add(BuildError("front matter is not closed by a '---' line", f"{repo_rel}:1"))
        return None
    fm_text = "\n".join(lines[1:close])
    try:
        meta = yaml.safe_load(fm_text) or {}
        node = yaml.compose(fm_text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        errors.add(BuildError(f"front matter is not valid YAML: {getattr(exc, 'problem', exc)}",
                              f"{repo_rel}:{mark.line + 2 if mark else 1}"))
        return None
    if not isinstance(meta, dict):
        errors.add(BuildError("front matter must be a mapping of fields", f"{repo_rel}:2"))
        return None
    meta_lines = {}
    if isinstance(node, yaml.MappingNode):
        meta_lines = {k.value: k.start_mark.line + 2 for k, _ in node.value}
    body = "\n" * (close + 1) + "\n".join(lines[close + 1:])
    page = Page(rel, repo_rel, url_for(rel), meta, meta_lines, body)
    _validate(page, root, errors)
    return page


def _validate(page: Page, root: Path, errors) -> None:
    meta = page.meta
    for name in meta:
        if name not in FIELDS:
            errors.add(BuildError(f"unknown front-matter field {name!r} (known: {', '.join(FIELDS)})",
                                  page.field_where(str(name))))
    for name, why in COMPUTED.items():
        if name in meta:
            errors.add(BuildError(f"front-matter field {name!r} is not typed: {why}; remove the field",
                                  page.field_where(name)))
    required = REQUIRED + (STUDY_REQUIRED if page.is_study else ())
    for name in required:
        if name not in meta or meta[name] in (None, ""):
            why = " (study pages, those with bundle:, need it)" if name in STUDY_REQUIRED else ""
            errors.add(BuildError(f"front matter lacks {name!r}{why}", page.where(1)))
    for name in FIELDS:
        if name in meta and not isinstance(meta[name], str):
            errors.add(BuildError(f"front-matter field {name!r} must be text", page.field_where(name)))
    if "trust" in meta and meta["trust"] not in TRUST:
        errors.add(BuildError(f"unknown trust {meta['trust']!r}: use one of {', '.join(TRUST)}",
                              page.field_where("trust")))
    if "claim" in meta and meta["claim"] not in CLAIMS:
        errors.add(BuildError(f"unknown claim {meta['claim']!r}: use one of " + ", ".join(repr(c) for c in CLAIMS),
                              page.field_where("claim")))
    bundle = meta.get("bundle")
    if isinstance(bundle, str) and not (root / "bundles" / bundle).is_dir():
        errors.add(BuildError(f"bundle {bundle!r} not found: expected the folder bundles/{bundle}/",
                              page.field_where("bundle")))
