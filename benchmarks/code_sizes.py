"""The largest modules, classes and functions of a package, in lines, at a git revision or in the
work tree: how the structure's weight is spread (issue 19 reports these before and after).

Usage: python benchmarks/code_sizes.py [--rev REV] [--top N] [PACKAGE]   (default: site_src, work tree)
"""
from __future__ import annotations

import argparse
import ast
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def sources(package: str, rev: str | None) -> dict[str, str]:
    """{path: text} of every .py file under `package`, from the work tree or from `rev`."""
    if rev is None:
        return {p.relative_to(REPO).as_posix(): p.read_text(encoding="utf-8")
                for p in sorted((REPO / package).rglob("*.py")) if "__pycache__" not in p.parts}
    names = subprocess.run(["git", "-C", str(REPO), "ls-tree", "-r", "--name-only", rev, package],
                           capture_output=True, text=True, check=True).stdout.split()
    return {n: subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{n}"], capture_output=True, text=True,
                              check=True).stdout for n in names if n.endswith(".py")}


def definitions(path: str, text: str):
    """(qualified name, kind, lines) of every class and function of one module."""
    tree = ast.parse(text)

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                yield f"{path}:{name}", kind, child.end_lineno - child.lineno + 1
                yield from walk(child, name + ".")
    yield from walk(tree, "")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", nargs="?", default="site_src")
    parser.add_argument("--rev", default=None, help="a git revision (default: the work tree)")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    files = sources(args.package, args.rev)
    modules = sorted(((len(t.splitlines()), p) for p, t in files.items()), reverse=True)
    defs = [d for p, t in files.items() for d in definitions(p, t)]
    print(f"{args.package} at {args.rev or 'the work tree'}: {len(files)} modules, "
          f"{sum(n for n, _ in modules)} lines")
    print("largest modules:")
    for lines, path in modules[:args.top]:
        print(f"  {lines:5d}  {path}")
    for kind, plural in (("class", "classes"), ("function", "functions")):
        print(f"largest {plural}:")
        for name, _kind, lines in sorted((d for d in defs if d[1] == kind), key=lambda d: -d[2])[:args.top]:
            print(f"  {lines:5d}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
