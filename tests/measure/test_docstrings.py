"""Every public function and method of measure/ has a docstring (issue 19 item 6)."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def undocumented(root: Path = REPO / "measure") -> list[str]:
    """`path:line name` of every public function or method (of a public class) without a docstring."""
    found = []

    def walk(body, path, prefix=""):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                if ast.get_docstring(node) is None:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {prefix}{node.name}")
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                walk(node.body, path, f"{node.name}.")

    for path in sorted(root.rglob("*.py")):
        walk(ast.parse(path.read_text(encoding="utf-8")).body, path)
    return found


def test_every_public_function_of_measure_has_a_docstring():
    assert undocumented() == []


def test_the_check_finds_a_function_without_one(tmp_path):
    (tmp_path / "probe.py").write_text('def shown():\n    """Said."""\n\n\ndef bare():\n    pass\n\n\n'
                                       'class Box:\n    def size(self):\n        return 1\n\n'
                                       '    def _hidden(self):\n        return 2\n', encoding="utf-8")
    assert undocumented(tmp_path) == ["probe.py:5 bare", "probe.py:10 Box.size"]
