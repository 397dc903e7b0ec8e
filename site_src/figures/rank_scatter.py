"""Kind `rank_scatter`: attribution rank against patch rank, one dot per component.

Dots on the rising diagonal are components both methods rank alike. Colour = layer, shape =
kind; a dimension selector drives the signal `dimension` of the interactive view.
"""
from __future__ import annotations

import json

import altair as alt

from .data import fmt_rank, ranked_spec
from .types import Control, FigureParts, Table


def build(spec: dict, ctx) -> FigureParts:
    """The rank scatter's parts: attribution rank against patch rank, one dot per component."""
    rs = ranked_spec(spec, ctx)
    mode, ranked, dimension = rs.mode, rs.ranked, rs.dimension

    rows = []
    for dim, r in ranked.items():
        for c in r.components:
            rows.append({
                "dimension": dim, "component": c, "kind": r.kind[c], "layer": r.layer[c],
                "attribution_rank": r.attribution_rank[c], "patch_rank": r.patch_rank[c],
                "moves_pct": round(100 * r.patch_score[c], 4),
            })
    n_max = max(len(r.components) for r in ranked.values())
    shown = len(ranked[dimension].components)

    def chart(p: dict):
        dim = alt.param(name="dimension", value=dimension)
        base = alt.Chart(alt.NamedData(name="components")).transform_filter("datum.dimension == dimension")
        scale = alt.Scale(domain=[0, n_max + 1], nice=False)
        diagonal = alt.Chart(alt.Data(values=[{"r": 0}, {"r": n_max + 1}])).mark_line(
            color=p["reference"], strokeDash=[4, 4], strokeWidth=1
        ).encode(x=alt.X("r:Q", scale=scale), y=alt.Y("r:Q", scale=scale))
        # an outline in the text colour keeps every dot at 3:1 or more against the background,
        # whatever its layer's colour (WCAG 1.4.11); legends go below, so the drawing stays narrow
        dots = base.mark_point(filled=True, size=70, opacity=1, stroke=p["text"], strokeWidth=0.8).encode(
            x=alt.X("attribution_rank:Q", title="attribution rank (1 = largest)", scale=scale),
            y=alt.Y("patch_rank:Q", title="patch rank (1 = largest)", scale=scale),
            color=alt.Color("layer:Q", title="layer", scale=alt.Scale(scheme=p["layer_scheme"]),
                            legend=alt.Legend(orient="bottom", gradientLength=120)),
            shape=alt.Shape("kind:N", title="kind", legend=alt.Legend(orient="bottom")),
            tooltip=[
                alt.Tooltip("component:N"), alt.Tooltip("attribution_rank:Q", title="attribution rank"),
                alt.Tooltip("patch_rank:Q", title="patch rank"),
                alt.Tooltip("moves_pct:Q", title="moves %", format=".4f"),
            ],
        ).properties(name="datamark_dots")
        return alt.layer(diagonal, dots).add_params(dim).properties(
            width=290, height=290, title=alt.TitleParams(text=alt.ExprRef("'Dimension: ' + dimension + " + json.dumps(f", {mode} patching"))))

    table = Table(
        ["dimension", "component", "kind", "layer", "attribution rank", "patch rank", "moves %"],
        [[r["dimension"], r["component"], r["kind"], r["layer"], fmt_rank(r["attribution_rank"]),
          fmt_rank(r["patch_rank"]), f'{r["moves_pct"]:.4f}'] for r in rows],
    )
    controls = []
    if len(ranked) > 1:
        controls.append(Control("dimension", "Dimension", [(d, d) for d in ranked], dimension))
    alt_text = (f"Scatter plot of {shown} components, attribution rank against patch rank "
                f"({mode} patching), dimension {dimension}; the dashed diagonal is where the two "
                f"rankings agree. {len(ranked)} dimension(s) in the data table.")
    return FigureParts(chart=chart, table=table, marks=shown, alt=alt_text, controls=controls,
                       datasets={"components": rows})
