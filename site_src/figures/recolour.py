"""A figure's dark drawing made from its light one by changing colours, where that is exactly what
vl-convert would draw, and None everywhere else.

A figure's two themes are one chart with two palettes (assemble._vega_lite). Where the two compiled
Vega specs differ only in palette colours, each written as a whole value (never inside an
expression), and no scale interpolates between palette colours, Vega's renderer copies each of
those colours into a colour attribute and computes nothing else from them: the dark SVG is the
light one with each colour replaced. A string pass instead of a second drawing; drawing the SVGs
was about a third of a cold build's work. Every condition is checked on the specs of the figure at
hand, and tests/figures/test_recolour.py compares the result with the drawing on every kind.

This file runs in the vl-convert worker processes too (imported by vl_calls.py): standard library only.
"""
from __future__ import annotations

import json
import re

# scale types that use a list of colours as it is given; every other type interpolates
_PASS_THROUGH = {"ordinal", "point", "band", "quantile", "quantize", "threshold", "bin-ordinal"}
_HEX = re.compile(r"#[0-9a-fA-F]{6}\b")
_WHOLE = re.compile(r'"(#[0-9a-fA-F]{6})"')
_SVG_COLOUR = re.compile(r'(\s(?:fill|stroke|stop-color)=")(#[0-9a-fA-F]{6})(")')


def colour_map(light: dict, dark: dict) -> dict[str, str | None]:
    """{light colour: dark colour} of two palettes' colour values (lower case); a light colour that
    two keys give different dark colours maps to None (a drawing holding it is drawn again)."""
    pairs = []
    for key, value in light.items():
        other = dark.get(key)
        if isinstance(value, str) and isinstance(other, str):
            pairs.append((value, other))
        elif isinstance(value, list) and isinstance(other, list) and len(value) == len(other):
            pairs.extend(zip(value, other))
    out: dict[str, str | None] = {}
    for a, b in pairs:
        if _HEX.fullmatch(a) and _HEX.fullmatch(b):
            a = a.lower()
            out[a] = b if out.get(a, b) == b else None
    return out


def dark_svg(light_vega: dict, dark_vega: dict, light_svg: str, colours: dict[str, str | None]) -> str | None:
    """The dark SVG as the light one with its colours replaced, or None when that might not be what
    drawing `dark_vega` gives."""
    text = json.dumps(light_vega, sort_keys=True)
    mapped = [c for c in _HEX.findall(text) if c.lower() in colours]
    whole = [c for c in _WHOLE.findall(text) if c.lower() in colours]
    if len(mapped) != len(whole) or any(colours[c.lower()] is None for c in whole):
        return None   # a palette colour inside a longer string (an expression), or an ambiguous one
    swapped = _WHOLE.sub(lambda m: f'"{colours.get(m.group(1).lower()) or m.group(1)}"', text)
    if swapped != json.dumps(dark_vega, sort_keys=True) or _interpolates(light_vega, colours):
        return None
    in_svg = [c for c in _HEX.findall(light_svg) if c.lower() in colours]
    in_attributes = [m.group(2) for m in _SVG_COLOUR.finditer(light_svg) if m.group(2).lower() in colours]
    if len(in_svg) != len(in_attributes) or any(colours[c.lower()] is None for c in in_attributes):
        return None
    return _SVG_COLOUR.sub(lambda m: m.group(1) + (colours.get(m.group(2).lower()) or m.group(2)) + m.group(3), light_svg)


def _interpolates(vega: dict, colours: dict) -> bool:
    """Whether a scale anywhere in the spec computes colours between palette colours."""
    stack = [vega]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for scale in node.get("scales", []) if isinstance(node.get("scales"), list) else []:
                if isinstance(scale, dict) and _mentions(scale.get("range"), colours) and (
                        scale.get("type", "linear") not in _PASS_THROUGH or "interpolate" in scale):
                    return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _mentions(value, colours: dict) -> bool:
    return any(c.lower() in colours for c in _HEX.findall(json.dumps(value)))
