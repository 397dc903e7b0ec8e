"""Kind `removal_curve`: how much of the margin goes when the top k blocks are patched together.

Per objective (a `dimension`), read from the study's summary (`data.where`, a reference to
{objective: {order, curve, moved_curve, k80}}, as bundle_kit/localize.py's `where` writes it): the
**removed share** of the first k blocks of the objective's order patched together, k = 1..n, with
the target line (`data.target`) and the smallest k that reaches it; and the **moved share** (how
far the margin moves, either way) beside the band that random unit directions read through the
same patched passes give (`data.null_curve`, the null's per-direction curve rows, and `data.null_sums`,
its per-direction sums; the band is localize.band over the directions, one implementation). One
objective is drawn at a time; an *Objective* select (live view) picks it.
"""
from __future__ import annotations

import math

import altair as alt

from bundle_kit import localize

from .data import computed, file_receipt, options, pick_dimension, read_rows, spec_data, spec_id
from .types import Control, FigureError, FigureParts, Table

NULL_FIELDS = ("dimension", "direction", "curve")
SUM_FIELDS = ("dimension", "direction", "abs_margin")


def _summary(ctx, spec: dict) -> tuple[dict, list]:
    resolved = ctx.resolve_ref(spec_data(spec, "where"))
    block = resolved.value
    if not isinstance(block, dict) or not block:
        raise FigureError(spec_id(spec), f"{resolved.location} is not an {{objective: {{order, curve, ...}}}} block")
    for objective, entry in block.items():
        ok = isinstance(entry, dict) and all(isinstance(entry.get(k), list) for k in ("order", "curve", "moved_curve"))
        if not ok or not len(entry["order"]) == len(entry["curve"]) == len(entry["moved_curve"]) > 0:
            raise FigureError(spec_id(spec), f"{resolved.location}: {objective} lacks order, curve and moved_curve "
                                             "of one length")
    return block, [resolved]


def _null_bands(ctx, spec: dict, objectives: list, n: int) -> tuple[dict, list]:
    """{objective: [[low, high] of the moved share at k] for k = 1..n} over the random directions."""
    null, sums = spec_data(spec, "null_curve"), spec_data(spec, "null_sums")
    _, curve_rows = read_rows(ctx, null, NULL_FIELDS)
    _, sum_rows = read_rows(ctx, sums, SUM_FIELDS)
    size = {(r["dimension"], r["direction"]): r["abs_margin"] for r in sum_rows}
    moved: dict[str, list[list[float]]] = {o: [[] for _ in range(n)] for o in objectives}
    for row in curve_rows:
        if row["dimension"] not in moved:
            continue
        key = (row["dimension"], row["direction"])
        if key not in size or len(row["curve"]) != n:
            raise FigureError(spec_id(spec), f"{null}: direction {row['direction']} of {row['dimension']} has no "
                                             f"sums in {sums} or not {n} sets")
        for k, value in enumerate(row["curve"]):
            moved[row["dimension"]][k].append(localize.patch_score(value, size[key]))
    bands = {o: [localize.band(values) for values in moved[o]] for o in objectives if moved[o][0]}
    base = file_receipt(ctx, null)
    sources = [computed(base, len(moved[o][0]), f"random directions of {o}: the moved share of each nested set, "
                                             f"5th to 95th percentile over them (localize.band)") for o in bands]
    return bands, sources


