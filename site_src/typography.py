"""Small typographic fixes for text the site takes as written (a registration's sentences): a
number keeps its unit sign on its line, so "80 %" never breaks into "80" and a line that begins
with "%" (the layout check refuses such lines)."""
from __future__ import annotations

import re

from markupsafe import Markup, escape

_NUMBER_THEN_SIGN = re.compile(r"(\d) (%|‰)")


def keep_units(text) -> Markup:
    """`text` escaped, with the space between a number and a following % or ‰ made unbreakable."""
    return Markup(_NUMBER_THEN_SIGN.sub("\\1\u00a0\\2", str(escape(text))))
