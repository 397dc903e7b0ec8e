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


MODULES = sorted((REPO / "measure").rglob("*.py"))


def test_every_folder_of_measure_is_a_package_and_is_walked():
    """The walk below reaches every subpackage (models, instruments, studies/*, runner)."""
    folders = {p.parent.relative_to(REPO / "measure").as_posix() for p in MODULES}
    assert {"models", "instruments", "runner", "studies/organism", "studies/planted", "studies/minilm"} <= folders
    for folder in (REPO / "measure").rglob("*"):
        if folder.is_dir() and folder.name != "__pycache__":
            assert (folder / "__init__.py").exists(), folder


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(REPO / "measure").as_posix())
def test_no_measure_module_imports_the_site_generator(path):
    assert not [n for n in _imports(path) if n == "site_src" or n.startswith("site_src.")]


def test_a_whole_study_run_loads_no_site_generator_module():
    code = ("import sys, measure.__main__, measure.runner.study, measure.runner.bundle, "
            "measure.studies.organism.train, measure.instruments.patching; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'site_src'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_pyproject_names_every_package_of_measure():
    """A non-editable install ships only the packages pyproject.toml's discovery finds (the
    install itself is tests/generator/test_install.py)."""
    import tomllib
    from setuptools import find_namespace_packages
    find = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]["find"]
    listed = set(find_namespace_packages(str(REPO), include=find["include"], exclude=find["exclude"]))
    packages = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "measure").rglob("__init__.py")}
    assert packages - listed == set()


def test_docs_architecture_names_every_folder_and_module_of_measure():
    """The picture of measure/ in docs/ARCHITECTURE.md matches the folders: each subfolder and each
    module of models/, instruments/ and runner/ is named there by its path."""
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = set()
    for folder in sorted((REPO / "measure").iterdir()):
        if folder.is_dir() and folder.name != "__pycache__":
            named.add(f"`measure/{folder.name}/`")
            for sub in sorted(folder.iterdir()):
                if sub.is_dir() and sub.name != "__pycache__":
                    named.add(f"`measure/{folder.name}/{sub.name}/`")
                elif sub.suffix == ".py" and sub.name != "__init__.py":
                    named.add(f"`measure/{folder.name}/{sub.name}`")
    assert sorted(n for n in named if n not in text) == []
