"""The dark drawing recoloured from the light one (site_src/figures/recolour.py) is, byte for byte,
the drawing vl-convert makes of the dark spec, on every figure kind; where that cannot be shown
from the specs, the dark spec is drawn."""
from __future__ import annotations

import vl_convert

from site_src.figures import recolour, vl_calls
from site_src.figures.render import COLOURS, VL_VERSION, canonical_ids
from site_src.figures.theme import PALETTES

from test_schema import drawn_specs


def test_every_kind_recoloured_equals_drawn(ctx, monkeypatch):
    drawn_twice = set()
    for kind, specs in drawn_specs(ctx, monkeypatch).items():
        half = len(specs) // 2
        for light, dark in zip(specs[:half], specs[half:]):
            light_vega, light_svg = vl_calls.draw(light, VL_VERSION)
            dark_vega, dark_svg = vl_calls.draw(dark, VL_VERSION)
            made = recolour.dark_svg(light_vega, dark_vega, light_svg, COLOURS)
            if made is None:
                drawn_twice.add(kind)
            else:
                assert canonical_ids(made) == canonical_ids(dark_svg), kind
            pair = vl_calls.draw_pair(light, dark, VL_VERSION, COLOURS)   # Vega numbers its ids per process: canonical
            assert [(vega, canonical_ids(svg)) for vega, svg in pair] == [
                (light_vega, canonical_ids(light_svg)), (dark_vega, canonical_ids(dark_svg))], kind
    # the scatter's layer colours are a scheme per theme; the heat map writes white text on dark
    # cells, a fixed colour that is also the light background: both are drawn twice, as they must be
    assert drawn_twice == {"rank_scatter", "heatmap"}


def _bars(colour_field: dict, mark_colour: str) -> dict:
    return {"data": {"values": [{"a": 1, "b": 0.2}, {"a": 2, "b": 0.9}]}, "mark": {"type": "bar", "color": mark_colour},
            "encoding": {"x": {"field": "a", "type": "ordinal"}, "y": {"field": "b", "type": "quantitative"}, **colour_field},
            "config": {"background": PALETTES["light"]["background"]}}


def _pair(light: dict, dark: dict):
    lv = vl_convert.vegalite_to_vega(light, vl_version=VL_VERSION)
    dv = vl_convert.vegalite_to_vega(dark, vl_version=VL_VERSION)
    return lv, dv, vl_convert.vega_to_svg(lv, allowed_base_urls=[])


def test_a_plain_recolouring_is_taken_and_matches():
    light = _bars({}, PALETTES["light"]["accent"])
    dark = {**_bars({}, PALETTES["dark"]["accent"]), "config": {"background": PALETTES["dark"]["background"]}}
    lv, dv, svg = _pair(light, dark)
    made = recolour.dark_svg(lv, dv, svg, COLOURS)
    assert made is not None and canonical_ids(made) == canonical_ids(vl_convert.vega_to_svg(dv, allowed_base_urls=[]))


def test_colours_computed_between_palette_colours_are_drawn():
    """A continuous colour scale whose range is palette colours: Vega computes the colours between
    them, which no substitution can reproduce."""
    def ramp(theme):
        p = PALETTES[theme]
        return _bars({"color": {"field": "b", "type": "quantitative", "scale": {"range": [p["positive"], p["negative"]]}}},
                     p["accent"]) | {"config": {"background": p["background"]}}
    lv, dv, svg = _pair(ramp("light"), ramp("dark"))
    assert recolour.dark_svg(lv, dv, svg, COLOURS) is None


def test_a_colour_inside_an_expression_or_another_difference_is_drawn():
    p, q = PALETTES["light"], PALETTES["dark"]
    light = _bars({}, p["accent"]) | {"config": {"background": p["background"]}}
    other = _bars({}, q["accent"]) | {"config": {"background": q["background"]}, "title": "dark only"}
    lv, dv, svg = _pair(light, other)
    assert recolour.dark_svg(lv, dv, svg, COLOURS) is None
    expr = {"signals": [{"name": "c", "value": f"'{p['accent']}' + ''"}], "marks": []}
    assert recolour.dark_svg(expr, expr, "<svg></svg>", COLOURS) is None


def test_a_light_colour_with_two_dark_ones_is_never_substituted():
    colours = recolour.colour_map({"a": "#111111", "b": "#111111"}, {"a": "#222222", "b": "#333333"})
    assert colours == {"#111111": None}
    vega = {"background": "#111111"}
    assert recolour.dark_svg(vega, {"background": "#222222"}, '<svg><rect fill="#111111"/></svg>', colours) is None
