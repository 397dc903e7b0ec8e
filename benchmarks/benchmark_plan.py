"""Check `python -m measure plan`'s CPU estimate against measured runs, side by side.

For each of three random-weight Llama reward models (no download: built from a config with a
fixed seed), the plan's estimate (its FLOP rate measured on this machine by the plan's own
2-layer calibration) is set against the measured time of the measurement it estimates: the stats
pass and every shard's rows (clean run, attribution, lens, patch sweep of every attn/mlp block
and head in three modes), one thread, float32, on the same shards. Both sides time this
process's CPU seconds, so other jobs on a shared machine skew them less than wall time would.

    .venv/bin/python benchmarks/benchmark_plan.py [--quick]

Prints estimate, measurement and their error per size; exits 1 if any error exceeds the stated
bound (BOUND). Timings on a shared machine are inflated; the ratio is what is checked.
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

from measure.models.adapter import Adapter  # noqa: E402
from measure.instruments.patching import StatsAccumulator  # noqa: E402
from measure.runner.plan import Shape, make_plan  # noqa: E402
from measure.runner.rows import shard_rows  # noqa: E402

BOUND = 0.25  # the stated error bound: |estimate / measured - 1| on these CPU sizes
SIZES = [  # name, layers, hidden, heads, kv heads, MLP, pairs, longest sequence
    ("4L-h64", 4, 64, 4, 4, 128, 32, 24),
    ("8L-h256", 8, 256, 8, 4, 688, 8, 48),
    ("4L-h512", 4, 512, 8, 8, 1376, 8, 64),
]
SHARD = 8
VOCAB = 128


def random_model(layers, hidden, heads, kv, mlp, width):
    from transformers import AutoModelForSequenceClassification, LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=mlp,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
                         max_position_embeddings=max(64, width), num_labels=1, pad_token_id=0)
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    return Adapter(model, None, f"random-llama-{layers}L-{hidden}"), config


def sequences(pairs, width, seed=0):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(2 * pairs):
        n = int(torch.randint(width // 2, width + 1, (1,), generator=gen))
        out.append(torch.randint(1, VOCAB, (n,), generator=gen).tolist())
    return out


def measure(adapter, seqs, pairs):
    """The measurement the plan estimates: the stats pass, then every shard's rows."""
    shards = [range(s, min(s + SHARD, pairs)) for s in range(0, pairs, SHARD)]
    fake = [{"dimension": "d", "pair_id": f"p{i}", "seed_id": f"s{i}"} for i in range(pairs)]
    t0 = time.process_time()
    with torch.no_grad():
        acc = StatsAccumulator()
        for shard in shards:
            batch = adapter.batch([seqs[t] for i in shard for t in (2 * i, 2 * i + 1)])
            acc.add(adapter, batch, adapter.clean_run(batch))
        stats = acc.finish()
        for shard in shards:
            shard_rows(adapter, [fake[i] for i in shard],
                       [seqs[t] for i in shard for t in (2 * i, 2 * i + 1)], stats, 512)
    return time.process_time() - t0, [(len(s), max(len(seqs[t]) for i in s for t in (2 * i, 2 * i + 1)))
                                      for s in shards]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the smallest size only")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    print("CPU seconds of this process, one thread")
    print(f"{'model':10}{'params':>10}{'shards':>8}{'estimate s':>12}{'measured s':>12}{'error':>9}")
    worst = 0.0
    for name, layers, hidden, heads, kv, mlp, pairs, width in SIZES[:1] if args.quick else SIZES:
        adapter, config = random_model(layers, hidden, heads, kv, mlp, width)
        seqs = sequences(pairs, width)
        measured, shards = measure(adapter, seqs, pairs)
        shape = Shape.from_config(config.to_dict())
        plan = make_plan(shape, pairs, gpus=0, dtype="float32", shard_size=SHARD, shards=shards)
        estimate = plan["time"]["wall_time_s"]
        error = estimate / measured - 1
        worst = max(worst, abs(error))
        print(f"{name:10}{shape.params() / 1e6:>9.2f}M{len(shards):>8}{estimate:>12.2f}{measured:>12.2f}"
              f"{error:>+9.1%}")
    print(f"largest |error| {worst:.1%} (stated bound {BOUND:.0%}); load {os.getloadavg()[0]:.2f}")
    return 0 if worst <= BOUND else 1


if __name__ == "__main__":
    sys.exit(main())
