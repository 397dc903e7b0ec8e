"""Small typographic fixes for text the site takes as written (a registration's sentences): a
number keeps its unit sign on its line, so "80 %" never breaks into "80" and a line that begins
with "%" (the layout check refuses such lines); a name taken from code or data (`mlp_L0`,
`bag_of_words`) is recognised so a template can set it as code, not prose."""
from __future__ import annotations

import re

from markupsafe import Markup, escape

_NUMBER_THEN_SIGN = re.compile(r"(\d) (%|‰)")


def keep_units(text) -> Markup:
    """`text` escaped, with the space between a number and a following % or ‰ made unbreakable."""
    return Markup(_NUMBER_THEN_SIGN.sub("\\1\u00a0\\2", str(escape(text))))


_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+")


def is_identifier(text) -> bool:
    """Whether `text` is a snake_case name (a field, file stem, component or function), which
    reads as code: the vocabulary check (tests/site/test_vocabulary.py) refuses such names in prose."""
    return isinstance(text, str) and _IDENTIFIER.fullmatch(text) is not None
