"""Time a bundle's reproduce.py on a 25,000-row study (target: under 2 s), and the bundle build.

    .venv/bin/python benchmarks/benchmark_reproduce.py [--rows 25000] [--repeat 3]

Writes a synthetic study (tests/bundles/study_maker.py) with at least --rows attribution rows
into a temporary folder, unzips its bundle and runs `python -I reproduce.py` there, as a reader
would. Prints the best of --repeat wall times next to the target.
"""
from __future__ import annotations

import argparse
import io
import math
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "bundles"))

from site_src import bundles  # noqa: E402
from study_maker import write_study  # noqa: E402

TARGET_S = 2.0


def best_of(repeat: int, action) -> tuple[float, float]:
    """Best wall time and best child CPU time (user + sys) over `repeat` runs.

    CPU time is printed too because the 2 shared cores make wall time noisy under load.
    """
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        action()
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(walls), min(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=25_000, help="attribution rows (default 25000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs to take the best of (default 3)")
    args = parser.parse_args()

    # 12 dimensions and 32 layers (64 attn/mlp components + embed + bias), like an 8B study.
    dimensions = ("code", "confidence", "correctness", "factuality", "formatting", "helpfulness",
                  "instructions", "math", "refusal", "safety", "sycophancy", "verbosity")
    layers = 32
    per_pair = 2 * layers + 2
    pairs = max(2, math.ceil(args.rows / (len(dimensions) * per_pair)))
    with tempfile.TemporaryDirectory() as tmp:
        study = Path(tmp) / "bundles" / "bench"
        write_study(study, study="bench", dimensions=dimensions, pairs_per_dimension=pairs, layers=layers)
        attribution_rows = sum(1 for _ in (study / "attribution_per_pair.jsonl").open())
        patching_rows = sum(1 for _ in (study / "patching_per_pair.jsonl").open())
        (study / "README.md").write_text("# bench\n")

        build_s, _ = best_of(1, lambda: bundles.build_bundle(study, Path(tmp)))
        bundle = bundles.build_bundle(study, Path(tmp))
        folder = Path(tmp) / "unzipped"
        with zipfile.ZipFile(io.BytesIO(bundle.zip_bytes)) as archive:
            archive.extractall(folder)

        def run() -> None:
            done = subprocess.run([sys.executable, "-I", "reproduce.py"], cwd=folder, capture_output=True)
            if done.returncode != 0:
                raise SystemExit(done.stderr.decode())

        reproduce_s, reproduce_cpu = best_of(args.repeat, run)
        startup_s, _ = best_of(args.repeat, lambda: subprocess.run([sys.executable, "-I", "-c", "pass"]))

    print(f"study: {attribution_rows:,} attribution rows, {patching_rows:,} patching rows "
          f"(3 modes), {len(dimensions)} dimensions, {pairs} pairs each")
    print(f"zip: {bundle.size / 1e6:.1f} MB (stored)")
    print(f"reproduce.py (python -I, best of {args.repeat}): {reproduce_s:.3f} s   "
          f"target {TARGET_S:.1f} s   ratio {reproduce_s / TARGET_S:.2f}x of target   "
          f"(CPU {reproduce_cpu:.3f} s)")
    print(f"  of which interpreter start-up: {startup_s:.3f} s")
    print(f"build_bundle (zip + sha256 + reproduce run): {build_s:.3f} s")
    return 0 if reproduce_s < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
