"""content/site.yaml: the site's title, base URL, authors and navigation (order and groups).

`nav` lists pages relative to content/ in order; an entry may instead be a group, a mapping of
one title to its list (`- Studies: [studies/planted.md, ...]`), shown under that title. A group
may also name a page the build makes itself by its URL (`registrations/`), checked when the site
is published."""
from __future__ import annotations

from dataclasses import dataclass

import yaml

from . import robust
from .errors import BuildError
from .parse import ParseProblem, load_yaml
from .schema import SITE



@dataclass(frozen=True)
class NavGroup:
    """One group of the navigation: its title (None for the entries before the first group) and
    its entries, in order (content pages as `x.md`, pages the build makes as their URL `x/`)."""
    title: str | None
    entries: tuple


@dataclass
class SiteConfig:
    title: str
    base_url: str
    nav: list[str]                  # every content page entry, in navigation order
    nav_lines: dict
    description: str = ""
    groups: tuple = ()              # NavGroup, in order; entries of generated pages included
    authors: tuple = ()             # the names a citation gives as its authors


def generated(entry: str) -> bool:
    """A navigation entry naming a page the build makes (its URL, ending in '/'), not a file."""
    return entry.endswith("/") and not entry.endswith(".md")


def load_config(files, errors, rel: str = "content/site.yaml") -> SiteConfig:
    """content/site.yaml as a SiteConfig; every problem is added to `errors` with its line, and a fallback
    config lets the build go on."""
    fallback = SiteConfig("Untitled", "", [], {})
    why = files.refusal(rel)
    if why == "file not found":
        errors.add(BuildError("site configuration not found (title, base_url, nav)", rel))
        return fallback
    if why:
        errors.add(BuildError(f"site configuration {why}", rel))
        return fallback
    loaded = read_yaml_file(files, rel, errors)
    if loaded is None:
        return fallback
    data, node = loaded
    data = {} if data is None else data
    if not isinstance(data, dict):
        errors.add(BuildError("must be a mapping with title, base_url and nav", f"{rel}:1"))
        return fallback
    lines = {k.value: k.start_mark.line + 1 for k, _ in node.value} if isinstance(node, yaml.MappingNode) else {}
    SITE.check(data, lambda key: f"{rel}:{lines.get(key, 1)}", errors)
    if not isinstance(data.get("title"), str):
        errors.add(BuildError("needs a text 'title'", f"{rel}:{lines.get('title', 1)}"))
    nav_node = next((v for k, v in node.value if k.value == "nav"), None) if isinstance(node, yaml.MappingNode) else None
    groups, nav_lines = _nav_groups(data.get("nav") or [], nav_node, f"{rel}:{lines.get('nav', 1)}", errors)
    nav = [e for g in groups for e in g.entries if not generated(e)]
    authors = data.get("authors") or []
    if not isinstance(authors, list) or not all(isinstance(a, str) and a.strip() for a in authors):
        errors.add(BuildError("'authors' must be a list of names", f"{rel}:{lines.get('authors', 1)}"))
        authors = []
    # on every page (header, description, navigation): the robustness rule holds here too
    for key, texts in (("title", [data.get("title")]), ("description", [data.get("description")]),
                       ("nav", [g.title for g in groups])):
        for text in texts:
            if isinstance(text, str):
                robust.check_text(text, f"{rel}:{lines.get(key, 1)}", errors)
    return SiteConfig(str(data.get("title", "Untitled")), str(data.get("base_url") or ""), nav, nav_lines,
                      str(data.get("description") or ""), tuple(groups), tuple(authors))


_NAV_SHAPE = ("'nav' must be a list of page paths relative to content/, or of groups "
              "(a title mapped to such a list)")


def _nav_groups(nav, node, where: str, errors) -> tuple[list[NavGroup], dict]:
    """The navigation as groups, and each entry's line in site.yaml."""
    if not isinstance(nav, list):
        errors.add(BuildError(_NAV_SHAPE, where))
        return [], {}
    items = node.value if isinstance(node, yaml.SequenceNode) else [None] * len(nav)
    groups: list[NavGroup] = []
    loose: list[str] = []
    lines: dict = {}
    for item, item_node in zip(nav, items):
        at = f"{where.rsplit(':', 1)[0]}:{item_node.start_mark.line + 1}" if item_node is not None else where
        if isinstance(item, str):
            if groups:
                errors.add(BuildError(f"nav entry {item!r} follows a group: put it in one, or before the first", at))
                continue
            loose.append(item)
            lines[item] = item_node.start_mark.line + 1 if item_node is not None else 1
            continue
        if not (isinstance(item, dict) and len(item) == 1):
            errors.add(BuildError(_NAV_SHAPE, at))
            continue
        (title, entries), = item.items()
        entry_nodes = item_node.value[0][1].value if item_node is not None and isinstance(
            item_node.value[0][1], yaml.SequenceNode) else [None] * (len(entries) if isinstance(entries, list) else 0)
        if not isinstance(title, str) or not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            errors.add(BuildError(f"nav group {title!r} must map a title to a list of page paths", at))
            continue
        for entry, entry_node in zip(entries, entry_nodes):
            lines[entry] = entry_node.start_mark.line + 1 if entry_node is not None else 1
        groups.append(NavGroup(title, tuple(entries)))
    if loose:
        groups.insert(0, NavGroup(None, tuple(loose)))
    return groups, lines


def order_pages(config: SiteConfig, pages: dict, rel: str, errors) -> list[str]:
    """Navigation order: site.yaml's nav first, then every other page in path order."""
    ordered = []
    for entry in config.nav:
        name = entry if entry.endswith(".md") else f"{entry.rstrip('/')}.md"
        if name not in pages:
            errors.add(BuildError(f"nav entry {entry!r} names no page under content/", f"{rel}:{config.nav_lines.get(entry, 1)}"))
        elif name in ordered:
            errors.add(BuildError(f"nav entry {entry!r} is listed twice", f"{rel}:{config.nav_lines.get(entry, 1)}"))
        else:
            ordered.append(name)
    ordered.extend(sorted(name for name in pages if name not in ordered))
    return ordered


def read_yaml_file(files, rel: str, errors) -> tuple | None:
    """(data, node) of the YAML file `rel` of the repository, or None with its error (unreadable,
    not UTF-8, or a parse problem at its line) added to `errors`."""
    try:
        return load_yaml(files.read_bytes(rel).decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        errors.add(BuildError(f"cannot read: {exc}", rel))
    except ParseProblem as exc:
        errors.add(BuildError(exc.message, f"{rel}:{exc.line or 1}"))
    return None
