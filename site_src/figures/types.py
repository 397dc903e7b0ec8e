"""The data types that cross the generator <-> figures boundary, and what a kind returns."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import BuildError
from site_src.receipts import Resolved


class FigureError(BuildError, ValueError):
    """A figure that cannot be drawn: names the figure id and, where known, the fixture and line."""

    def __init__(self, figure_id: str, message: str):
        self.figure_id = figure_id
        super().__init__(message, f"figure {figure_id!r}")


@dataclass
class FigureContext:
    resolve_path: Callable[[str], Path]
    resolve_ref: Callable[[str], Resolved]
    receipt_html: Callable[[Resolved, str], str]
    cache_dir: Path
    asset_prefix: str
    # (name, required fields) -> the rows of a JSONL fixture, shared and read-only (the generator's
    # own fixture cache, so a file pages aggregate over is parsed once); None: figures read it themselves
    read_rows: Callable[[str, tuple], list[dict]] | None = None


@dataclass
class Drawing:
    """A figure's drawing still being made: `token` in the body stands for the HTML that
    `future` gives, with the files (the live view's spec) that go with it."""
    token: str
    future: Any   # concurrent.futures.Future of (html, {path: bytes})

    def put_into(self, html: str, files: dict) -> str:
        """`html` with the drawing in place of the token, its files added to `files` (waits for
        it; raises what drawing raised)."""
        drawn, extra = self.future.result()
        files.update(extra)
        return html.replace(self.token, drawn, 1)


@dataclass
class RenderedFigure:
    body_html: str
    files: dict[str, bytes] = field(default_factory=dict)
    marks: int = 0
    sources: list[Resolved] = field(default_factory=list)
    drawing: Drawing | None = None   # set only when asked for a deferred figure

    def complete(self) -> "RenderedFigure":
        """The figure with its drawing in place (waits for it; raises what drawing raised)."""
        if self.drawing is None:
            return self
        files = dict(self.files)
        return RenderedFigure(self.drawing.put_into(self.body_html, files), files, self.marks, self.sources)


@dataclass
class Control:
    """A select that drives one top-level Vega signal of the interactive view."""

    signal: str
    label: str
    options: list[tuple[str, str]]  # (value, display text)
    value: str


@dataclass
class Table:
    columns: list[str]
    rows: list[list[Any]]


@dataclass
class FigureParts:
    """What one kind builds; the shared assembly turns it into HTML, SVG and CSV.

    `chart(palette)` returns an Altair chart for one theme (None for HTML-only kinds), or a list of
    charts: the panels of a multi-panel figure, each drawn on its own so that the page wraps them
    to the column (side by side at 1280 px, stacked on a phone). Data marks are layers whose name
    starts with `datamark_`, so tests can count them in the SVG. A drawing is at most
    theme.MAX_WIDTH wide with all its text theme.FONT_SIZE (docs/figures.md); one that cannot be
    sets `scroll` and is shown at its own size in a box that scrolls sideways on a narrow screen.
    """

    chart: Callable[[dict], Any] | None
    table: Table
    marks: int
    alt: str
    controls: list[Control] = field(default_factory=list)
    sources: list[Resolved] = field(default_factory=list)
    html: str = ""
    # Large inline data goes here, referenced from the chart as alt.NamedData(name): Altair then
    # validates a small spec instead of every row (the rows are added to `datasets` after).
    datasets: dict[str, list] = field(default_factory=dict)
    scroll: bool = False
