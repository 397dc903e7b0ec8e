"""What the portable numerics mode costs, and what it buys: the organism study both ways.

    .venv/bin/python benchmarks/benchmark_numerics.py [--repeats 2] [--max-pairs N] [--train]

Runs the organism study from nothing (fresh shard folders) in child processes, alternating:

- `portable`: `python -m measure run`, which puts itself in the mode (`measure/numerics.py`);
  the caller's environment sets `ATEN_CPU_CAPABILITY=avx2`, which the mode overrides;
- `native`: the same run with the mode's entry replaced by a plain thread setting, so torch keeps
  the kernels it picks for this CPU (its best capability, MKL's own code path, oneDNN on).

Prints each run's wall time, the ratio of the medians with the load average beside it (the
machine is shared: compare ratios, not seconds), whether the portable runs' bundle is byte for
byte the committed `bundles/organism/` (the whole study rerun; the tests check it shard by shard)
and how many files of the native run differ from it.

`--train` also retrains the organism in the portable mode into a temporary folder (minutes) and
prints how far its weights and held-out accuracy land from the committed `models/organism/`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUNDLE = REPO / "bundles" / "organism"
COMPARED = ("attribution_per_pair.jsonl", "patching_per_pair.jsonl", "heads_attribution_per_pair.jsonl",
            "heads_patching_per_pair.jsonl", "lens_per_pair.jsonl", "pairs.jsonl", "key.json",
            "golden.json", "README.md")
NATIVE = """
import sys, torch
import measure.numerics as numerics
def native(threads=1):
    torch.set_num_threads(threads)
    return numerics.in_effect()
numerics.enter = native  # keep the kernels torch picks for this CPU
from measure.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


def run(kind: str, out: Path, max_pairs: int | None) -> float:
    args = ["run", "--model", "organism", "--study", "organism", "--out", str(out / "bundle"),
            "--runs-dir", str(out / "runs"), "--no-progress"]
    if max_pairs:
        args += ["--max-pairs", str(max_pairs)]
    env = dict(os.environ, ATEN_CPU_CAPABILITY="avx2")
    if kind == "native":
        env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}
        command = [sys.executable, "-c", NATIVE, *args]
    else:
        command = [sys.executable, "-m", "measure", *args]
    t0 = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{kind} run failed: {done.stderr.strip().splitlines()[-1:]}")
    return wall


def differing(a: Path, b: Path) -> list[str]:
    return [name for name in COMPARED if (a / name).read_bytes() != (b / name).read_bytes()]


def retrain(tmp: Path) -> None:
    import torch
    from safetensors.torch import load_file

    out = tmp / "organism"
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "measure", "train", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"training failed: {done.stderr.strip().splitlines()[-1:]}")
    committed = load_file(REPO / "models" / "organism" / "model.safetensors")
    retrained = load_file(out / "model.safetensors")
    diff = max((committed[k] - retrained[k]).abs().max().item() for k in committed)
    scale = max(committed[k].abs().max().item() for k in committed)
    same = all(torch.equal(committed[k], retrained[k]) for k in committed)
    acc = {name: json.loads((folder / "training.json").read_text())["heldout_accuracy_mean"]
           for name, folder in (("committed", REPO / "models" / "organism"), ("retrained", out))}
    print(f"retrained in the portable mode in {time.perf_counter() - t0:.0f} s: weights "
          f"{'identical' if same else 'differ'} from the committed ones; largest difference {diff:.3g} "
          f"(largest committed weight {scale:.3g}); held-out accuracy, mean: committed "
          f"{acc['committed']:.4f}, retrained {acc['retrained']:.4f}")
    for name in ("key.json", "pairs.jsonl", "train.jsonl", "heldout.jsonl", "key_twins.jsonl"):
        same = (out / name).read_bytes() == (REPO / "models" / "organism" / name).read_bytes()
        print(f"  {name}: {'identical' if same else 'differs'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each kind, alternating")
    parser.add_argument("--max-pairs", type=int, default=None, help="at most this many pairs per dimension")
    parser.add_argument("--train", action="store_true", help="also retrain the organism (minutes)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="benchmark_numerics_"))
    load_before = os.getloadavg()
    times = {"portable": [], "native": []}
    for i in range(args.repeats):
        for kind in ("portable", "native") if i % 2 == 0 else ("native", "portable"):
            wall = run(kind, tmp / f"{kind}{i}", args.max_pairs)
            times[kind].append(wall)
            print(f"{kind:8s} run {i}: {wall:6.1f} s", flush=True)
    load_after = os.getloadavg()
    portable, native = (statistics.median(times[k]) for k in ("portable", "native"))
    print(f"median: portable {portable:.1f} s, native {native:.1f} s; portable / native = "
          f"{portable / native:.3f} (load average {load_before[0]:.1f} before, {load_after[0]:.1f} after)")
    p0, n0 = tmp / "portable0" / "bundle", tmp / "native0" / "bundle"
    repeat = [differing(p0, tmp / f"portable{i}" / "bundle") for i in range(1, args.repeats)]
    print(f"portable runs byte-identical to each other: {all(not d for d in repeat)}")
    if args.max_pairs is None:
        d = differing(p0, BUNDLE)
        print(f"portable run against the committed bundles/organism/: "
              f"{'byte-identical' if not d else 'differs in ' + ', '.join(d)}")
        d = differing(n0, BUNDLE)
        print(f"native run against the committed bundle: {len(d)} of {len(COMPARED)} files differ {d}")
    if args.train:
        retrain(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