def build(spec: dict, ctx) -> FigureParts:
    """The curve's parts: removed and moved share against the number of blocks patched together."""
    opts = options(spec)
    block, sources = _summary(ctx, spec)
    target_ref = ctx.resolve_ref(spec_data(spec, "target"))
    target = target_ref.value
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target <= 1:
        raise FigureError(spec_id(spec), f"{target_ref.location} is not a share in (0, 1]")
    sources.append(target_ref)
    objectives = list(block)
    n = len(block[objectives[0]]["order"])
    if any(len(block[o]["order"]) != n for o in objectives):
        raise FigureError(spec_id(spec), "the objectives' orders differ in length")
    bands, null_sources = _null_bands(ctx, spec, objectives, n)
    sources += null_sources
    shown = pick_dimension(spec, objectives, opts.get("dimension"))

    points, marks = [], []
    for o in objectives:
        entry = block[o]
        for k in range(n):
            low, high = bands[o][k] if o in bands else (None, None)
            points.append({"dimension": o, "k": k + 1, "block": entry["order"][k],
                           "removed": round(float(entry["curve"][k]), 6),
                           "moved": round(float(entry["moved_curve"][k]), 6),
                           "null_low": None if low is None or math.isnan(low) else round(low, 6),
                           "null_high": None if high is None or math.isnan(high) else round(high, 6)})
        k80 = localize.smallest_k([float(v) for v in entry["curve"]], float(target))
        if k80 <= n:
            marks.append({"dimension": o, "k": k80, "removed": round(float(entry["curve"][k80 - 1]), 6)})

    def chart(p: dict):
        dim = alt.param(name="dimension", value=shown)
        chosen = "datum.dimension == dimension"
        data = alt.Chart(alt.NamedData(name="curve")).transform_filter(chosen)
        x = alt.X("k:Q", title="blocks patched together (in patch-score order)",
                  scale=alt.Scale(domain=[1, n]), axis=alt.Axis(values=list(range(1, n + 1)), format="d"))
        y = alt.Y("removed:Q", title="share of the margin")
        tips = [alt.Tooltip("dimension:N", title="objective"), alt.Tooltip("k:Q", title="blocks"),
                alt.Tooltip("block:N", title="last block added"),
                alt.Tooltip("removed:Q", title="removed share", format="+.3f"),
                alt.Tooltip("moved:Q", title="moved share", format=".3f")]
        # the band as a range bar at each k: a translucent area would fall under 3:1 contrast
        band = data.mark_rule(color=p["muted"], strokeWidth=5).encode(
            x=x, y=alt.Y("null_low:Q", title="share of the margin"), y2="null_high:Q",
            tooltip=[alt.Tooltip("k:Q", title="blocks"),
                     alt.Tooltip("null_low:Q", title="random directions, 5th pct", format=".3f"),
                     alt.Tooltip("null_high:Q", title="95th pct", format=".3f")],
        ).properties(name="datamark_null")
        moved = data.mark_line(color=p["text"], strokeDash=[5, 3], strokeWidth=1.5, point=True).encode(
            x=x, y=alt.Y("moved:Q"), tooltip=tips).properties(name="datamark_moved")
        removed = data.mark_line(color=p["accent"], strokeWidth=3, point=True).encode(
            x=x, y=y, tooltip=tips).properties(name="datamark_removed")
        goal = alt.Chart().mark_rule(color=p["text"], strokeDash=[2, 2]).encode(y=alt.datum(float(target)))
        zero = alt.Chart().mark_rule(color=p["muted"], strokeWidth=1).encode(y=alt.datum(0))
        layers = [zero, band, goal, moved, removed]
        if marks:
            layers.append(alt.Chart(alt.Data(values=marks)).transform_filter(chosen).mark_point(
                shape="diamond", size=140, filled=True, color=p["text"]).encode(
                x="k:Q", y="removed:Q",
                tooltip=[alt.Tooltip("k:Q", title=f"smallest set reaching {target:g}")]).properties(name="datamark_k80"))
        return alt.layer(*layers).add_params(dim).properties(
            width=300, height=220,
            title=alt.TitleParams(text=alt.ExprRef("'Objective: ' + dimension"),
                                  subtitle=["solid: removed share; dashed: moved share",
                                            f"grey bars: random directions; dotted: {target:g}"]))

    def cell(v):
        return "" if v is None else f"{v:+.6f}"

    table = Table(["objective", "blocks patched", "last block added", "removed share", "moved share",
                   "random directions 5th pct", "random directions 95th pct"],
                  [[r["dimension"], r["k"], r["block"], cell(r["removed"]), cell(r["moved"]),
                    cell(r["null_low"]), cell(r["null_high"])] for r in points])
    reach = "; ".join(f"{o}: {next((m['k'] for m in marks if m['dimension'] == o), None) or 'not reached'}"
                      for o in objectives)
    alt_text = (f"Line chart, per objective, of the share of the margin removed (and moved) when the first k of "
                f"{n} blocks, in patch-score order, are patched together, with the band random directions give; "
                f"smallest k reaching {target:g}: {reach}.")
    controls = [Control("dimension", "Objective drawn", [(o, o) for o in objectives], shown)] if len(objectives) > 1 else []
    return FigureParts(chart=chart, table=table, marks=len(points), alt=alt_text, sources=sources,
                       controls=controls, datasets={"curve": points})
