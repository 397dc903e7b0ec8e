"""One static SVG per figure whose colours follow the page's theme, and one Vega spec plus a patch.

The light and the dark rendering of a figure come from the same spec with two palettes, so their
SVGs are the same tree with other colours. `themed_svg` walks both in step: every colour that
differs becomes a CSS custom property of the figure (`--tN`, light value by default, dark value
under the dark scheme or `<html data-theme="dark">`, light again in print), and the element gets
a class that paints its fill, stroke or stop colour from that property. The SVG's own colour
attributes stay as they are (light), so the drawing is correct even where CSS is not applied.

`spec_patch` does the same for the interactive view: the dark Vega spec is stored as a list of
(path, value) changes to the light one, which the loader applies before running it.
"""
from __future__ import annotations

import re

_TAG = re.compile(r"(<[^>]+>)")
_ATTR = re.compile(r'\s([\w:-]+)="([^"]*)"')
COLOUR_ATTRS = {"fill": "f", "stroke": "s", "stop-color": "c"}
CSS_PROPERTY = {"f": "fill", "s": "stroke", "c": "stop-color"}


def _attrs(tag: str) -> list[tuple[str, str]]:
    return _ATTR.findall(tag)


def themed_svg(light: str, dark: str, scope: str) -> str | None:
    """The light SVG with theme-following colours scoped to the element id `scope`, or None when
    the two renderings differ in more than colours (then the caller keeps both)."""
    a, b = _TAG.split(light), _TAG.split(dark)
    if len(a) != len(b):
        return None
    colours: dict[tuple[str, str], int] = {}
    used: set[tuple[str, int]] = set()
    out = []
    for left, right in zip(a, b):
        if left == right:
            out.append(left)
            continue
        if not left.startswith("<") or not right.startswith("<"):
            return None  # text differs
        la, ra = _attrs(left), _attrs(right)
        if [n for n, _ in la] != [n for n, _ in ra] or left.split()[0] != right.split()[0]:
            return None
        classes = []
        for (name, lv), (_, rv) in zip(la, ra):
            if lv == rv:
                continue
            if name not in COLOUR_ATTRS:
                return None
            index = colours.setdefault((lv, rv), len(colours))
            kind = COLOUR_ATTRS[name]
            used.add((kind, index))
            classes.append(f"t{kind}{index}")
        out.append(_add_classes(left, classes))
    if not colours:
        return light
    svg = "".join(out)
    head_end = svg.index(">", svg.index("<svg")) + 1
    return svg[:head_end] + _style(scope, colours, used) + svg[head_end:]


def _add_classes(tag: str, classes: list[str]) -> str:
    if not classes:
        return tag
    names = " ".join(classes)
    if ' class="' in tag:
        return tag.replace(' class="', f' class="{names} ', 1)
    end = -2 if tag.endswith("/>") else -1
    return f'{tag[:end]} class="{names}"{tag[end:]}'


def _style(scope: str, colours: dict, used: set) -> str:
    sel = f"#{scope}"
    light = ";".join(f"--t{i}:{lv}" for (lv, _), i in colours.items())
    dark = ";".join(f"--t{i}:{rv}" for (_, rv), i in colours.items())
    paint = "".join(f"{sel} .t{kind}{i}{{{CSS_PROPERTY[kind]}:var(--t{i})}}" for kind, i in sorted(used, key=lambda u: (u[1], u[0])))
    return (f"<style>{sel}{{{light}}}{paint}"
            f'@media (prefers-color-scheme:dark){{:root:not([data-theme="light"]) {sel}{{{dark}}}}}'
            f':root[data-theme="dark"] {sel}{{{dark}}}'
            f"@media print{{:root:not([data-print-x]) {sel}{{{light}}}}}</style>")


def spec_patch(light, dark, path=()) -> list | None:
    """[(path, dark value)] turning `light` into `dark`, or None when their shapes differ."""
    if type(light) is not type(dark):
        return [[list(path), dark]] if not isinstance(light, (dict, list)) and not isinstance(dark, (dict, list)) else None
    if isinstance(light, dict):
        if sorted(light) != sorted(dark):
            return None
        out = []
        for key in sorted(light):
            sub = spec_patch(light[key], dark[key], path + (key,))
            if sub is None:
                return None
            out.extend(sub)
        return out
    if isinstance(light, list):
        if len(light) != len(dark):
            return None
        out = []
        for i, (x, y) in enumerate(zip(light, dark)):
            sub = spec_patch(x, y, path + (i,))
            if sub is None:
                return None
            out.extend(sub)
        return out
    return [] if light == dark else [[list(path), dark]]
