"""The value every reference resolves to, and how it is shown: a number with its receipt."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MINUS = "\u2212"


@dataclass(frozen=True)
class Resolved:
    """A value read from a committed fixture, with where it came from.

    `source` is the repository-relative fixture path, `line` the 1-based line when the value
    sits on one line, `expression` the reference as written (or how the value was computed),
    and `href` the site-root-relative URL of the published view of that fixture line.
    """

    value: Any
    source: str
    line: int | None
    expression: str
    href: str

    @property
    def location(self) -> str:
        return f"{self.source}:{self.line}" if self.line else self.source

    @property
    def receipt(self) -> str:
        if self.line:
            return f"Recorded at {self.location}"
        return f"Computed from {self.source}: {self.expression}"


def format_value(value: Any, spec: str = "", minus: bool = False) -> str:
    """Format a scalar with a Python format spec; `minus` swaps '-' for the typographic minus."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise ValueError(f"refusing to format non-finite value {value!r}")
    if isinstance(value, bool) or value is None:
        text = "true" if value is True else "false" if value is False else "null"
    else:
        text = format(value, spec) if spec else str(value)
    return text.replace("-", MINUS) if minus and isinstance(value, (int, float)) else text
