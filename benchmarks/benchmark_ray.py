"""The organism study in-process and on a local Ray, side by side, with the ratio.

    .venv/bin/python benchmarks/benchmark_ray.py [--cpus 2] [--max-pairs N]

Both runs start from nothing (fresh shard folders in a temporary directory) and write the whole
bundle, so each time includes planning (model load, tokenization), the stats pass, every shard
and the bundle summary (its seed bootstrap). The Ray time also includes starting each worker
(one per CPU, each loading the model once); starting the local Ray instance itself is timed
apart. Checks that the two bundles are byte-identical (all but manifest.json). Timings on a
shared machine are inflated: compare the ratio, with the load average printed beside it.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from measure.runner.config import StudyConfig  # noqa: E402
from measure.runner.ray_runner import run_study_ray  # noqa: E402
from measure.runner.run import run_study  # noqa: E402


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != "manifest.json"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray instance (one worker each)")
    parser.add_argument("--max-pairs", type=int, default=None, help="at most this many pairs per dimension")
    args = parser.parse_args()
    import ray

    tmp = Path(tempfile.mkdtemp(prefix="benchmark_ray_"))

    def config(name):
        return StudyConfig(model="organism", study="organism", out=tmp / name / "bundle",
                           runs_dir=tmp / name / "runs", max_pairs=args.max_pairs, progress=False)

    t0 = time.perf_counter()
    inprocess = run_study(config("inprocess"))
    inprocess_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    init_s = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        on_ray = run_study_ray(config("ray"))
        ray_s = time.perf_counter() - t0
    finally:
        ray.shutdown()
    same = files(tmp / "inprocess" / "bundle") == files(tmp / "ray" / "bundle")
    shards = inprocess["manifest"]["shards"]
    print(f"organism study: {shards} shards; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"(timings on a shared machine are inflated)")
    print(f"{'in-process':28}{inprocess_s:>9.1f} s")
    print(f"{f'Ray, {args.cpus} CPU workers':28}{ray_s:>9.1f} s   (+ {init_s:.1f} s starting the local Ray instance)")
    print(f"ratio Ray / in-process: {ray_s / inprocess_s:.2f}x ({(ray_s + init_s) / inprocess_s:.2f}x with the start)")
    print(f"bundles byte-identical (all but manifest.json): {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
