"""OpenGraph metadata for a page, and for a page with a chart a preview PNG of its first (main)
figure, rendered at build time by vl-convert from the same compiled Vega spec the page carries.

The PNG is cached under .cache/og/ by the hash of that spec and the vl-convert version, so a
rebuild that changes no figure renders none.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

from safe_io import write_atomic

_SPEC = re.compile(r'data-figure-spec="(?:\.\./)*(assets/figures/[^"]+\.json)"')
SCALE = 2  # a preview is shown large by link unfurlers; twice the figure's CSS size stays sharp
PIPELINE = "og-1"


def main_figure_spec(body_html: str, files: dict, theme: str = "light") -> dict | None:
    """The light Vega spec of the page's first figure with a chart, data put back in place; None
    if it has none. The spec is the figure's own file among the page's `files`."""
    match = _SPEC.search(body_html)
    if not match or match.group(1) not in files:
        return None
    payload = json.loads(files[match.group(1)])
    specs = payload.get("specs") or {}
    spec = specs.get(theme) or next(iter(specs.values()), None)
    if spec is None:
        return None
    spec = json.loads(json.dumps(spec))
    for entry in spec.get("data", []):
        if entry.pop("_shared", False):
            entry["values"] = payload["data"][entry["name"]]
    return spec


def _cache_path(spec: dict, cache_dir: Path) -> Path:
    import vl_convert  # only a page with a figure needs it

    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    key = hashlib.sha256(f"{vl_convert.__version__}|{PIPELINE}|{SCALE}|{text}".encode()).hexdigest()
    return Path(cache_dir) / f"{key}.png"


_started: dict = {}


def start_preview(body_html: str, page_files: dict, cache_dir: Path) -> None:
    """Start drawing a page's preview in a vl-convert worker process (site_src/figures/worker.py)
    as soon as the page is complete; `render_png` collects it when the page is published."""
    spec = main_figure_spec(body_html, page_files)
    if spec is None:
        return
    path = _cache_path(spec, cache_dir)
    if path.is_file() or path in _started:
        return
    from site_src.figures import worker
    future = worker.submit("png", spec=spec, scale=SCALE)
    if future is not None:
        _started[path] = future


def render_png(spec: dict, cache_dir: Path) -> bytes:
    """A figure's preview image (PNG), cached by its spec."""
    path = _cache_path(spec, cache_dir)
    if path.is_file():
        return path.read_bytes()
    from site_src.figures import vl_calls, worker
    drawn = worker.result(_started.pop(path, None))
    data = base64.b64decode(drawn) if drawn is not None else vl_calls.png(spec, SCALE)
    write_atomic(path, data)
    return data


def og_context(root: Path, config, page, body_html: str, page_files: dict, prefix: str) -> tuple[dict, dict]:
    """(OpenGraph template context, files) of one page: title, description, and a study's preview image."""
    title = page.meta.get("title", "")
    og = {"title": title, "description": page.meta.get("summary", ""), "site_name": config.title,
          "type": "article" if page.url else "website", "url": "", "image": "", "image_alt": ""}
    if config.base_url:
        og["url"] = config.base_url.rstrip("/") + "/" + page.url
    files = {}
    spec = main_figure_spec(body_html, page_files)
    if spec is not None:
        png = render_png(spec, Path(root) / ".cache" / "og")
        name = f"assets/og/{(page.url.strip('/') or 'home').replace('/', '-')}-{hashlib.sha256(png).hexdigest()[:10]}.png"
        files[name] = png
        og["image"] = (config.base_url.rstrip("/") + "/" + name) if config.base_url else prefix + name
        og["image_alt"] = spec.get("description") or f"The main figure of {title}"
    return og, files
