"""Kind `spec_curve`: a specification curve, one headline's value under every analysis choice.

`data.rows` is a JSONL of specification rows (a planted study's spec_curve.jsonl, written by
bundle_kit/keyrecovery.py: headline, floor, key, aggregation, metric, mode, primary, value,
reference, holds; a routed study's, by bundle_kit/hiddenkeys.py, adds patch_score); `data.summary` a value reference to that headline's summary block
(golden.json#key_recovery/spec_curve/<headline>: conclusion, share, specifications). The
headline drawn is the summary's last key. Top: the values sorted, one point per
specification, filled where the conclusion holds and hollow where it does not, the primary
specification ringed, and the reference (0 for a gap, chance for a method) as ticks. Beneath:
which choice each specification made, one row per option of each choice that varies.
"""
from __future__ import annotations

import altair as alt

from .data import computed, file_receipt, read_rows, size_option, spec_data, spec_id
from .types import FigureError, FigureParts, Table

WIDTH = 250   # narrow enough to shrink to a phone's column with its text readable (docs/figures.md)
FIELDS = ("headline", "floor", "key", "aggregation", "metric", "mode", "primary", "value", "reference", "holds")
CHOICES = ("floor", "key", "aggregation", "metric", "mode", "patch_score")   # patch_score: rows may lack it
# how a choice is written beside its row of the grid (short: the drawing must fit a phone's column)
CHOICE_NAMES = {"aggregation": {"site": "site scores", "magnitude": "mean |x|", "signed": "|mean x|"},
                "metric": {"auc": "AUC", "precision_at_k": "precision@k"},
                "patch_score": {"ratio_of_means": "ratio of sums", "mean_ratio": "mean of ratios"}}
HOLDS = {"gap": ("patching ahead", "attribution ahead or tied"),
         "attribution": ("above chance", "at or below chance"),
         "patching": ("above chance", "at or below chance")}


def _choice_label(axis: str, value) -> str:
    if isinstance(value, float):
        return f"floor {value:g}"
    return CHOICE_NAMES.get(axis, {}).get(value) or f"{axis} {value}"


def build(spec: dict, ctx) -> FigureParts:
    """The figure parts of one `spec_curve` block: the sorted curve and the choices beneath."""
    figure_id = spec_id(spec)
    ref = spec_data(spec, "summary")
    summary = ctx.resolve_ref(ref)
    headline = str(ref).split("#", 1)[-1].rstrip("/").rsplit("/", 1)[-1].split("|")[0].strip()
    if headline not in HOLDS or not isinstance(summary.value, dict) or "share" not in summary.value:
        raise FigureError(figure_id, f"{ref} ({summary.location}) is not the summary of a headline "
                                     f"({', '.join(HOLDS)}) with a `share`")
    source = spec_data(spec, "rows")
    path, rows = read_rows(ctx, source, FIELDS)
    mine = [r for r in rows if r["headline"] == headline]
    if not mine:
        raise FigureError(figure_id, f"{path.name} has no rows of headline {headline!r}")
    axes = [a for a in CHOICES if len({str(r.get(a, "none")) for r in mine}) > 1]   # a choice that varies
    mine.sort(key=lambda r: (r["value"] if r["value"] is not None else float("-inf"),
                             tuple(str(r[a]) for a in axes)))
    yes, no = HOLDS[headline]
    points, runs, last = [], [], {}
    for rank, r in enumerate(mine, start=1):
        if r["value"] is None:
            continue
        choices = ", ".join(_choice_label(a, r[a]) for a in axes)
        points.append({"rank": rank, "value": r["value"], "reference": r["reference"],
                       "outcome": yes if r["holds"] else no, "primary": bool(r["primary"]), "choices": choices})
        for a in axes:
            label = _choice_label(a, r[a])
            run = last.get(label)
            if run is not None and run["end"] == rank - 1:
                run["end"] = rank                # consecutive specifications with this choice: one bar
            else:
                last[label] = {"choice": label, "start": rank - 0.4, "end": rank}
                runs.append(last[label])
    order = []
    for a in axes:
        seen = sorted({r[a] for r in mine}, key=lambda v: (isinstance(v, str), v))
        order += [_choice_label(a, v) for v in seen]
    share = float(summary.value["share"])
    n = len(mine)
    height = size_option(spec, "height", 200, 80, 600)
    step = 16                            # a row of the choices per line of text

    def chart(p: dict):
        x = alt.X("rank:Q", title=f"{n} specifications, sorted", scale=alt.Scale(domain=[0, n + 1]),
                  axis=alt.Axis(labels=False, ticks=False, grid=False))
        legend = alt.Legend(orient="bottom", direction="vertical", title=None)
        colour = alt.Color("outcome:N", sort=[yes, no], legend=legend,
                           scale=alt.Scale(domain=[yes, no], range=[p["positive"], p["negative"]]))
        shape = alt.Shape("outcome:N", sort=[yes, no], legend=legend,
                          scale=alt.Scale(domain=[yes, no], range=["circle", "triangle-down"]))
        tips = [alt.Tooltip("value:Q", format="+.4f"), alt.Tooltip("outcome:N", title="conclusion"),
                alt.Tooltip("choices:N"), alt.Tooltip("primary:N")]
        base = alt.Chart(alt.NamedData(name="curve"))
        dots = base.mark_point(size=18, filled=True, opacity=1, aria=False).encode(
            x=x, y=alt.Y("value:Q", title=headline), color=colour, shape=shape, tooltip=tips,
        ).properties(name="datamark_points")
        reference = base.mark_line(color=p["muted"], strokeDash=[4, 3], interpolate="step-after", aria=False).encode(
            x=x, y="reference:Q")
        primary = base.transform_filter(alt.datum.primary).mark_point(
            size=220, strokeWidth=2, color=p["text"], filled=False).encode(x=x, y="value:Q")
        # above and to the left of its ring: the curve is sorted rising, so no dot is there
        label = base.transform_filter(alt.datum.primary).mark_text(
            align="right", baseline="bottom", dx=-8, dy=-8, color=p["text"]).encode(
            x=x, y="value:Q", text=alt.value("primary"))
        top = alt.layer(reference, dots, primary, label).properties(width=WIDTH, height=height)
        grid = alt.Chart(alt.NamedData(name="choices")).mark_bar(height=step - 4, color=p["text"], aria=False).encode(
            x=alt.X("start:Q", title=None, scale=alt.Scale(domain=[0, n + 1]), axis=None),
            x2="end_edge:Q",
            y=alt.Y("choice:N", sort=order, title=None),
        ).transform_calculate(end_edge=alt.datum.end + 0.4).properties(width=WIDTH, height=alt.Step(step))
        return alt.vconcat(top, grid, spacing=6)

    table = Table(["rank", "value", "conclusion", "primary", *axes],
                  [[i, f'{r["value"]:+.6f}' if r["value"] is not None else "", yes if r["holds"] else no,
                    "yes" if r["primary"] else "", *[r[a] for a in axes]] for i, r in enumerate(mine, start=1)])
    values = [r["value"] for r in mine if r["value"] is not None]
    alt_text = (f"Specification curve of the {headline} over {n} analysis choices ({', '.join(axes)}): values "
                f"from {min(values):+.3f} to {max(values):+.3f}; the conclusion '{summary.value.get('conclusion', headline)}' "
                f"holds in {share:.0%} of them.")
    sources = [summary, computed(file_receipt(ctx, source), n, f"{source}: rows of headline {headline}")]
    return FigureParts(chart=chart, table=table, marks=len(points), alt=alt_text, sources=sources,
                       datasets={"curve": points, "choices": runs})
