"""The files every page with figures needs: the offline Vega runtime, the lazy loader, the CSS.

The runtime is Vega alone (no Vega-Lite, no vega-embed: specs are compiled to Vega at build time),
bundled by vl-convert from its own vendored copy, so no script is ever fetched from another host.
It exposes the Vega namespace as `window.vega` (`vega.View`, `vega.parse`, ...); figures.js builds
each view with it. About 0.59 MB, under the 600 kB budget of benchmarks/benchmark_pages.py.
"""
from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import resources
from pathlib import Path

import vl_convert

from safe_io import write_atomic

from . import vl_calls, worker
from .render import VL_VERSION

RUNTIME = "vega-runtime.js"
LOADER = "figures.js"
CSS = "figures.css"
# The module specifier is a URL string only because vl-convert's import map is keyed by the
# jsDelivr URLs of the packages it vendors: the bundler resolves it to that vendored copy and
# nothing is fetched (it bundles offline). The version is vl-convert's own Vega, so the key always
# matches. The imported name must not be `vega` (vl-convert 1.9's bundler panics on that, and a
# bare `vega` comes out null).
_SNIPPET = (f'import * as V from "https://cdn.jsdelivr.net/npm/vega@{vl_convert.get_vega_version()}/+esm"; '
            "window.vega = V;")


def figure_assets(cache_dir: Path | None = None) -> dict[str, bytes]:
    """{file name under public/assets/: bytes}. With `cache_dir`, the runtime bundle is cached there."""
    return {
        RUNTIME: _runtime(Path(cache_dir) if cache_dir else None),
        LOADER: _static(LOADER),
        CSS: _static(CSS),
    }


def figure_head_html(asset_prefix: str) -> str:
    """The <link> and <script defer> tags a page with figures puts in its head."""
    prefix = asset_prefix if asset_prefix.endswith("/") or not asset_prefix else asset_prefix + "/"
    return (f'<link rel="stylesheet" href="{prefix}{CSS}">\n'
            f'<script src="{prefix}{LOADER}" defer></script>')


def _static(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


def _cache_path(cache_dir: Path) -> Path:
    key = hashlib.sha256(f"{vl_convert.__version__}|{VL_VERSION}|{_SNIPPET}".encode()).hexdigest()[:16]
    return Path(cache_dir) / f"runtime-{key}.js"


_prefetched: dict = {}


def prefetch_runtime(cache_dir: Path) -> None:
    """Start bundling the runtime in the second vl-convert process (site_src/figures/worker.py)
    when it is not cached: a build calls this as soon as it knows the site has figures, and
    `figure_assets` collects it at the end."""
    if not _cache_path(cache_dir).is_file() and "bundle" not in _prefetched:
        future = worker.submit("bundle", snippet=_SNIPPET, vl_version=VL_VERSION)
        if future is not None:
            _prefetched["bundle"] = future


def _runtime(cache_dir: Path | None) -> bytes:
    if cache_dir is None:
        return _bundle()
    path = _cache_path(cache_dir)
    if path.is_file():
        return path.read_bytes()
    data = _bundle()
    write_atomic(path, data)
    return data


@lru_cache(maxsize=1)
def _bundle() -> bytes:
    text = worker.result(_prefetched.pop("bundle", None))
    if text is None:
        text = vl_calls.bundle(_SNIPPET, VL_VERSION)
    return text.encode("utf-8")
