"""The generator tests' fixture: a fresh copy of the hand-made fixture repository per test."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # importlib mode: make the helpers importable

from generator_helpers import make_site  # noqa: E402


@pytest.fixture
def site(tmp_path) -> Path:
    return make_site(tmp_path)
