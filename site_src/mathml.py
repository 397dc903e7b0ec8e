"""LaTeX math to MathML that cannot carry markup: the converter's tree, serialized with escaping.

latex2mathml's own `convert` unescapes its whole output, so `\\text{<img onerror=...>}` came out as
a live element. Here the element tree is serialized by ElementTree (text and attributes escaped),
and only numeric character references (`&#x0003C;`, which the converter writes as text) are let
through; attributes outside MathML's presentation set (`href` from `\\href`, `style` from
`\\style`, which could name another host) and macro definitions (an expansion bomb) are refused.
"""
from __future__ import annotations

import re
from xml.etree.ElementTree import tostring

from .errors import BuildError


MAX_LATEX = 4000
ATTRIBUTES = frozenset("""
    xmlns display mathvariant mathsize mathcolor mathbackground stretchy fence form separator lspace rspace
    accent accentunder movablelimits largeop symmetric minsize maxsize width height depth voffset
    linethickness displaystyle scriptlevel columnalign columnlines columnspacing rowalign rowlines
    rowspacing frame framespacing equalrows equalcolumns notation open close separators align linebreak
    class
""".split())
_MACRO = re.compile(r"\\(?:def|gdef|edef|xdef|let|newcommand|renewcommand|providecommand|DeclareMathOperator)(?![A-Za-z])")
_CHARREF = re.compile(r"&amp;(#x[0-9A-Fa-f]+;|#[0-9]+;)")


class MathError(BuildError, ValueError):
    """LaTeX the site will not convert; the message says why."""


def to_mathml(latex: str, display: bool) -> str:
    """MathML for `latex`; raises MathError (or the converter's own error for bad LaTeX)."""
    if len(latex) > MAX_LATEX:
        raise MathError(f"math of {len(latex):,} characters: at most {MAX_LATEX:,}")
    macro = _MACRO.search(latex)
    if macro:
        raise MathError(f"{macro.group(0)} is not allowed in math: write the expression out")
    # imported here: about 30 ms of import (it pulls in urllib and ssl), paid only by pages with math
    from latex2mathml.converter import convert_to_element

    root = convert_to_element(latex, display="block" if display else "inline")
    for element in root.iter():
        for name in element.attrib:
            if name not in ATTRIBUTES:
                raise MathError(f"math may not set the attribute {name!r} (from \\{name} or the like): "
                                "no links, styles or scripts in math")
    return _CHARREF.sub(r"&\1", tostring(root, encoding="unicode"))
