"""Where a block's keys sit on its page."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lines:
    """Where a block's keys sit on the page: its fence's line, and each key's (`options/mode` for
    a key of a nested mapping)."""

    fence: int
    keys: dict

    def of(self, key: str) -> int:
        """The page line of `key` (the line after the fence when the block lacks it)."""
        return self.keys.get(key, self.fence + 1)
