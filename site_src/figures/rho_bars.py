"""Kind `rho_bars`: per-dimension Spearman rho as bars, one panel per series, side by side.

Each series is a value reference to a {dimension: rho} block (for example this study's
golden.json#per_dimension_rho beside a quoted published block), with its own label.
"""
from __future__ import annotations

import altair as alt

from .data import options, size_option, spec_data, spec_id
from .types import FigureError, FigureParts, Table


def build(spec: dict, ctx) -> FigureParts:
    """The rho bars' parts: one bar per (series, dimension), one panel per series."""
    opts = options(spec)
    series = spec_data(spec, "series")
    if not isinstance(series, list) or not series:
        raise FigureError(spec_id(spec), "`data.series` must be a list of {label, ref}")
    rows, sources, labels, dims = [], [], [], []
    for item in series:
        if not isinstance(item, dict) or "ref" not in item or "label" not in item:
            raise FigureError(spec_id(spec), "each series needs `label` and `ref`")
        resolved = ctx.resolve_ref(item["ref"])
        block = resolved.value
        if not isinstance(block, dict):
            raise FigureError(spec_id(spec), f"{item['ref']} ({resolved.location}) is not a {{dimension: rho}} block")
        sources.append(resolved)
        labels.append(str(item["label"]))
        for dim, rho in block.items():
            if not isinstance(rho, (int, float)):
                raise FigureError(spec_id(spec), f"{resolved.location}: {dim} is not a number")
            dims.append(dim) if dim not in dims else None
            rows.append({"series": str(item["label"]), "dimension": dim, "rho": float(rho),
                         "sign": "positive" if rho >= 0 else "negative"})
    width = size_option(spec, "width", 220 if len(labels) > 1 else 360, 80, 1600)

    def chart(p: dict):
        base = alt.Chart()
        bars = base.mark_bar().encode(
            x=alt.X("rho:Q", title="Spearman rho", scale=alt.Scale(domain=[-1, 1]),
                    axis=alt.Axis(values=[-1, -0.5, 0, 0.5, 1])),  # default ticks collide in narrow panels
            y=alt.Y("dimension:N", sort=dims, title=None),
            color=alt.Color("sign:N", title="sign",
                            scale=alt.Scale(domain=["positive", "negative"], range=[p["positive"], p["negative"]])),
            tooltip=[alt.Tooltip("series:N"), alt.Tooltip("dimension:N"), alt.Tooltip("rho:Q", format="+.3f")],
        ).properties(name="datamark_bars")
        zero = base.mark_rule(color=p["text"], strokeWidth=1).encode(x=alt.datum(0))
        return alt.layer(bars, zero, data=alt.NamedData(name="rhos")).properties(width=width).facet(
            column=alt.Column("series:N", sort=labels, title=None, header=alt.Header(labelLimit=width))
        ).resolve_scale(y="independent")  # series may cover different dimensions: no empty rows

    table = Table(["series", "dimension", "rho"], [[r["series"], r["dimension"], f'{r["rho"]:+.6f}'] for r in rows])
    neg = sum(1 for r in rows if r["rho"] < 0)
    alt_text = (f"Bar chart of Spearman rho per dimension for {len(labels)} series "
                f"({'; '.join(labels)}): {len(rows)} bars, {neg} negative, {len(rows) - neg} zero or positive.")
    return FigureParts(chart=chart, table=table, marks=len(rows), alt=alt_text, sources=sources,
                       datasets={"rhos": rows})
