"""Content pages: discovery under content/, YAML front matter with the line of every field, clean URLs."""
from __future__ import annotations

from dataclasses import dataclass

import yaml

from .errors import BuildError
from .parse import ParseProblem, load_yaml
from .schema import FRONT_MATTER, STUDY_NAME
from .urls import RESERVED

PROSE_FIELDS = ("title", "nav_title", "summary", "subject", "question", "access", "trust_reason", "reproduction")


@dataclass
class Parsed:
    """A page's Markdown, parsed (site_src/markdown.py parse_page): its tokens, and its figure
    blocks in page order (blocks.figure.FigureBlock)."""

    tokens: list
    figures: list


@dataclass
class Page:
    rel: str                 # content-relative path, e.g. "studies/organism.md"
    repo_rel: str            # repository-relative path, for error messages
    url: str                 # clean URL directory relative to the site root, "" for the home page
    meta: dict
    meta_lines: dict         # field -> 1-based line in the page file
    body: str                # Markdown with the front matter blanked, so line numbers stay true
    number: int = 0          # position in the navigation (1-based): the N of "Fig. N.M"
    parsed: Parsed | None = None   # the Markdown parsed once (stage number), rendered by stage render

    @property
    def out_path(self) -> str:
        """The page's HTML file under the site root."""
        return f"{self.url}index.html"

    @property
    def is_study(self) -> bool:
        """Whether the page is a study page (it names a bundle)."""
        return "bundle" in self.meta

    @property
    def name(self) -> str:
        """The page's one name: in the navigation, the home page's listing, breadcrumbs, search
        results and links the site makes (nav_title, a short label where the title is a whole
        question, else the title)."""
        return self.meta.get("nav_title") or self.meta.get("title", self.rel)

    @property
    def depth(self) -> int:
        """How many folders the page's URL is below the site root."""
        return self.url.count("/")

    def where(self, line: int | None = None) -> str:
        """`content/PAGE.md:LINE`, for errors."""
        return f"{self.repo_rel}:{line}" if line else self.repo_rel

    def field_where(self, name: str) -> str:
        """The location of a front-matter field, for errors."""
        return self.where(self.meta_lines.get(name, 1))


MAX_SEGMENT_BYTES = 200


def url_for(rel: str) -> str:
    """The clean URL folder of a content-relative page path, "" for the home page; raises
    ValueError when the name cannot make a URL that stays inside the site."""
    if not rel.endswith(".md"):
        raise ValueError("a page is a .md file")
    parts = rel[:-3].split("/")
    for part in parts:
        if not part or part.startswith("."):
            raise ValueError(f"page path segment {part!r} is empty or starts with '.': it would not make a URL"
                             " inside the site")
        if len(part.encode("utf-8")) > MAX_SEGMENT_BYTES:
            raise ValueError(f"page path segment of {len(part.encode('utf-8'))} bytes: at most {MAX_SEGMENT_BYTES}")
        if any(ord(ch) < 32 or ch in "\\\x7f" for ch in part):
            raise ValueError("page path has a control character or a backslash")
    if parts[-1] == "index":
        parts = parts[:-1]
    if parts and parts[0] in RESERVED:
        raise ValueError(f"pages may not live under {parts[0]}/: the build publishes its own files there")
    return "".join(f"{p}/" for p in parts)


def discover(files, errors) -> list[str]:
    """Repository-relative paths of the pages under content/ that the path policy allows."""
    good, bad = files.listed("content", ".md")
    for rel, why in bad:
        errors.add(BuildError(f"page {why}", rel))
    return good


def load_page(repo_rel: str, files, errors) -> Page | None:
    """The page at `repo_rel` with its front matter checked; None (and errors added) when it cannot be
    published."""
    rel = repo_rel[len("content/"):]
    try:
        url = url_for(rel)
    except ValueError as exc:
        errors.add(BuildError(f"cannot publish this page: {exc}", repo_rel))
        return None
    try:
        text = files.read_bytes(repo_rel).decode("utf-8")
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
        meta, node = load_yaml(fm_text, first_line=2)
    except ParseProblem as exc:
        errors.add(BuildError(f"front matter: {exc.message}", f"{repo_rel}:{exc.line or 1}"))
        return None
    meta = {} if meta is None else meta
    if not isinstance(meta, dict):
        errors.add(BuildError("front matter must be a mapping of fields", f"{repo_rel}:2"))
        return None
    meta_lines = {}
    if isinstance(node, yaml.MappingNode):
        meta_lines = {k.value: k.start_mark.line + 2 for k, _ in node.value}
    body = "\n" * (close + 1) + "\n".join(lines[close + 1:])
    page = Page(rel, repo_rel, url, meta, meta_lines, body)
    _validate(page, files, errors)
    return page


def _validate(page: Page, files, errors) -> None:
    meta = page.meta
    FRONT_MATTER.check(meta, page.field_where, errors, study=page.is_study, missing_at=page.where(1))
    bundle = meta.get("bundle")
    if isinstance(bundle, str) and not STUDY_NAME.fullmatch(bundle):
        errors.add(BuildError(f"bundle {bundle!r}: a study name matches {STUDY_NAME.pattern}",
                              page.field_where("bundle")))
    elif isinstance(bundle, str) and not files.listed(f"bundles/{bundle}")[0]:
        errors.add(BuildError(f"bundle {bundle!r} not found: expected the folder bundles/{bundle}/",
                              page.field_where("bundle")))
