"""A FigureContext over tests/figures/fixtures/, independent of the generator."""
from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path

import sys

import pytest

from bundle_kit import rankstats
from site_src.figures import FigureContext
from site_src.receipts import Resolved

# importlib import mode: make this folder's helper module importable by the tests
sys.path.insert(0, str(Path(__file__).parent))

from figtest_helpers import FIXTURES  # noqa: E402

SOURCE = "tests/figures/fixtures"


def resolve_path(name: str) -> Path:
    path = FIXTURES / name
    if not path.exists():
        raise FileNotFoundError(f"no fixture {name}")
    return path


def resolve_ref(ref: str) -> Resolved:
    """The two reference forms figures use: `FILE#KEY/PATH` and `FILE | count`."""
    ref = ref.strip()
    if "|" in ref:
        name, stage = (s.strip() for s in ref.split("|", 1))
        assert stage == "count", ref
        value = len(rankstats.read_jsonl(resolve_path(name)))
        return Resolved(value, f"{SOURCE}/{name}", None, ref, f"source/{SOURCE}/{name}")
    name, _, keypath = ref.partition("#")
    value = json.loads(resolve_path(name).read_text())
    for key in keypath.split("/"):
        value = value[int(key)] if isinstance(value, list) else value[key]
    line = _line_of(resolve_path(name), keypath.split("/")[-1])
    return Resolved(value, f"{SOURCE}/{name}", line, ref, f"source/{SOURCE}/{name}.html#L{line}")


def _line_of(path: Path, key: str) -> int | None:
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        if re.search(rf'"{re.escape(key)}"\s*:', text):
            return number
    return None


def receipt_html(resolved: Resolved, text: str) -> str:
    return f'<a class="receipt" href="{escape(resolved.href)}" title="{escape(resolved.receipt)}">{escape(text)}</a>'


@pytest.fixture
def ctx(tmp_path) -> FigureContext:
    return FigureContext(resolve_path=resolve_path, resolve_ref=resolve_ref, receipt_html=receipt_html,
                         cache_dir=tmp_path / "cache", asset_prefix="../assets/")
