"""Kind `margin_distribution`: each pair's clean margin, one row per dimension.

One tick per distinct (dimension, pair); the mean of each dimension as a larger mark and a
zero rule, so pairs the model gets backwards (negative margin) stand out.
"""
from __future__ import annotations

import altair as alt

from bundle_kit import rankstats

from .data import options, read_rows, spec_data, spec_id
from .types import FigureError, FigureParts, Table


def build(spec: dict, ctx) -> FigureParts:
    """The margin distribution's parts: a tick per pair's margin and a diamond at each dimension's mean."""
    opts = options(spec)
    source = spec_data(spec, "pairs")
    path, rows = read_rows(ctx, source, ("dimension", "pair_id"))
    field = opts.get("field") or ("margin" if rows and "margin" in rows[0] else "clean_margin")
    seen: dict[tuple, float] = {}
    for row in rows:
        if field not in row:
            raise FigureError(spec_id(spec), f"{path.name}:{row['_line']}: row lacks field {field!r}")
        value = row[field]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise FigureError(spec_id(spec), f"{path.name}:{row['_line']}: {field} {value!r} is not a number")
        seen.setdefault((row["dimension"], str(row["pair_id"])), row[field])
    values = [{"dimension": d, "pair_id": p, "margin": m} for (d, p), m in seen.items()]
    dims = sorted({v["dimension"] for v in values})
    means = [{"dimension": d, "margin": round(rankstats.mean(v["margin"] for v in values if v["dimension"] == d), 6)}
             for d in dims]

    def chart(p: dict):
        # the label column reserved whole (vl-convert's font is narrower than many browsers')
        y = alt.Y("dimension:N", sort=dims, title=None, axis=alt.Axis(labelLimit=150, minExtent=150))
        ticks = alt.Chart(alt.NamedData(name="margins")).mark_tick(color=p["accent"], thickness=2, opacity=0.75).encode(
            x=alt.X("margin:Q", title=f"{field.replace('_', ' ')} r(chosen) − r(rejected)"), y=y,
            tooltip=[alt.Tooltip("dimension:N"), alt.Tooltip("pair_id:N", title="pair"),
                     alt.Tooltip("margin:Q", format="+.4f")],
        ).properties(name="datamark_ticks")
        mean = alt.Chart(alt.Data(values=means)).mark_point(shape="diamond", filled=True, size=90,
                                                             color=p["text"]).encode(
            x="margin:Q", y=y, tooltip=[alt.Tooltip("dimension:N"), alt.Tooltip("margin:Q", title="mean", format="+.4f")])
        zero = alt.Chart().mark_rule(color=p["text"], strokeWidth=1).encode(x=alt.datum(0))
        return alt.layer(zero, ticks, mean).properties(width=260, height=max(60, 26 * len(dims)))

    table = Table(["dimension", "pair", field], [[v["dimension"], v["pair_id"], f'{v["margin"]:+.6f}'] for v in values])
    negative = sum(1 for v in values if v["margin"] < 0)
    alt_text = (f"Strip plot of {len(values)} pair margins across {len(dims)} dimension(s), one tick per pair, "
                f"diamonds at each dimension's mean; {negative} margin(s) are negative.")
    return FigureParts(chart=chart, table=table, marks=len(values), alt=alt_text, datasets={"margins": values})
