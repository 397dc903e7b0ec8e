"""content/site.yaml: the site's title, base URL and navigation order."""
from __future__ import annotations

from dataclasses import dataclass

import yaml

from .errors import BuildError
from .parse import ParseProblem, load_yaml
from .schema import SITE



@dataclass
class SiteConfig:
    title: str
    base_url: str
    nav: list[str]
    nav_lines: dict
    description: str = ""


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
    try:
        data, node = load_yaml(files.read_bytes(rel).decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        errors.add(BuildError(f"cannot read: {exc}", rel))
        return fallback
    except ParseProblem as exc:
        errors.add(BuildError(exc.message, f"{rel}:{exc.line or 1}"))
        return fallback
    data = {} if data is None else data
    if not isinstance(data, dict):
        errors.add(BuildError("must be a mapping with title, base_url and nav", f"{rel}:1"))
        return fallback
    lines = {k.value: k.start_mark.line + 1 for k, _ in node.value} if isinstance(node, yaml.MappingNode) else {}
    SITE.check(data, lambda key: f"{rel}:{lines.get(key, 1)}", errors)
    if not isinstance(data.get("title"), str):
        errors.add(BuildError("needs a text 'title'", f"{rel}:{lines.get('title', 1)}"))
    nav = data.get("nav") or []
    nav_lines = {}
    if not isinstance(nav, list) or not all(isinstance(n, str) for n in nav):
        errors.add(BuildError("'nav' must be a list of page paths relative to content/", f"{rel}:{lines.get('nav', 1)}"))
        nav = []
    elif isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if key_node.value == "nav" and isinstance(value_node, yaml.SequenceNode):
                nav_lines = {item.value: item.start_mark.line + 1 for item in value_node.value}
    return SiteConfig(str(data.get("title", "Untitled")), str(data.get("base_url") or ""), list(nav), nav_lines,
                      str(data.get("description") or ""))


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
