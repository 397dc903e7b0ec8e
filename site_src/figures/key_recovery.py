"""Kind `key_recovery`: each method's key recovery with its interval, over all families and per family.

`data.methods` is a value reference to a block {method: {value, ci, per_family, ci_per_family}}
(a planted study's golden.json#key_recovery/by_method, written by bundle_kit/keyrecovery.py).
One row per method; in it, one point per series (every family together, then each family) with
its interval as a line, each series its own colour and shape and named in the legend. A dashed
rule marks chance (`options.chance`, default 0.5); `options.groups` names what the series are
(default "families": the first series is then "all families").
"""
from __future__ import annotations

import altair as alt

from .data import options, spec_data, spec_id
from .types import FigureError, FigureParts, Table

LABELS = {"attribution": "attribution", "patching_mean": "patching, mean", "patching_zero": "patching, zero",
          "patching_swap": "patching, swap"}
ALL = "all families"
SHAPES = ["diamond", "circle", "square", "triangle-up", "triangle-down", "cross"]


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x


def _interval(figure_id: str, where: str, value) -> tuple[float, float]:
    if not (isinstance(value, list) and len(value) == 2 and all(map(_number, value))):
        raise FigureError(figure_id, f"{where}: an interval must be [low, high], not {value!r}")
    return float(value[0]), float(value[1])


def build(spec: dict, ctx) -> FigureParts:
    """The figure parts of one `key_recovery` block: a point and interval per (method, series)."""
    figure_id = spec_id(spec)
    opts = options(spec)
    chance = opts.get("chance", 0.5)
    groups = opts.get("groups", "families")
    if not isinstance(groups, str) or not groups.strip():
        raise FigureError(figure_id, f"option `groups` must be a word such as families, not {groups!r}")
    every = ALL if groups == "families" else f"all {groups}"
    if not _number(chance):
        raise FigureError(figure_id, f"option `chance` must be a number, not {chance!r}")
    ref = spec_data(spec, "methods")
    resolved = ctx.resolve_ref(ref)
    block = resolved.value
    if not isinstance(block, dict) or not block:
        raise FigureError(figure_id, f"{ref} ({resolved.location}) is not a {{method: {{value, ci, ...}}}} block")
    rows, families = [], []
    for method, entry in block.items():
        where = f"{resolved.location}: {method}"
        if not isinstance(entry, dict) or not _number(entry.get("value")):
            raise FigureError(figure_id, f"{where} lacks a numeric `value`")
        low, high = _interval(figure_id, where + " ci", entry.get("ci"))
        label = LABELS.get(method, method)
        rows.append({"method": label, "series": every, "value": float(entry["value"]), "low": low, "high": high})
        per, cis = entry.get("per_family") or {}, entry.get("ci_per_family") or {}
        for family in sorted(per):
            if not _number(per[family]):
                raise FigureError(figure_id, f"{where} per_family/{family} is not a number")
            flow, fhigh = _interval(figure_id, f"{where} ci_per_family/{family}", cis.get(family))
            rows.append({"method": label, "series": family, "value": float(per[family]), "low": flow, "high": fhigh})
            if family not in families:
                families.append(family)
    series = [every] + families
    # the axis starts a step below chance or the lowest interval, whichever is lower
    low = max(0.0, min(min(r["low"] for r in rows), float(chance)) - 0.1)
    low = round(low * 10 // 1) / 10
    methods = list(dict.fromkeys(r["method"] for r in rows))

    def chart(p: dict):
        colours = [p["text"]] + p["kinds"][: len(families)]
        y = alt.Y("method:N", sort=methods, title=None, axis=alt.Axis(labelFontSize=12))
        offset = alt.YOffset("series:N", sort=series, scale=alt.Scale(paddingInner=0.2))
        legend = alt.Legend(orient="bottom", direction="horizontal", title=None, columns=2, columnPadding=18)
        colour = alt.Color("series:N", sort=series, scale=alt.Scale(domain=series, range=colours), legend=legend)
        shape = alt.Shape("series:N", sort=series, scale=alt.Scale(domain=series, range=SHAPES[: len(series)]),
                          legend=legend)
        x = alt.X("value:Q", title="key recovery (AUC)", scale=alt.Scale(domain=[low, 1], zero=False, nice=False),
                  axis=alt.Axis(values=[v / 4 for v in range(5) if v / 4 >= low], format=".2f"))
        tips = [alt.Tooltip("method:N"), alt.Tooltip("series:N"), alt.Tooltip("value:Q", format=".3f"),
                alt.Tooltip("low:Q", title="interval low", format=".3f"),
                alt.Tooltip("high:Q", title="interval high", format=".3f")]
        base = alt.Chart(alt.NamedData(name="recovery"))
        bars = base.mark_rule(strokeWidth=2, aria=False).encode(x="low:Q", x2="high:Q", y=y, yOffset=offset, color=colour,
                                                      tooltip=tips)
        points = base.mark_point(filled=True, size=70, opacity=1, aria=False).encode(x=x, y=y, yOffset=offset, color=colour, shape=shape,
                                                             tooltip=tips).properties(name="datamark_points")
        rule = alt.Chart().mark_rule(color=p["muted"], strokeDash=[4, 3]).encode(x=alt.datum(chance))
        label = alt.Chart().mark_text(color=p["muted"], align="left", dx=3, dy=-4).encode(
            x=alt.datum(chance), y=alt.value(0), text=alt.datum("chance"))
        # narrow enough to shrink to a phone's column with its text readable (docs/figures.md)
        return alt.layer(rule, bars, points, label).properties(width=230, height=alt.Step(11))

    table = Table(["method", "series", "value", "interval low", "interval high"],
                  [[r["method"], r["series"], f'{r["value"]:.6f}', f'{r["low"]:.6f}', f'{r["high"]:.6f}'] for r in rows])
    overall = "; ".join(f"{r['method']} {r['value']:.3f} ({r['low']:.3f} to {r['high']:.3f})" for r in rows if r["series"] == every)
    alt_text = (f"Dot-and-interval chart of key recovery for {len(methods)} methods, over all {groups} and for "
                f"each of {len(families)} {groups} ({', '.join(families)}); chance at {chance:g}. Overall: {overall}.")
    return FigureParts(chart=chart, table=table, marks=len(rows), alt=alt_text, sources=[resolved],
                       datasets={"recovery": rows})
