"""measure/ has no import cycle (module-level and function-level imports alike)."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _module(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """{module: the measure modules it imports}, every import statement counted wherever it is."""
    modules = {_module(p): p for p in (REPO / "measure").rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            for target in targets:
                while target and target not in modules:  # `from pkg import name`: the module it reaches
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):
                    edges.add(target)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found by a depth-first search (each reported once, from its first module)."""
    found, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return found


def test_measure_has_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def _named_comparisons(names: set[str], root: Path = REPO / "measure") -> list[str]:
    """Every comparison in `root` against one of `names` (`x == "minilm"`, `x in ("organism",)`)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            constants = [c for o in operands for c in ([o] if isinstance(o, ast.Constant) else
                                                       getattr(o, "elts", []) if isinstance(o, (ast.Tuple, ast.List, ast.Set)) else [])]
            if any(isinstance(c, ast.Constant) and c.value in names for c in constants):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_code_in_measure_branches_on_a_model_or_study_name():
    """Names select code only through the tables of measure/studies/__init__.py."""
    from measure import studies
    names = set(studies.NAMED_MODELS) | set(studies.DEFINITIONS) | set(studies.TRAINERS) | {"planted"}
    assert _named_comparisons(names) == []


def test_the_name_check_finds_a_branch(tmp_path):
    (tmp_path / "probe.py").write_text('def f(spec):\n    if spec == "minilm":\n        return 1\n'
                                       '    return spec in ("organism", "other")\n', encoding="utf-8")
    assert [f.split(":")[:2] for f in _named_comparisons({"minilm", "organism"}, tmp_path)] == \
        [["probe.py", "2"], ["probe.py", "4"]]
