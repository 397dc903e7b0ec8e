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

    Optional extras (defaults keep the original five-field constructor working): `spec` and
    `minus` are the display format from a `fmt` stage; `items` holds, for a block value (an
    object, an array or a grouped aggregate), one `(key, Resolved)` per entry, each with its own
    line where it has one, so a table can give every cell its own receipt.
    """

    value: Any
    source: str
    line: int | None
    expression: str
    href: str
    spec: str = ""
    minus: bool = False
    items: tuple = ()

    @property
    def location(self) -> str:
        """`PATH:LINE`, or `PATH` for a computed value."""
        return f"{self.source}:{self.line}" if self.line else self.source

    @property
    def receipt(self) -> str:
        """The receipt's words: where the value was recorded, or how it was computed."""
        if self.line:
            return f"Recorded at {self.location}"
        return f"Computed from {self.source}: {self.expression}"

    @property
    def is_block(self) -> bool:
        """Whether the value is an object or an array (shown as a table, not inline)."""
        return isinstance(self.value, (dict, list))

    @property
    def display(self) -> str:
        """The value as the page shows it, after the `fmt` stage (if any)."""
        return format_value(self.value, self.spec, self.minus)


def format_value(value: Any, spec: str = "", minus: bool = False) -> str:
    """Format a scalar with a Python format spec; `minus` swaps '-' for the typographic minus."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise ValueError(f"refusing to format non-finite value {value!r}")
    if isinstance(value, bool) or value is None:
        text = "true" if value is True else "false" if value is False else "null"
    else:
        text = format(value, spec) if spec else str(value)
    return text.replace("-", MINUS) if minus and isinstance(value, (int, float)) else text
