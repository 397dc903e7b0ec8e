"""The generator's structure, checked: the stages never touch the page cache (site.py owns it and
hands each stage one hook), and what docs/ARCHITECTURE.md says about the code stays true."""
from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from site_src.stages import bundle, number, publish, render, write

REPO = Path(__file__).resolve().parents[2]
STAGES = REPO / "site_src" / "stages"


def test_no_stage_knows_the_page_cache():
    """Only site.py holds the page cache (incremental.PageMemo); a stage gets at most one hook,
    `reuse`, and calls it the same way whether a result is made or replayed."""
    for path in sorted(STAGES.glob("*.py")):
        if path.name == "model.py":
            continue
        tree = ast.parse(path.read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        assert not any("incremental" in (m or "") for m in imported), f"{path.name} imports the page cache"
        assert not {"memo", "PageMemo"} & (names | attributes), f"{path.name} reaches for the page cache"
    hooks = {name: [p for p in inspect.signature(fn).parameters if p == "reuse"]
             for name, fn in [("number", number.number_figures), ("render", render.render_pages),
                              ("bundle", bundle.start_bundles), ("publish", publish.publish)]}
    assert all(found == ["reuse"] for found in hooks.values()), hooks
    assert "reuse" not in inspect.signature(write.write_and_swap).parameters


# ---------------------------------------------------------------- docs/ARCHITECTURE.md is true

# the site's layout and what `make setup-test` installs, not the tree's
_OUTPUT = ("public/", "assets/", "source/", ".cache/", ".public.builds/", "/", "node_modules/", ".venv/")
_BASES = ("", "site_src", "site_src/blocks", "bundle_kit", "tests")


def _named_paths(text: str) -> set[str]:
    """Repository paths the page names in `code`: anything with a folder, and bare .py files."""
    found = set()
    for token in re.findall(r"`([^`\n]+)`", text):
        if re.fullmatch(r"[\w.-]+(/[\w.-]+)*/?", token) is None or token.startswith(_OUTPUT):
            continue
        if "/" in token.rstrip("/") or token.endswith(("/", ".py")):
            found.add(token)
    return found


def test_every_path_the_architecture_page_names_exists():
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    named = _named_paths(text)
    assert {"site_src/stages/model.py", "record.py", "tests/incremental/", "stages/load.py"} <= named
    missing = sorted(p for p in named if not any((REPO / base / p).exists() for base in _BASES))
    assert not missing, f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"


def test_every_public_function_of_the_generator_has_a_docstring():
    missing = []
    for path in sorted((REPO / "site_src").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for holder in [tree] + [n for n in tree.body if isinstance(n, ast.ClassDef) and not n.name.startswith("_")]:
            for node in holder.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_") \
                        and ast.get_docstring(node) is None:
                    prefix = f"{holder.name}." if isinstance(holder, ast.ClassDef) else ""
                    missing.append(f"{path.relative_to(REPO)}:{node.lineno} {prefix}{node.name}")
    assert not missing, f"{len(missing)} public functions without a docstring:\n" + "\n".join(missing)
