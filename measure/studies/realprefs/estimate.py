"""`python -m measure plan --model realprefs --study realprefs`: the study's work and time before it runs.

The work is counted from the real plan (`plan_study`: the instrument pairs, their token ids and
the shards as the study cuts them, each padded to its longest sequence), with the FLOP model of
`cost.py` for one sequence of T tokens through one BERT layer, forward (attention
`T 8 d^2 + 4 T^2 d`, MLP `T 4 d I`). Per shard of n pairs (B = 2n sequences, width T):

- clean passes: the statistics pass, the first stage's, the resample sources', the second
  stage's: 4 B sequences through all L layers;
- blocks, in each of the block modes: an attention patch at layer i runs layer i's MLP and the
  L - 1 - i layers above; an MLP patch the layers above (`patch_sweep`);
- heads, in each head mode: as an attention patch (the output projection is part of attention);
- the trained blocks patched together: from the first trained layer's attention up;
- the second stage: the n nested sets of the curve, each from its lowest block; before the first
  stage the order is unknown, so the estimate takes every set from layer 0 (an upper bound);
- the held-out scoring: every evaluation pair, one sequence at a time, unpadded, all L layers.

Attribution along the head and the null directions, the LayerNorms and the heads are left out of
the count (their time is in the measured rate). The rate is measured on the same code: one real
first-stage shard (the median width) measured as the study measures it, statistics from that
shard alone, in this process's CPU seconds (so other jobs do not inflate it much; with one thread
that is about the wall time of a quiet machine), its counted FLOPs divided by that time.
"""
from __future__ import annotations

import time

from measure.studies.realprefs.cost import layer_flops


def mlp_flops(T: int, d: int = 384, intermediate: int = 1536) -> float:
    """FLOPs of one sequence of T tokens through one BERT MLP, forward."""
    return T * 4.0 * d * intermediate


def shard_work(n_pairs: int, T: int, L: int, H: int, block_modes: int, head_modes: int, trained_layers: int,
               sets: int | None = None, d: int = 384, intermediate: int = 1536) -> dict[str, float]:
    """FLOPs of one shard by part (module docstring)."""
    B = 2 * n_pairs
    layer, mlp = layer_flops(T, d, intermediate), mlp_flops(T, d, intermediate)
    attn_patch = sum(mlp + (L - 1 - i) * layer for i in range(L))       # one variant at each layer
    mlp_patch = sum((L - 1 - i) * layer for i in range(L))
    return {
        "clean": 4 * B * L * layer,
        "blocks": B * block_modes * (attn_patch + mlp_patch),
        "heads": B * head_modes * H * attn_patch,
        "trained_blocks": B * trained_layers * layer,
        "curve": B * (2 * L if sets is None else sets) * L * layer,
    }


def estimate(config, timed: bool = True) -> dict:
    """The plan's work by part, the rate of one timed shard, and the projected CPU seconds."""
    import torch

    from measure.instruments.patching import StatsAccumulator
    from measure.runner.study import measure_shard, plan_study
    from measure.studies.realprefs import grid as study, heldout, model as realprefs

    plan = plan_study(config)
    adapter = plan.adapter
    L, H, d = adapter.n_layers, adapter.n_heads, adapter.hidden
    intermediate = adapter.model.config.intermediate_size
    widths = [max(len(s) for i in shard for s in plan.seqs[i]) for shard in plan.shards]
    parts: dict[str, float] = {}
    full: dict[str, float] = {}
    for shard, T in zip(plan.shards, widths):
        for key, value in shard_work(len(shard), T, L, H, len(study.BLOCK_MODES), len(study.HEAD_MODES),
                                     realprefs.SETTINGS["trained_layers"], None, d, intermediate).items():
            parts[key] = parts.get(key, 0.0) + value
        for key, value in shard_work(len(shard), T, L, H, len(study.BLOCK_MODES), len(study.BLOCK_MODES),
                                     realprefs.SETTINGS["trained_layers"], None, d, intermediate).items():
            full[key] = full.get(key, 0.0) + value
    scored = heldout.scored_pairs(plan)
    lengths = [len(s) for p in scored for s in plan.definition.encode(adapter, p, p["pair_id"])]
    parts["heldout"] = sum(L * layer_flops(T, d, intermediate) for T in lengths)
    full["heldout"] = parts["heldout"]
    out = {"pairs": {o: sum(1 for p in plan.pairs if p["dimension"] == o) for o in dict.fromkeys(p["dimension"] for p in plan.pairs)},
           "shards": len(plan.shards), "mean_width": sum(widths) / len(widths),
           "mean_tokens": sum(len(s) for pair in plan.seqs for s in pair) / (2 * len(plan.seqs)),
           "scored_pairs": len(scored), "flops": parts, "flops_total": sum(parts.values()),
           "full_grid_flops_total": sum(full.values()), "numerics": plan.numerics}
    if timed:
        k = sorted(range(len(plan.shards)), key=lambda j: widths[j])[len(plan.shards) // 2]
        acc = StatsAccumulator(heads=True)
        batch = adapter.batch(plan.shard_input(k)[1])
        with torch.no_grad():
            acc.add(adapter, batch, adapter.clean_run(batch))
        stats = acc.finish(seeds=[plan.pairs[i]["seed_id"] for i in plan.shards[k]])
        t0 = time.process_time()
        measure_shard(plan, stats, k)
        seconds = time.process_time() - t0
        own = shard_work(len(plan.shards[k]), widths[k], L, H, len(study.BLOCK_MODES), len(study.HEAD_MODES),
                         realprefs.SETTINGS["trained_layers"], 0, d, intermediate)
        own_flops = sum(own.values()) - own["clean"] / 2   # the timed shard ran 2 of the 4 clean passes
        rate = own_flops / seconds
        out.update({"timed_shard": {"pairs": len(plan.shards[k]), "width": widths[k], "seconds": seconds,
                                    "flops": own_flops}, "rate": rate,
                    "seconds": {key: v / rate for key, v in parts.items()},
                    "total_seconds": out["flops_total"] / rate, "full_grid_seconds": out["full_grid_flops_total"] / rate})
    return out


def estimate_command(config, json_path=None) -> int:
    """Print the study's estimate (and write it as JSON to `json_path`); exit status 0."""
    e = estimate(config)
    print(f"realprefs study: instrument pairs {', '.join(f'{o} {n}' for o, n in e['pairs'].items())} in "
          f"{e['shards']} shards (mean width {e['mean_width']:.1f} tokens, mean sequence {e['mean_tokens']:.1f}); "
          f"{e['scored_pairs']} evaluation pairs scored")
    t = e["timed_shard"]
    print(f"timed: one first-stage shard of {t['pairs']} pairs at width {t['width']}: {t['seconds']:.1f} s CPU for "
          f"{t['flops'] / 1e12:.2f} TFLOP -> {e['rate'] / 1e9:.1f} GFLOP/s")
    for key, flops in e["flops"].items():
        print(f"  {key:15} {flops / 1e12:8.1f} TFLOP -> {e['seconds'][key] / 60:7.1f} min")
    print(f"  total {e['flops_total'] / 1e12:.1f} TFLOP -> {e['total_seconds'] / 3600:.2f} h of one core "
          f"(the curve counted from layer 0: an upper bound); heads in every block mode (the full grid): "
          f"{e['full_grid_seconds'] / 3600:.2f} h")
    if json_path:
        from safe_io import write_atomic

        from measure.runner.jsonio import json_text
        write_atomic(json_path, json_text(e))
    return 0
