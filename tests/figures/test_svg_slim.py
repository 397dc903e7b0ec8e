"""The slimmed inline SVG (site_src/figures/svg_slim.py) draws what vl-convert drew."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import vl_convert

from site_src.figures import render_figure
from site_src.figures import render as fig_render
from site_src.figures.svg_slim import slim_svg

from figtest_helpers import SVG, inlined
from test_output import SPECS

INHERITED = ("fill", "stroke", "stroke-width", "stroke-dasharray", "stroke-opacity", "fill-opacity",
             "font-size", "font-weight", "text-anchor", "stroke-miterlimit", "stroke-linecap")
PAINTS = {"f": "fill", "s": "stroke"}


def test_every_figure_rasterises_to_the_same_pixels(ctx):
    for kind, spec in SPECS:
        render_figure(kind, spec, ctx)
    raw = sorted(ctx.cache_dir.glob("*.svg"))
    assert len(raw) >= len(SPECS)
    for path in raw:
        svg = path.read_text("utf-8")
        slim = slim_svg(svg)
        assert len(slim) < 0.9 * len(svg), path.name
        assert vl_convert.svg_to_png(slim, scale=2) == vl_convert.svg_to_png(svg, scale=2), path.name


def _norm(value: str) -> str:
    """One spelling per colour and per number: rgb(r, g, b) and #rrggbb, 243.00 and 243."""
    value = re.sub(r"rgb\((\d+), ?(\d+), ?(\d+)\)", lambda m: "#%02x%02x%02x" % tuple(map(int, m.groups())), value)
    return re.sub(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", lambda m: repr(float(m.group(0))), value)


def _leaves(svg: str) -> list[tuple]:
    """Every drawn element with the paint, font and position it ends up with (SVG inheritance,
    a theme class `tfN`/`tsN` outranking the element's own attribute), in document order."""
    out = []

    def walk(el, inherited, dx, dy):
        eff = dict(inherited)
        classes = (el.get("class") or "").split()
        for name in INHERITED:
            if el.get(name) is not None:
                eff[name] = _norm(el.get(name))
        for c in classes:
            if re.fullmatch(r"t[fs]\d+", c):
                eff[PAINTS[c[1]]] = "var:" + c
        move = re.fullmatch(r"translate\((-?[\d.]+),(-?[\d.]+)\)", el.get("transform") or "translate(0,0)")
        other = {k: _norm(v) for k, v in el.attrib.items() if k not in INHERITED + ("class", "transform", "x", "y")}
        if move is None:  # another transform: compared as written
            other["transform"], mx, my = el.get("transform"), 0.0, 0.0
        else:
            mx, my = float(move.group(1)), float(move.group(2))
        x, y = dx + mx + float(el.get("x", 0) or 0), dy + my + float(el.get("y", 0) or 0)
        kids = list(el)
        if el.tag != "g" and el.tag != "svg":
            if el.get("display") != "none" and el.get("d") not in ("", "M0,0h0v0h0Z"):
                out.append((el.tag, tuple(sorted(eff.items())), round(x, 6), round(y, 6),
                            tuple(sorted(other.items())), (_norm if el.tag == "style" else str)((el.text or "").strip()),
                            [c for c in classes if not re.fullmatch(r"t[fs]\d+", c)]))
            return
        for kid in kids:
            walk(kid, eff, x, y)

    walk(ET.fromstring(svg), {}, 0.0, 0.0)
    return out


def test_themed_figures_keep_each_element_s_paint_and_place(ctx, monkeypatch):
    slim = [inlined(render_figure(kind, spec, ctx)) for kind, spec in SPECS]
    monkeypatch.setattr(fig_render, "slim_svg", lambda svg: svg)
    plain = [inlined(render_figure(kind, spec, ctx)) for kind, spec in SPECS]
    for a, b in zip(plain, slim):
        before, after = SVG.search(a).group(0), SVG.search(b).group(0)
        assert len(after) < len(before)
        assert "rgb(" not in after and 'class="foreground"' not in after
        assert _leaves(after) == _leaves(before)


def test_leaf_check_can_fail():
    base = '<svg><g fill="#000"><text transform="translate(3,4)">a</text><text fill="#111">b</text></g></svg>'
    moved = '<svg><g><text x="3" y="5" fill="#000">a</text><text fill="#111">b</text></g></svg>'
    repainted = '<svg><g class="tf1"><text x="3" y="4" fill="#000">a</text><text fill="#111">b</text></g></svg>'
    same = '<svg><g><text x="3" y="4" fill="#000">a</text><text fill="#111">b</text></g></svg>'
    assert _leaves(base) == _leaves(same)
    assert _leaves(base) != _leaves(moved)
    # a theme class on the group paints a child only when the child has no fill of its own
    assert _leaves(base) == _leaves(repainted)
    assert _leaves('<svg><g class="tf1"><text>a</text></g></svg>') != _leaves('<svg><g fill="#000"><text>a</text></g></svg>')


def test_slim_rewrites():
    svg = ('<svg><g><text fill="rgb(1, 2, 255)" font-size="11px" transform="translate(5,6)">a</text>'
           '<text fill="rgb(1, 2, 255)" font-size="11px" transform="translate(7,6)">b</text>'
           '<path class="foreground" d="" display="none"/></g></svg>')
    assert slim_svg(svg) == ('<svg><g fill="#0102ff" font-size="11px"><text x="5" y="6">a</text>'
                             '<text x="7" y="6">b</text></g></svg>')
    # a value that differs between children, or a group with a theme class, stays where it is
    mixed = '<svg><g class="tf0"><line stroke="#000"/><line stroke="#000"/></g><g><line stroke="#000"/><line stroke="#111"/></g></svg>'
    assert slim_svg(mixed) == mixed
