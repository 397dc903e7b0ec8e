"""The test suite's time at two commits, side by side: each run in a fresh clone of its commit (no
.cache, as a fresh checkout and CI start), pytest on the same paths, the two commits alternating
`--repeat` times. Prints each run's wall time and its CPU time (pytest and every process it
waited for: the site build, Chromium, the subprocesses of the tests), their ratios, the load
average, and the slowest tests of each commit's last run (pytest's --durations).

    .venv/bin/python benchmarks/benchmark_tests.py --base main --paths tests/site
    .venv/bin/python benchmarks/benchmark_tests.py --base 572a3bf --head HEAD --paths tests/site/test_layout.py
    .venv/bin/python benchmarks/benchmark_tests.py --base HEAD --head HEAD --pytest-args="-n 2"   # xdist

The clones share this checkout's .venv (linked) and node_modules (copied) and import their own
code (PYTHONPATH). A failing or skipping test is reported, not hidden: its run's exit status is printed.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DURATION = re.compile(r"^\s*(\d+\.\d+)s (call|setup|teardown)\s+(\S+)")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def clone(rev: str, into: Path) -> Path:
    """A fresh clone of `rev` with this checkout's .venv and node_modules linked in."""
    subprocess.run(["git", "clone", "-q", "--local", "--no-checkout", str(REPO), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "-q", "--detach", rev], check=True)
    if (REPO / ".venv").exists():
        (into / ".venv").symlink_to(os.path.realpath(REPO / ".venv"))
    if (REPO / "node_modules").exists():   # copied: the build takes Pyodide from a real folder only
        shutil.copytree(os.path.realpath(REPO / "node_modules"), into / "node_modules", symlinks=True)
    return into


def run_once(root: Path, paths: list[str], extra: list[str], durations: int) -> dict:
    """pytest in `root`: wall and CPU seconds, exit status, and its --durations lines."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [sys.executable, "-m", "pytest", *paths, "-q", "-p", "no:cacheprovider", f"--durations={durations}", *extra]
    cpu, start = _children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    slowest = [m.groups() for m in map(DURATION.match, done.stdout.splitlines()) if m]
    tail = [line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed|error)", line)]
    return {"wall": wall, "cpu": cpu, "status": done.returncode, "slowest": slowest,
            "summary": tail[-1] if tail else done.stdout[-300:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="main", help="the commit to compare against (default main)")
    parser.add_argument("--head", default="HEAD", help="the commit measured (default HEAD)")
    parser.add_argument("--paths", nargs="+", default=["tests"], help="what pytest runs (default tests)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--durations", type=int, default=20)
    parser.add_argument("--pytest-args", default="", help="more arguments for pytest, e.g. \"-n 2\"")
    args = parser.parse_args()
    revs = {}
    for name in ("base", "head"):
        rev = getattr(args, name)
        revs[name] = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", rev], capture_output=True,
                                    text=True, check=True).stdout.strip()
    runs: dict[str, list[dict]] = {"base": [], "head": []}
    loads = []
    for _ in range(args.repeat):
        for name, rev in revs.items():
            with tempfile.TemporaryDirectory(prefix=f"bench-tests-{name}-") as tmp:
                root = clone(rev, Path(tmp) / "repo")
                loads.append(os.getloadavg()[0])
                result = run_once(root, args.paths, shlex.split(args.pytest_args), args.durations)
                loads.append(os.getloadavg()[0])
            runs[name].append(result)
            print(f"{name} {rev}: {result['wall']:.1f} s wall, {result['cpu']:.1f} s CPU, exit {result['status']}: "
                  f"{result['summary']}", flush=True)
    print(f"\npytest {' '.join(args.paths)} {args.pytest_args}; load average {min(loads):.2f} to {max(loads):.2f}; "
          f"medians of {args.repeat}")
    median = {name: {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu")} for name, rs in runs.items()}
    for name, rev in revs.items():
        print(f"  {name} {rev}: {median[name]['wall']:.1f} s wall, {median[name]['cpu']:.1f} s CPU")
    print(f"  head/base: wall {median['head']['wall'] / median['base']['wall']:.2f}, "
          f"CPU {median['head']['cpu'] / median['base']['cpu']:.2f}")
    for name, rev in revs.items():
        print(f"\nslowest tests, {name} {rev} (last run):")
        for seconds, when, test in runs[name][-1]["slowest"]:
            print(f"  {float(seconds):8.2f} s {when:8s} {test}")
    return 0 if all(r["status"] == 0 for rs in runs.values() for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
