"""Kind `patch_picker`: pick a component and patch it.

For one patching mode, every pair's clean margin and patched margin for the chosen component in
the chosen dimension (two selects; the static view shows `options.dimension`). The y axis is fixed
over all components and dimensions, so the original score stays where it was while the picked
component changes; a rule joins each pair's clean and patched margin. A patched
margin whose patch left the clean activation distribution (`offdist_flag`) is drawn as a cross in
its own colour, and the table says so for every row.
"""
from __future__ import annotations

import json

import altair as alt

from bundle_kit import rankstats

from .data import fmt_rank, offdist_label, ranked_spec, read_rows, spec_id
from .types import Control, FigureError, FigureParts, Table


STATES = ["clean", "patched", "patched, off-distribution"]


def build(spec: dict, ctx) -> FigureParts:
    """The patch picker's parts: each pair's clean and patched margin for the chosen component."""
    rs = ranked_spec(spec, ctx)
    opts, mode, patching, ranked, dimension = rs.opts, rs.mode, rs.patching, rs.ranked, rs.dimension
    r = ranked[dimension]
    _, patch_rows = read_rows(ctx, patching, rankstats.PATCHING_FIELDS + ("patched_margin",))
    rows = [
        {"dimension": row["dimension"], "component": row["component"], "pair_id": str(row["pair_id"]),
         "clean_margin": row["clean_margin"], "patched_margin": row["patched_margin"],
         "moves_pct": round(100 * rankstats.patch_fraction(row), 4), "offdist": offdist_label(row)}
        for row in patch_rows
        if row["mode"] == mode and row["dimension"] in ranked and row["component"] in ranked[row["dimension"]].patch_rank
    ]
    default = opts.get("component") or min(r.components, key=lambda c: (r.patch_rank[c], r.components.index(c)))
    if default not in r.patch_rank:
        raise FigureError(spec_id(spec), f"component {default!r} is not patched in {patching} ({dimension}, {mode})")
    pairs = sorted({row["pair_id"] for row in rows if row["component"] == default and row["dimension"] == dimension},
                   key=lambda p: next(x["clean_margin"] for x in rows if x["pair_id"] == p))
    several = len(ranked) > 1
    margins = [v for row in rows for v in (row["clean_margin"], row["patched_margin"])]
    low, high = min(margins + [0.0]), max(margins + [0.0])
    pad = 0.05 * (high - low or 1.0)

    def chart(p: dict):
        picked = alt.param(name="component", value=default)
        chosen = alt.param(name="dimension", value=dimension)
        base = alt.Chart(alt.NamedData(name="pairs")).transform_filter(
            "datum.component == component && datum.dimension == dimension")
        # sorted by clean margin within whichever dimension is shown
        x = alt.X("pair_id:N", sort=alt.EncodingSortField(field="clean_margin", op="min"), title="pairs, by clean margin",
                  axis=alt.Axis(labels=len(pairs) <= 12, ticks=len(pairs) <= 24, labelAngle=-45))
        y_scale = alt.Scale(domain=[low - pad, high + pad], nice=False, zero=False)
        link = base.mark_rule(color=p["muted"], strokeWidth=1.5).encode(
            x=x, y=alt.Y("clean_margin:Q", scale=y_scale, title="margin r(chosen) − r(rejected)"),
            y2="patched_margin:Q")
        folded = base.transform_fold(["clean_margin", "patched_margin"], as_=["which", "margin"]).transform_calculate(
            state="datum.which == 'clean_margin' ? 'clean' : datum.offdist == 'flagged' ? 'patched, off-distribution' : 'patched'")
        tooltip = [alt.Tooltip("pair_id:N", title="pair"), alt.Tooltip("clean_margin:Q", title="clean margin", format="+.4f"),
                   alt.Tooltip("patched_margin:Q", title="patched margin", format="+.4f"),
                   alt.Tooltip("moves_pct:Q", title="moves %", format=".4f"),
                   alt.Tooltip("offdist:N", title="off-distribution")]
        points = folded.mark_point(size=55, filled=True, opacity=1).encode(
            x=x, y=alt.Y("margin:Q", scale=y_scale),
            color=alt.Color("state:N", title="margin", scale=alt.Scale(domain=STATES, range=[p["reference"], p["accent2"], p["kinds"][3]]),
                            legend=alt.Legend(orient="bottom", direction="vertical")),
            shape=alt.Shape("state:N", scale=alt.Scale(domain=STATES, range=["circle", "diamond", "cross"])),
            tooltip=tooltip,
        ).properties(name="datamark_points")
        zero = alt.Chart().mark_rule(color=p["text"], strokeWidth=1).encode(y=alt.datum(0))
        # the picker names what it shows: the component, the dimension and the mode
        shown = json.dumps(f" patched ({mode}), dimension ")
        return alt.layer(link, points, zero).add_params(picked, chosen).properties(
            width=320, height=260, title=alt.TitleParams(text=alt.ExprRef(f"component + {shown} + dimension")))

    # with several dimensions a component's patch rank depends on the one shown: the names alone
    options_list = [(c, c if several else f"{c} (patch rank {fmt_rank(r.patch_rank[c])})") for c in r.components]
    table = Table(["dimension", "component", "pair", "clean margin", "patched margin", "moves %", "off-distribution"],
                  [[x["dimension"], x["component"], x["pair_id"], f'{x["clean_margin"]:+.6f}', f'{x["patched_margin"]:+.6f}',
                    f'{x["moves_pct"]:.4f}', x["offdist"]] for x in rows])
    shown = [x["offdist"] for x in rows if x["component"] == default and x["dimension"] == dimension]
    flags = (f"{shown.count('flagged')} of the {len(shown)} patched margins are flagged off-distribution. "
             if "not scored" not in shown else "The patches were not scored for off-distribution. ")
    alt_text = (f"Dot plot for dimension {dimension}, {mode} patching of {default}: for each of {len(pairs)} "
                f"pairs the clean margin and the margin with {default} patched, joined by a line. {flags}"
                f"Another component{' or dimension' if several else ''} can be chosen in the interactive view; "
                f"the data table lists all {len(r.components)} components{' of every dimension' if several else ''}.")
    controls = [Control("component", f"Component to patch ({mode} patching)" if several
                        else f"Component to patch ({dimension}, {mode} patching)", options_list, default)]
    if several:
        controls.append(Control("dimension", "Dimension", [(d, d) for d in ranked], dimension))
    return FigureParts(chart=chart, table=table, marks=2 * len(pairs), alt=alt_text, controls=controls,
                       datasets={"pairs": rows})
