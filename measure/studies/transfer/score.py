"""The transfer study's two measurements of an organism (docs/transfer.md):

- `validate`: the key's check, by neither scored method (per-side resampling,
  measure/instruments/resample.py), restricted to the trained layers: with m the mean margin of
  the check twins, necessity = 1 - (margin with the key resampled) / m; sufficiency = (margin
  with every other head and MLP of those layers resampled) / m; leak = the largest
  |margin with one other component resampled - m| / m; each member's share.
- `blind_rows`: attribution and mean-mode patching of every head and MLP of those layers on the
  study twins, as the rows bundle_kit/hiddenkeys.py scores (the same instruments as the runner:
  `ActivationCache.attribution`, `patch_sweep`, with the mean over the study twins' clean runs).
"""
from __future__ import annotations

import random

import torch

from measure.instruments.patching import StatsAccumulator, patch_sweep
from measure.instruments.resample import per_side_sources, resampled_rewards
from measure.studies.routed.keys import universe
from measure.studies.transfer.plant import lower_stream, sequences


def components(adapter, first: int) -> list[str]:
    """The heads and MLPs of layers `first` and up: what a key is drawn from and what is ranked."""
    return universe(adapter.n_layers, adapter.n_heads, first)


def _mean_margin(rewards: torch.Tensor) -> float:
    r = rewards.double()
    return float((r[0::2] - r[1::2]).mean())


def validate(adapter, twins: list[dict], key: list[str], seed: int, first: int) -> dict:
    """The check's figures for `key` on `twins` (module docstring)."""
    seqs = sequences(twins)
    batch = adapter.batch(seqs.tolist())
    start = (first, lower_stream(adapter, seqs, first))
    sources = per_side_sources(twins, [seqs.shape[1]] * len(twins), random.Random(f"transfer/check/{seed}"))
    src = adapter.clean_run(adapter.batch([seqs[2 * q + side].tolist() for pair in sources for q, side in pair]))

    def resampled(patched) -> float:
        return _mean_margin(resampled_rewards(adapter, batch, src, set(patched), start=start))

    m = resampled(())
    outside = [c for c in components(adapter, first) if c not in key]
    singles = {c: abs(resampled([c]) - m) / abs(m) for c in outside}
    worst = max(singles, key=singles.get)
    return {"n": len(twins), "clean_margin": m, "key": sorted(key), "necessity": 1 - resampled(key) / m,
            "sufficiency": resampled(outside) / m, "leak": singles[worst], "leak_component": worst,
            "member_share": {c: 1 - resampled([c]) / m for c in sorted(key)}}


def blind_rows(adapter, twins: list[dict], first: int, max_rows: int = 512) -> tuple[list[dict], list[dict]]:
    """(attribution rows, mean-mode patching rows) of every head and MLP of layers `first` and up
    on `twins` (all dimensions together; one clean pass each)."""
    names = components(adapter, first)
    by_dim: dict[str, list[dict]] = {}
    for t in twins:
        by_dim.setdefault(t["dimension"], []).append(t)
    runs, acc = {}, StatsAccumulator()
    for dim, rows in by_dim.items():
        batch = adapter.batch(sequences(rows).tolist())
        runs[dim] = (rows, batch, adapter.clean_run(batch))
        acc.add(adapter, batch, runs[dim][2])
    stats = acc.finish()
    attribution, patching = [], []
    for dim, (rows, batch, run) in runs.items():
        clean = (run.reward[0::2] - run.reward[1::2]).double()
        attr = run.attribution()
        patched = patch_sweep(adapter, batch, run, stats, names, ("mean",), max_rows)
        for p, t in enumerate(rows):
            head = {"dimension": dim, "pair_id": t["pair_id"], "seed_id": t["seed_id"]}
            margin = round(float(clean[p]), 8)
            for c in names:
                a = attr[c].double()
                attribution.append({**head, "component": c,
                                    "attribution": round(float(a[2 * p] - a[2 * p + 1]), 8), "margin": margin})
                patching.append({**head, "component": c, "mode": "mean", "clean_margin": margin,
                                 "effect": round(float(patched[(c, "mean")][0][p].double() - clean[p]), 8)})
    return attribution, patching
