"""Figure kinds drawn from fixtures with Altair; static SVG at build time, offline Vega runtime.

`render_figure(kind, spec, ctx)` is the generator's entry point; `figure_assets()` gives the
files to write under public/assets/ (runtime, loader, CSS); `figure_head_html(prefix)` the tags a
page with figures puts in its <head>. See docs/figures.md for every kind and its spec keys.
"""
from __future__ import annotations

from importlib import import_module

from ..schema import FIGURE_ID, FIGURE_KINDS
from .assemble import assemble
from .data import options, spec_id
from .runtime import figure_assets, figure_head_html, prefetch_runtime
from .types import FigureContext, FigureError, RenderedFigure

# Each kind is declared in site_src/schema.py (FIGURE_KINDS: its data, options and claim kind) and
# drawn by the module site_src/figures/<kind>.py with build(spec, ctx) -> FigureParts. They are
# imported when a figure of theirs is drawn: Altair costs a seventh of a second to import, which a
# rebuild that draws no figure should not pay.
KINDS = tuple(FIGURE_KINDS)

__all__ = ["FigureContext", "FigureError", "RenderedFigure", "render_figure", "figure_assets",
           "figure_head_html", "prefetch_runtime", "KINDS"]


def render_figure(kind: str, spec: dict, ctx: FigureContext, deferred: bool = False) -> RenderedFigure:
    """The figure of a block. With `deferred` its drawing is finished on a thread of its own
    (RenderedFigure.drawing; `complete()` waits for it): the build renders on meanwhile."""
    if kind not in KINDS:
        raise FigureError(spec_id(spec), f"unknown figure kind {kind!r} (known: {', '.join(sorted(KINDS))})")
    figure_id = spec.get("id")
    if not figure_id or not FIGURE_ID.fullmatch(str(figure_id)):
        raise FigureError(spec_id(spec), "`id` is required: letters, digits, '-' and '_' only")
    parts = import_module(f".{kind}", __package__).build(spec, ctx)
    return assemble(kind, str(figure_id), parts, ctx, options(spec), deferred)
