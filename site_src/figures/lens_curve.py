"""Kind `lens_curve`: the reward lens, the running margin layer by layer, with crystallization.

Per dimension, the mean running margin over pairs at each depth; crystallization depth (first
layer where m_l >= m_L / 2, rankstats.crystallization_depth) is taken on that mean curve. One
dimension is drawn at a time in the accent colour, labelled with its name and its
crystallization depth (a diamond and a dashed rule); the others stay as thin grey context lines,
so twelve dimensions never need twelve colours. A *Dimension* select (live view) picks the one
drawn; `options.dimension` the static view's (default: the first).
"""
from __future__ import annotations

import altair as alt

from bundle_kit import rankstats

from .data import computed, file_receipt, options, pick_dimension, read_rows, spec_data, spec_id
from .types import Control, FigureError, FigureParts, Table

FIELDS = ("dimension", "pair_id", "layer", "running_margin")


def build(spec: dict, ctx) -> FigureParts:
    """The lens curve's parts: the mean running margin per dimension against depth, with crystallization
    depth."""
    opts = options(spec)
    lens = spec_data(spec, "lens")
    path, rows = read_rows(ctx, lens, FIELDS)
    buckets: dict[str, dict[int, list[float]]] = {}
    for row in rows:
        buckets.setdefault(row["dimension"], {}).setdefault(int(row["layer"]), []).append(row["running_margin"])
    if not buckets:
        raise FigureError(spec_id(spec), f"{lens} has no lens rows")
    shown = pick_dimension(spec, sorted(buckets), opts.get("dimension"))
    base = file_receipt(ctx, lens)
    curve, marks, sources = [], [], []
    for dim in sorted(buckets):
        layers = sorted(buckets[dim])
        if layers != list(range(len(layers))):
            raise FigureError(spec_id(spec), f"{path.name}: dimension {dim} lacks layers (has {layers})")
        means = [rankstats.mean(buckets[dim][layer]) for layer in layers]
        depth_of = [(layer + 1) / len(layers) for layer in layers]
        for d, m in zip(depth_of, means):
            curve.append({"dimension": dim, "depth": round(d, 6), "running_margin": round(m, 6)})
        crystal = rankstats.crystallization_depth(means)
        marks.append({"dimension": dim, "depth": round(crystal, 6),
                      "running_margin": round(means[round(crystal * len(layers)) - 1], 6)})
        sources.append(computed(base, crystal, f"crystallization depth of {dim}: first layer with mean running "
                                               "margin >= half the final one, as a fraction of depth (rankstats)"))
    single = len(buckets) == 1

    def chart(p: dict):
        dim = alt.param(name="dimension", value=shown)
        # five ticks: eleven at 14 px run together in a phone's column
        x = alt.X("depth:Q", title="depth (fraction of layers)", scale=alt.Scale(domain=[0, 1]),
                  axis=alt.Axis(values=[0, 0.25, 0.5, 0.75, 1], format="~g"))
        y = alt.Y("running_margin:Q", title="mean running margin")
        data = alt.Chart(alt.NamedData(name="curve"))
        chosen = "datum.dimension == dimension"
        others = data.transform_filter(f"!({chosen})").mark_line(strokeWidth=1, color=p["muted"], opacity=1).encode(
            x=x, y=y, detail="dimension:N",
            tooltip=[alt.Tooltip("dimension:N"), alt.Tooltip("depth:Q", format=".3f"),
                     alt.Tooltip("running_margin:Q", title="running margin", format="+.4f")],
        ).properties(name="datamark_context")
        line = data.transform_filter(chosen).mark_line(strokeWidth=3, color=p["accent"]).encode(
            x=x, y=y,
            tooltip=[alt.Tooltip("dimension:N"), alt.Tooltip("depth:Q", format=".3f"),
                     alt.Tooltip("running_margin:Q", title="running margin", format="+.4f")],
        ).properties(name="datamark_lines")
        crystal = alt.Chart(alt.Data(values=marks)).transform_filter(chosen)
        point = crystal.mark_point(shape="diamond", size=130, filled=True, color=p["text"]).encode(
            x=x, y=y, tooltip=[alt.Tooltip("dimension:N"), alt.Tooltip("depth:Q", title="crystallization depth", format=".3f")],
        ).properties(name="datamark_crystal")
        rule = crystal.mark_rule(color=p["muted"], strokeDash=[4, 3]).encode(x="depth:Q")
        label = crystal.mark_text(align="left", dx=6, dy=-10, color=p["text"]).encode(
            x="depth:Q", y=y, text=alt.Text("depth:Q", format=".2f"))
        zero = alt.Chart().mark_rule(color=p["muted"], strokeWidth=1).encode(y=alt.datum(0))
        layers = [zero, others, line, rule, point, label]
        return alt.layer(*layers).add_params(dim).properties(
            width=330, height=240,
            title=alt.TitleParams(text=alt.ExprRef("'Dimension: ' + dimension"),
                                  **({} if single else {"subtitle": "the other dimensions in grey"})))

    table = Table(["dimension", "depth", "mean running margin", "crystallization depth"],
                  [[c["dimension"], f'{c["depth"]:.4f}', f'{c["running_margin"]:+.6f}',
                    f'{next(m["depth"] for m in marks if m["dimension"] == c["dimension"]):.4f}'] for c in curve])
    summary = "; ".join(f"{m['dimension']} crystallizes at {m['depth']:.2f}" for m in marks[:6])
    alt_text = (f"Line chart of the mean running margin against depth for {len(marks)} dimension(s), "
                f"with the crystallization depth marked: {summary}{'; ...' if len(marks) > 6 else ''}.")
    controls = [Control("dimension", "Dimension drawn", [(d, d) for d in sorted(buckets)], shown)] if not single else []
    return FigureParts(chart=chart, table=table, marks=len(marks), alt=alt_text, sources=sources,
                       controls=controls, datasets={"curve": curve})
