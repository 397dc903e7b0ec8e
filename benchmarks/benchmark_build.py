"""Time a full site build (empty figure cache) against a no-op rebuild (warm cache), side by side.

The repository's sources (content/, templates/, bundles/, quoted/) are copied into a temporary
root so this repository's own cache and public/ are left alone. Each build runs in a fresh
interpreter, so only the on-disk SVG cache separates a cold build from a warm one. Prints the
median of each, their ratio, and how many SVG files the cold build rendered into the cache
(a warm build adds none).

Usage: python benchmarks/benchmark_build.py [--repeat N]
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("content", "templates", "bundles", "quoted")


def timed_build(root: Path, out: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, str(REPO / "build.py"), "--root", str(root), "--out", str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def svg_count(root: Path) -> int:
    cache = root / ".cache" / "figures"
    return len(list(cache.glob("*.svg"))) if cache.is_dir() else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="cold/warm build pairs to time (default 3)")
    args = parser.parse_args()
    cold, warm = [], []
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        root = Path(tmp) / "repo"
        for name in SOURCES:
            shutil.copytree(REPO / name, root / name)
        for _ in range(args.repeat):
            shutil.rmtree(root / ".cache", ignore_errors=True)
            cold.append(timed_build(root, Path(tmp) / "out-cold"))
            rendered = svg_count(root)
            warm.append(timed_build(root, Path(tmp) / "out-warm"))
            added = svg_count(root) - rendered
    c, w = statistics.median(cold), statistics.median(warm)
    print(f"full build (empty cache):  median {c:.2f} s over {args.repeat} ({', '.join(f'{t:.2f}' for t in cold)})")
    print(f"no-op rebuild (warm cache): median {w:.2f} s over {args.repeat} ({', '.join(f'{t:.2f}' for t in warm)})")
    print(f"ratio full / no-op: {c / w:.2f}x; SVGs rendered cold: {rendered}, added by the rebuild: {added}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
