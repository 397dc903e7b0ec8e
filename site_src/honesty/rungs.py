"""Trust rungs and claim kinds, enforced on a page and on each of its figures.

- `registered` only when a verified registration (registrations/, with data and a verdict)
  concerns the bundle;
- `calibrated` only when the page cites, with `calibration: <study>`, a study whose answer key is
  true by construction: its key.json says how the key was constructed (`construction`) and its
  golden.json's key verification, by an intervention neither scored method uses, passed
  (`key_check/all_pass: true`);
- a figure's `claim` must be the kind its figure kind and data give (claims.py), and a page's
  `claim` the kind its figures and values give together.
Anything else is an error at the page line an author must edit.
"""
from __future__ import annotations

import json
import re
from pathlib import Path


from bundle_kit import contract

from ..errors import BuildError
from . import claims

KEY_CONSTRUCTION = "construction"    # key.json: how the key was constructed (text)
KEY_CHECK_PASSED = ("key_check", "all_pass")   # golden.json: the key's verification passed
BUNDLE_PATH = re.compile(r"^bundles/([a-z0-9][a-z0-9_-]*)/")


def calibration_problem(root: Path, study: str, refusal=lambda rel: None) -> str | None:
    """Why `study` cannot serve as a calibration scorecard (None: it can)."""
    folder = f"bundles/{study}"
    if not isinstance(study, str) or not (Path(root) / folder).is_dir():
        return f"names no study: expected the folder {folder}/"
    for name in (contract.KEY, contract.GOLDEN):
        rel = f"{folder}/{name}"
        refused = refusal(rel)
        if refused or not (Path(root) / rel).is_file():
            return f"{rel} {refused or 'is missing'}: a calibration study ships its answer key and its verification"
    try:
        key = json.loads((Path(root) / folder / contract.KEY).read_text(encoding="utf-8"))
        golden = json.loads((Path(root) / folder / contract.GOLDEN).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"cannot read its key or golden.json ({exc})"
    construction = key.get(KEY_CONSTRUCTION) if isinstance(key, dict) else None
    if not isinstance(construction, str) or not construction.strip():
        return (f"{folder}/{contract.KEY} does not say how its key was constructed ('{KEY_CONSTRUCTION}'): a key "
                "measured from the model's own activations is a reference, not an answer true by construction")
    node = golden
    for part in KEY_CHECK_PASSED:
        node = node.get(part) if isinstance(node, dict) else None
    if node is not True:
        return (f"{folder}/{contract.GOLDEN} does not record a passed key verification "
                f"('{'/'.join(KEY_CHECK_PASSED)}': true)")
    return None


def _figure_bundles(spec: dict, page_bundle) -> set[str]:
    """The studies a figure draws from: bundles/<study>/ paths in its data, else the page's bundle."""
    found, relative = set(), False

    def walk(value):
        nonlocal relative
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str):
            match = BUNDLE_PATH.match(value)
            if match:
                found.add(match.group(1))
            elif not value.startswith("quoted/"):
                relative = True
    walk(spec.get("data"))
    if relative and isinstance(page_bundle, str):
        found.add(page_bundle)
    return found


