"""Lighter inline SVG that draws the same picture: the last step of `render.inline_svg`.

vl-convert writes every presentation attribute on every item, `rgb(r, g, b)` colours, an empty
background and foreground path per group, and positions each text by a transform. Each rewrite
here leaves what is painted unchanged:

- an attribute that every child element of a group carries with the same value, and that SVG
  inherits, moves onto the group (only when the group sets neither it nor a theme class);
- `rgb(r, g, b)` becomes `#rrggbb`, the same colour, and `243.00` becomes `243`;
- a group's empty foreground (`d=""`, not displayed) and zero-size background paths go;
- `translate(0,0)` goes, and a text placed by `translate(x,y)` alone, with no child element,
  gets `x` and `y` instead (the same position).

Group classes (`role-mark`, `datamark_*`) are kept: tests count marks by them.
"""
from __future__ import annotations

import re

_TOKEN = re.compile(r"<[^>]+>|[^<]+")
_ATTR = re.compile(r'\s([\w:-]+)="([^"]*)"')
_NAME = re.compile(r"</?([\w:-]+)")
_RGB = re.compile(r"rgb\((\d+), ?(\d+), ?(\d+)\)")
_TRANSLATE = re.compile(r"translate\((-?[\d.]+),(-?[\d.]+)\)")
# trailing zeros of a decimal, in attributes that hold only numbers and path commands
_ZEROS = re.compile(r"(\.\d*?[1-9])0+(?!\d)|\.0+(?!\d)")
# the attributes that hold only numbers and path commands (render.inline_svg rounds the same ones)
NUMERIC = ("d", "transform", "x", "y", "x1", "x2", "y1", "y2", "width", "height", "points")
_THEME_CLASS = re.compile(r"^t[fsc]\d+$")
# presentation attributes that children inherit (SVG 1.1, "Inherited: yes")
INHERITED = ("fill", "fill-opacity", "stroke", "stroke-width", "stroke-opacity", "stroke-dasharray",
             "stroke-dashoffset", "stroke-linecap", "stroke-linejoin", "stroke-miterlimit",
             "font-size", "font-weight", "font-style", "font-family", "text-anchor")
THEMED = {"f": "fill", "s": "stroke"}  # theme class letter -> the inherited property it paints
DEAD = ('<path class="foreground" d="" display="none"/>', '<path class="background" d="M0,0h0v0h0Z"/>')


class _El:
    __slots__ = ("name", "attrs", "children", "closed")

    def __init__(self, name: str, attrs: dict, closed: bool):
        self.name, self.attrs, self.children, self.closed = name, attrs, [], closed


def _parse(svg: str) -> list:
    root: list = []
    stack: list = [root]
    for token in _TOKEN.findall(svg):
        if not token.startswith("<"):
            stack[-1].append(token)
        elif token.startswith("</"):
            stack.pop()
        elif token.startswith(("<!", "<?")):
            stack[-1].append(token)
        else:
            closed = token.endswith("/>")
            el = _El(_NAME.match(token).group(1), dict(_ATTR.findall(token)), closed)
            stack[-1].append(el)
            if not closed:
                stack.append(el.children)
    return root


def _write(nodes: list, out: list) -> None:
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
            continue
        attrs = "".join(f' {k}="{v}"' for k, v in node.attrs.items())
        if node.closed:
            out.append(f"<{node.name}{attrs}/>")
        else:
            out.append(f"<{node.name}{attrs}>")
            _write(node.children, out)
            out.append(f"</{node.name}>")


def _hex(m: re.Match) -> str:
    return "#" + "".join(f"{int(c):02x}" for c in m.groups())


def _slim(el: _El) -> None:
    kids = [c for c in el.children if isinstance(c, _El)]
    for kid in kids:
        _slim(kid)
    attrs = el.attrs
    for name, value in attrs.items():
        if name in ("fill", "stroke", "stop-color"):
            attrs[name] = _RGB.sub(_hex, value)
        elif name in NUMERIC:
            attrs[name] = _ZEROS.sub(lambda m: m.group(1) or "", value)
    if el.name == "style":  # the theme's colour properties (themed.py)
        el.children = [_RGB.sub(_hex, c) if isinstance(c, str) else c for c in el.children]
    if attrs.get("transform") == "translate(0,0)":
        del attrs["transform"]
    move = _TRANSLATE.fullmatch(attrs.get("transform", ""))
    if el.name == "text" and move and "x" not in attrs and "y" not in attrs and \
            not any(isinstance(c, _El) for c in el.children):
        del attrs["transform"]
        attrs["x"], attrs["y"] = move.group(1), move.group(2)
    if el.name != "g" or len(kids) < 2:
        return
    own = (attrs.get("class") or "").split()
    if any(_THEME_CLASS.match(c) for c in own):
        return
    moved = set()
    for name in INHERITED:
        if name in attrs:
            continue
        value = kids[0].attrs.get(name)
        if value is not None and all(kid.attrs.get(name) == value for kid in kids):
            attrs[name] = value
            moved.add(name)
            for kid in kids:
                del kid.attrs[name]
    if not moved:
        return
    # a theme class paints the attribute it came with (themed.py): it moves up with it
    shared = set.intersection(*({c for c in kid.attrs.get("class", "").split() if _THEME_CLASS.match(c)}
                                for kid in kids))
    up = sorted(c for c in shared if THEMED.get(c[1]) in moved)
    if up:
        attrs.pop("class", None)
        attrs["class"] = " ".join(up + own)
        for kid in kids:
            rest = [c for c in kid.attrs.pop("class").split() if c not in up]
            if rest:
                kid.attrs["class"] = " ".join(rest)


def slim_svg(svg: str) -> str:
    """The same drawing in fewer bytes (see the module docstring for each rewrite)."""
    for dead in DEAD:
        svg = svg.replace(dead, "")
    nodes = _parse(svg)
    for node in nodes:
        if isinstance(node, _El):
            _slim(node)
    out: list = []
    _write(nodes, out)
    return "".join(out)
