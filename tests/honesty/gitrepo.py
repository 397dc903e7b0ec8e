"""A small git repository for the registration tests: a study folder and a registrations folder,
committed in whatever order a test needs."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

GOLDEN = {
    "study": "toy",
    "mean_rho": 0.25,
    "key_recovery": {"gap": -0.09, "n": 240},
    "key_check": {"worst_deviation": 0.01},
}

RECORD = """\
id: toy-gap
study: toy
claim: >-
  Patching recovers the key better than attribution.
quantity: key_recovery/gap
prediction: {op: ">", bound: 0.05}
kill: {quantity: key_check/worst_deviation, op: ">", bound: 0.2,
       meaning: "the key failed its own verification"}
rationale: >-
  Written before the data existed.
author: "a tester"
"""


class Repo:
    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.count = 0
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        self.count += 1
        stamp = f"2026-11-{10 + self.count // 10:02d}T{self.count % 10:02d}:00:00Z"
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
               "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp, "GIT_CONFIG_NOSYSTEM": "1",
               "HOME": str(self.root)}
        return subprocess.run(["git", "-C", str(self.root), *args], check=True, capture_output=True,
                              text=True, env=env).stdout

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def commit(self, message: str, *rels: str) -> str:
        self.git("add", *rels)
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD").strip()

    def write_data(self, golden: dict | None = None) -> None:
        self.write("bundles/toy/golden.json", json.dumps(golden or GOLDEN, indent=2) + "\n")
        self.write("bundles/toy/README.md", "The toy study.\n")

    def record(self, text: str = RECORD, name: str = "toy-gap") -> str:
        self.write(f"registrations/{name}.yaml", text)
        return f"registrations/{name}.yaml"


def registered_then_measured(root: Path, record: str = RECORD, golden: dict | None = None) -> Repo:
    """The honest order: the record alone, then the data."""
    repo = Repo(root)
    repo.commit("freeze the prediction", repo.record(record))
    repo.write_data(golden)
    repo.commit("the data", "bundles")
    return repo