class PageCheck:
    """The rung and claim checks of one page (after it rendered, so its values are known)."""

    def __init__(self, page, honesty, errors):
        self.page, self.honesty, self.errors = page, honesty, errors
        self.bundle = page.meta.get("bundle") if isinstance(page.meta.get("bundle"), str) else None

    def error(self, message: str, line: int, fixture: str = "") -> None:
        """Add an error at a page line."""
        self.errors.add(BuildError(message, self.page.where(line), fixture))

    # -- rungs -------------------------------------------------------------------------------
    def rung(self, trust, studies: set[str], line: int, what: str) -> None:
        """Check a trust rung (the page's or a figure's) against what its bundle has."""
        if trust == "registered":
            registered = {v.registration.study for v in self.honesty.registrations if v.judges_current_data}
            if not studies & registered:
                named = ", ".join(sorted(studies)) or "no bundle"
                self.error(f"{what} says 'registered', but no verified registration with a verdict concerns "
                           f"its bundle ({named}): commit a record under registrations/ before the data, "
                           "or say 'exploratory'", line)
        elif trust == "calibrated":
            cited = self.page.meta.get("calibration")
            if cited is None:
                self.error(f"{what} says 'calibrated', but the page cites no calibration scorecard: add "
                           "'calibration: <study>' naming a study whose answer key is true by construction, "
                           "or say 'exploratory'", line)
                return
            problem = calibration_problem(self.honesty.root, cited, self.honesty.refusal)
            if problem:
                self.error(f"calibration {cited!r} {problem}", self.page.meta_lines.get("calibration", line))

    # -- claims ------------------------------------------------------------------------------
    def resolved_kind(self, resolved) -> str | None:
        """The claim kind of a value the page shows, from its fixture and key path (a correction's
        value has the kind of the golden.json value it corrects)."""
        expression = resolved.expression or ""
        corrected = self._corrected_key(resolved)
        if corrected is not None:
            return claims.value_kind(resolved.source, corrected)
        if "#" not in expression.split("|", 1)[0] and resolved.line and Path(resolved.source).suffix in (".json", ".yaml", ".yml"):
            try:  # FILE:LINE: take the key path that sits on that line
                fixture = self.honesty.resolver.cache.get(self.honesty.root / resolved.source, resolved.source)
                entries = fixture.by_line.get(resolved.line, [])
                if entries:
                    path = min(entries, key=lambda e: len(e.path)).path
                    expression = f"{resolved.source}#{'/'.join(str(p) for p in path)}"
            except Exception:  # the renderer already reported an unreadable fixture
                pass
        return claims.value_kind(resolved.source, expression)

    def _corrected_key(self, resolved) -> str | None:
        """`golden.json#KEY` of the value a bundle's correction note corrects, when `resolved` reads
        a line of one (bundles/<study>/CORRECTIONS.md); None otherwise."""
        match = BUNDLE_PATH.match(resolved.source or "")
        if match is None or Path(resolved.source).name != "CORRECTIONS.md" or not resolved.line:
            return None
        for item in self.honesty.corrections(match.group(1)):
            if item.rel == resolved.source and resolved.line in item.lines.values():
                return f"{contract.GOLDEN}#{item.key_path}"
        return None

    def findings(self, rendered) -> None:
        """Each finding's claim kind must be the kind the values it quotes support (when they
        support one): a finding never names its own kind (site_src/blocks/findings.py)."""
        for number, line, claim, values in rendered.findings:
            supported = claims.page_kind([self.resolved_kind(resolved) for resolved in values])
            if supported is not None and supported != claim:
                self.error(f"findings block: claim {number}: claim {claim!r} is not what its values support: "
                           f"together they make it {supported!r}", line)

    def run(self, rendered) -> None:
        """Every rung and claim check of the page and its figure blocks."""
        self.findings(rendered)
        page = self.page
        figure_kinds = []
        for block in rendered.figures:   # the page's figure blocks, as parsed (site_src/blocks/figure.py)
            declared = block.claim
            intrinsic = claims.figure_claim(block.kind, block.data)
            if intrinsic and declared in claims.KINDS and declared != intrinsic:
                self.error(f"figure {block.id}: claim {declared!r} is not what a {block.kind} figure supports: its "
                           f"data make it {intrinsic!r}", block.lines.of("claim"))
            figure_kinds.append(intrinsic)
            if block.trust is not None:
                self.rung(block.trust, _figure_bundles(block.spec, self.bundle), block.lines.of("trust"),
                          f"figure {block.id}")
        if "trust" in page.meta:
            self.rung(page.meta["trust"], {self.bundle} if self.bundle else set(),
                      page.meta_lines.get("trust", 1), "the page")
        declared = page.meta.get("claim")
        if declared in claims.KINDS:
            value_kinds = [self.resolved_kind(resolved) for resolved, _text, _rid in rendered.values]
            supported = claims.page_kind(figure_kinds + value_kinds)
            if supported is not None and supported != declared:
                self.error(f"claim {declared!r} is not what this page's figures and values support: together "
                           f"they make it {supported!r}", page.meta_lines.get("claim", 1))


def check_page(page, rendered, honesty, errors) -> None:
    """The rung and claim checks of one rendered page and its figures."""
    PageCheck(page, honesty, errors).run(rendered)
