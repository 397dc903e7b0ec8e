"""The measurement stage never imports the site generator; both share only safe_io and bundle_kit."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted((REPO / "measure").glob("*.py")), ids=lambda p: p.name)
def test_no_measure_module_imports_the_site_generator(path):
    assert not [n for n in _imports(path) if n == "site_src" or n.startswith("site_src.")]


def test_a_whole_study_run_loads_no_site_generator_module():
    code = ("import sys, measure.__main__, measure.study, measure.bundle, measure.organism, "
            "measure.instruments; print(sorted(m for m in sys.modules if m.split('.')[0] == 'site_src'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
