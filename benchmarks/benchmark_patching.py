"""Time the naive patching loop against the measurement stage's sweep, on the same model and pairs.

The naive loop runs the Hugging Face model's full forward pass once per (pair, component, mode),
with a hook replacing the component's output. The sweep caches the clean activations, resumes
each patched run from the input of the patched layer, and batches the variants that resume from
the same point. Both patch every attn/mlp component and every head in modes mean, zero and swap.

    .venv/bin/python benchmarks/benchmark_patching.py [--model organism] [--pairs 24]

Prints layer evaluations (one sequence through one decoder layer = 1), wall times, their ratios,
and the largest disagreement between the two (must be <= 1e-5).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from measure.adapter import load  # noqa: E402
from measure.instruments import MODES, StatsAccumulator, naive_sweep, patch_sweep  # noqa: E402
from measure.jsonio import read_jsonl  # noqa: E402
from measure.study import ORGANISM_DIR, setup_determinism  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="organism")
    parser.add_argument("--pairs-file", type=Path, default=ORGANISM_DIR / "pairs.jsonl")
    parser.add_argument("--pairs", type=int, default=24, help="pairs to patch (spread over dimensions)")
    parser.add_argument("--shard-size", type=int, default=8, help="pairs per sweep batch, as in a study run")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    setup_determinism(0, args.threads, "cpu")
    adapter = load(args.model, ORGANISM_DIR)
    rows = read_jsonl(args.pairs_file)
    step = max(1, len(rows) // args.pairs)
    pairs = rows[::step][: args.pairs]
    seqs = [[adapter.encode(p["prompt"], p["chosen"]), adapter.encode(p["prompt"], p["rejected"])]
            for p in pairs]
    shards = [range(s, min(s + args.shard_size, len(pairs))) for s in range(0, len(pairs), args.shard_size)]
    batches = [adapter.batch([t for i in shard for t in seqs[i]]) for shard in shards]
    components = [c for c in adapter.components() if c != "embed"]

    acc = StatsAccumulator()  # the mean-mode values both methods patch in
    with torch.no_grad():
        for batch in batches:
            acc.add(adapter, batch, adapter.clean_run(batch))
    stats = acc.finish()

    def sweep():
        counter, out = {}, []
        for batch in batches:
            with torch.no_grad():
                run = adapter.clean_run(batch)
            counter["layer_evals"] = counter.get("layer_evals", 0) + batch.ids.shape[0] * adapter.n_layers
            out.append(patch_sweep(adapter, batch, run, stats, components, MODES, counter=counter))
        return counter, out

    def naive():
        counter, out = {}, []
        for batch in batches:
            out.append(naive_sweep(adapter, batch, stats, components, MODES, counter=counter))
        return counter, out

    sweep()  # warm both paths once so neither pays first-call costs in the timing
    t0 = time.perf_counter()
    naive_count, naive_out = naive()
    naive_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sweep_count, sweep_out = sweep()
    sweep_s = time.perf_counter() - t0

    worst = 0.0
    for slow, fast in zip(naive_out, sweep_out):
        for key, value in slow.items():
            worst = max(worst, float((fast[key][0] - value).abs().max()))
    variants = len(components) * len(MODES) * len(pairs)
    print(f"model {adapter.model_id}: {adapter.n_layers} layers, {adapter.n_heads} heads; "
          f"{len(pairs)} pairs x {len(components)} components x {len(MODES)} modes = {variants} patched pairs")
    print(f"{'':24}{'naive loop':>14}{'sweep':>14}{'ratio':>10}")
    print(f"{'layer evaluations':24}{naive_count['layer_evals']:>14,.0f}{sweep_count['layer_evals']:>14,.0f}"
          f"{naive_count['layer_evals'] / sweep_count['layer_evals']:>9.2f}x")
    print(f"{'wall time (s)':24}{naive_s:>14.3f}{sweep_s:>14.3f}{naive_s / sweep_s:>9.2f}x")
    print(f"largest disagreement: {worst:.2e} (must be <= 1e-5)")
    return 0 if worst <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
