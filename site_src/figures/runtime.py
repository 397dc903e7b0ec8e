"""The files every page with figures needs: the offline Vega runtime, the lazy loader, the CSS.

The runtime is vl-convert's own bundle, so no script is ever fetched from another host. It is
the vega-embed bundle: vl-convert 1.9's bundler resolves the bare `vega` namespace to null in a
custom snippet (checked: `window.vega` comes out null), while `vegaEmbed` works and can run
already-compiled Vega specs (`mode: "vega"`).
"""
from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import resources
from pathlib import Path

import vl_convert

from safe_io import write_atomic

from .render import VL_VERSION

RUNTIME = "vega-runtime.js"
LOADER = "figures.js"
CSS = "figures.css"
_SNIPPET = "window.vegaEmbed = vegaEmbed;"


def figure_assets(cache_dir: Path | None = None) -> dict[str, bytes]:
    """{file name under public/assets/: bytes}. With `cache_dir`, the runtime bundle is cached there."""
    return {
        RUNTIME: _runtime(Path(cache_dir) if cache_dir else None),
        LOADER: _static(LOADER),
        CSS: _static(CSS),
    }


def figure_head_html(asset_prefix: str) -> str:
    prefix = asset_prefix if asset_prefix.endswith("/") or not asset_prefix else asset_prefix + "/"
    return (f'<link rel="stylesheet" href="{prefix}{CSS}">\n'
            f'<script src="{prefix}{LOADER}" defer></script>')


def _static(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


def _runtime(cache_dir: Path | None) -> bytes:
    if cache_dir is None:
        return _bundle()
    key = hashlib.sha256(f"{vl_convert.__version__}|{VL_VERSION}|{_SNIPPET}".encode()).hexdigest()[:16]
    path = cache_dir / f"runtime-{key}.js"
    if path.is_file():
        return path.read_bytes()
    data = _bundle()
    write_atomic(path, data)
    return data


@lru_cache(maxsize=1)
def _bundle() -> bytes:
    return vl_convert.javascript_bundle(snippet=_SNIPPET, vl_version=VL_VERSION).encode("utf-8")
