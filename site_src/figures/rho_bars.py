"""Kind `rho_bars`: per-dimension Spearman rho as bars, one panel per series.

Each series is a value reference to a {dimension: rho} block (for example this study's
golden.json#per_dimension_rho beside a quoted published block), with its own label, and
optionally `ci`, a reference to the {dimension: [low, high]} block of its intervals, drawn as a
line across each bar. Each series is a panel of its own (FigureParts.chart returns a list), so the
page sets them side by side at desktop width and stacks them on a phone.
"""
from __future__ import annotations

import altair as alt

from .data import options, size_option, spec_data, spec_id
from .theme import FONT_SIZE
from .types import FigureError, FigureParts, Table

LABEL_WIDTH = 150   # the dimension names' column; longer names are cut with an ellipsis


def _intervals(ctx, spec: dict, item: dict, dims: list, sources: list) -> dict:
    """{dimension: (low, high)} of a series' `ci` reference, checked; {} without one."""
    if "ci" not in item:
        return {}
    resolved = ctx.resolve_ref(item["ci"])
    block = resolved.value
    if not isinstance(block, dict):
        raise FigureError(spec_id(spec), f"{item['ci']} ({resolved.location}) is not a {{dimension: [low, high]}} block")
    out = {}
    for dim in dims:
        pair = block.get(dim)
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, (int, float)) for v in pair)):
            raise FigureError(spec_id(spec), f"{resolved.location}: {dim} has no [low, high] interval")
        out[dim] = (float(pair[0]), float(pair[1]))
    sources.append(resolved)
    return out


def build(spec: dict, ctx) -> FigureParts:
    """The rho bars' parts: one bar per (series, dimension), one panel per series."""
    options(spec)
    series = spec_data(spec, "series")
    if not isinstance(series, list) or not series:
        raise FigureError(spec_id(spec), "`data.series` must be a list of {label, ref} (and optionally ci)")
    rows, sources, labels = [], [], []
    with_ci: set[str] = set()
    for item in series:
        if not isinstance(item, dict) or "ref" not in item or "label" not in item:
            raise FigureError(spec_id(spec), "each series needs `label` and `ref`")
        unknown = sorted(set(item) - {"label", "ref", "ci"})
        if unknown:
            raise FigureError(spec_id(spec), f"a series has unknown key(s) {', '.join(unknown)} (known: label, ref, ci)")
        resolved = ctx.resolve_ref(item["ref"])
        block = resolved.value
        if not isinstance(block, dict):
            raise FigureError(spec_id(spec), f"{item['ref']} ({resolved.location}) is not a {{dimension: rho}} block")
        sources.append(resolved)
        label = str(item["label"])
        labels.append(label)
        for dim, rho in block.items():
            if isinstance(rho, bool) or not isinstance(rho, (int, float)):
                raise FigureError(spec_id(spec), f"{resolved.location}: {dim} is not a number")
        ci = _intervals(ctx, spec, item, list(block), sources)
        if ci:
            with_ci.add(label)
        for dim, rho in block.items():
            low, high = ci.get(dim, (None, None))
            rows.append({"series": label, "dimension": dim, "rho": float(rho),
                         "sign": "positive" if rho >= 0 else "negative", "low": low, "high": high})
    width = size_option(spec, "width", 200, 80, 280)

    def panel(p: dict, label: str):
        mine = [r for r in rows if r["series"] == label]
        dims = [r["dimension"] for r in mine]
        x = alt.X("rho:Q", title="Spearman rho", scale=alt.Scale(domain=[-1, 1]),
                  axis=alt.Axis(values=[-1, -0.5, 0, 0.5, 1], format="~g"))
        # the label column is reserved at its full width: vl-convert measures text in its own font,
        # narrower than many browsers' system-ui, and would otherwise cut long names at the left edge
        y = alt.Y("dimension:N", sort=dims, title=None, axis=alt.Axis(labelLimit=LABEL_WIDTH, minExtent=LABEL_WIDTH))
        base = alt.Chart(alt.Data(values=mine))
        bars = base.mark_bar(height=max(8, FONT_SIZE - 2)).encode(
            x=x, y=y,
            color=alt.Color("sign:N", legend=None,
                            scale=alt.Scale(domain=["positive", "negative"], range=[p["positive"], p["negative"]])),
            tooltip=[alt.Tooltip("series:N"), alt.Tooltip("dimension:N"), alt.Tooltip("rho:Q", format="+.3f")],
        ).properties(name="datamark_bars")
        zero = alt.Chart().mark_rule(color=p["text"], strokeWidth=1).encode(x=alt.datum(0))
        layers = [bars, zero]
        subtitle = "bars: rho (blue above zero, orange below)"
        if label in with_ci:
            layers.append(base.mark_rule(color=p["text"], strokeWidth=2).encode(
                x="low:Q", x2="high:Q", y=y,
                tooltip=[alt.Tooltip("dimension:N"), alt.Tooltip("low:Q", title="interval from", format="+.3f"),
                         alt.Tooltip("high:Q", title="to", format="+.3f")]).properties(name="datamark_intervals"))
            subtitle += "; line: its 95% interval"
        else:
            subtitle += "; no interval given"
        return alt.layer(*layers).properties(
            width=width, height=alt.Step(FONT_SIZE + 8),
            title=alt.TitleParams(text=_wrap(label), subtitle=_wrap(subtitle)))

    def chart(p: dict):
        return [panel(p, label) for label in labels]

    table = Table(["series", "dimension", "rho", "interval low", "interval high"],
                  [[r["series"], r["dimension"], f'{r["rho"]:+.6f}',
                    "" if r["low"] is None else f'{r["low"]:+.6f}', "" if r["high"] is None else f'{r["high"]:+.6f}']
                   for r in rows])
    neg = sum(1 for r in rows if r["rho"] < 0)
    alt_text = (f"Bar charts of Spearman rho per dimension, one panel for each of {len(labels)} series "
                f"({'; '.join(labels)}): {len(rows)} bars, {neg} negative, {len(rows) - neg} zero or positive"
                + (f"; intervals drawn for {', '.join(sorted(with_ci))}." if with_ci else "."))
    return FigureParts(chart=chart, table=table, marks=len(rows), alt=alt_text, sources=sources)


def _wrap(text: str, width: int = 38) -> list[str]:
    """A title as lines of at most about `width` characters, so a long label never widens a panel."""
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + [line] if line else lines
