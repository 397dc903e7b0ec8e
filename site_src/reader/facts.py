"""The commit a site is built from, as the footer and the citations name it."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from safe_io import git_state


@dataclass(frozen=True)
class Facts:
    commit: str | None      # full sha of HEAD, None outside a git checkout
    dirty: bool             # tracked or untracked files differ from HEAD
    date: str | None        # the commit's date, YYYY-MM-DD (deterministic, unlike the build time)

    @property
    def short(self) -> str:
        """The commit's id as pages print it (12 characters)."""
        return self.commit[:12] if self.commit else ""

    @property
    def footer(self) -> str:
        """The footer's sentence naming the commit."""
        if not self.commit:
            return "Built outside a git checkout: no commit to name."
        state = " plus uncommitted changes" if self.dirty else ""
        return f"Built from commit {self.short}{state}"


def site_facts(root: Path) -> Facts:
    """The commit the site is built from, whether the tree is dirty, and the commit's date."""
    commit, dirty = git_state(root)
    date = None
    if commit:
        try:
            date = subprocess.run(["git", "-C", str(root), "show", "-s", "--format=%cs", commit],
                                  capture_output=True, text=True, check=True, timeout=30).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            date = None
    return Facts(commit, dirty, date)
