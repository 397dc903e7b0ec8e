"""Kind `heatmap`: a labelled matrix (for example cosines between objective directions).

The data is a value reference to a JSON block, either {"labels": [...], "values": [[...]]}
or {row: {column: value}}. Each cell shows its value; the colour scale is diverging.
"""
from __future__ import annotations

import altair as alt

from .data import format_option, options, size_option, spec_data, spec_id
from .theme import FONT_SIZE, MAX_WIDTH
from .types import FigureError, FigureParts, Table


def _cells(block, figure_id: str, where: str) -> tuple[list[str], list[str], list[dict]]:
    if isinstance(block, dict) and "labels" in block and "values" in block:
        labels, matrix = [str(x) for x in block["labels"]], block["values"]
        cols = [str(x) for x in block.get("column_labels", labels)]
        if len(matrix) != len(labels) or any(len(row) != len(cols) for row in matrix):
            raise FigureError(figure_id, f"{where}: `values` is not a {len(labels)} x {len(cols)} matrix")
        return labels, cols, [{"row": r, "column": c, "value": matrix[i][j]}
                              for i, r in enumerate(labels) for j, c in enumerate(cols)]
    if isinstance(block, dict) and all(isinstance(v, dict) for v in block.values()):
        labels = list(block)
        cols = list(dict.fromkeys(c for v in block.values() for c in v))
        return labels, cols, [{"row": r, "column": c, "value": block[r][c]}
                              for r in labels for c in cols if c in block[r]]
    raise FigureError(figure_id, f"{where}: expected {{labels, values}} or {{row: {{column: value}}}}")


def build(spec: dict, ctx) -> FigureParts:
    """The heatmap's parts: one labelled cell per matrix entry, on a diverging scale."""
    opts = options(spec)
    resolved = ctx.resolve_ref(spec_data(spec, "matrix"))
    rows_l, cols_l, cells = _cells(resolved.value, spec_id(spec), resolved.location)
    for cell in cells:
        if not isinstance(cell["value"], (int, float)):
            raise FigureError(spec_id(spec), f"{resolved.location}: cell {cell['row']}/{cell['column']} is not a number")
    domain = opts.get("domain", [-1, 1])
    fmt = format_option(spec, "format", ".2f")
    title = opts.get("value_title", "value")
    size = size_option(spec, "cell", 44, 8, 200)
    # a matrix wider than a phone's column keeps its labels readable by scrolling, not shrinking
    wide = size * len(cols_l) + 190 > MAX_WIDTH

    def chart(p: dict):
        base = alt.Chart(alt.NamedData(name="cells")).encode(
            x=alt.X("column:N", sort=cols_l, title=None, axis=alt.Axis(labelAngle=-40)),
            # the label column reserved whole (vl-convert's font is narrower than many browsers')
            y=alt.Y("row:N", sort=rows_l, title=None, axis=alt.Axis(labelLimit=170, minExtent=170)))
        # each cell has a thin outline in the text colour (a pale cell still stands 3:1 against the
        # background) and is labelled with its value: the number, not the shade, carries it
        rect = base.mark_rect(stroke=p["text"], strokeWidth=0.5).encode(
            color=alt.Color("value:Q", title=title, scale=alt.Scale(scheme=p["heat_scheme"], domain=domain)),
            tooltip=[alt.Tooltip("row:N"), alt.Tooltip("column:N"), alt.Tooltip("value:Q", format=fmt)],
        ).properties(name="datamark_cells")
        # Dark text on the light middle of the scale, light text on its saturated ends.
        span = (domain[1] - domain[0]) / 2
        middle = (domain[1] + domain[0]) / 2
        text = base.mark_text(fontSize=12 if wide else FONT_SIZE).encode(
            text=alt.Text("value:Q", format=fmt),
            color=alt.condition(f"abs(datum.value - {middle}) > {0.55 * span}", alt.value("#ffffff"), alt.value("#111111")))
        return alt.layer(rect, text).properties(width=size * len(cols_l), height=size * len(rows_l))

    table = Table(["row", "column", title], [[c["row"], c["column"], format(c["value"], fmt)] for c in cells])
    alt_text = (f"Heatmap of {len(rows_l)} by {len(cols_l)} {title}s ({', '.join(rows_l[:6])}"
                f"{', ...' if len(rows_l) > 6 else ''}); each cell is labelled with its value.")
    return FigureParts(chart=chart, table=table, marks=len(cells), alt=alt_text, sources=[resolved],
                       datasets={"cells": cells}, scroll=wide)
