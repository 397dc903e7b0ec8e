"""Resample ablation with a different source on each side of a pair: the check of a key that
neither scored method uses (attribution reads writes at the scoring token; patching replaces one
component's output by its mean, by zero, or by its output on the other response of the same pair).
A set of components takes its outputs, at every position, from clean runs on *other* responses of
the same length: one source for the chosen side and another for the rejected side, so the two
sides never share a replacement. Used by the planted study's key check and the routed
organisms' key validation."""
from __future__ import annotations

import random


def resampled_rewards(adapter, batch, source, patched: set, grad: bool = False, start=None):
    """Rewards (B,) with the `patched` components' outputs taken from `source` (a clean run on
    inputs of the same shape, row by row) at every position; everything else live. `grad` keeps
    the live path differentiable (training a routed organism to pass this very check). `start`
    = (layer, stream entering it) begins the pass there (components below it cannot be patched;
    the transfer study's checks patch only the top layers)."""
    import torch

    family = adapter.family
    ctx = family.context(batch.ids.shape[1], batch.lengths)
    first, resid = start if start is not None else (0, None)
    with torch.enable_grad() if grad else torch.no_grad():
        if resid is None:
            resid = family.embed(batch.ids)
        for i in range(first, adapter.n_layers):
            attn, heads = family.attn(i, resid, ctx)
            swap = [h for h in range(adapter.n_heads) if f"head_L{i}_H{h}" in patched]
            if swap:
                heads = heads.clone()
                for h in swap:
                    sl = slice(h * adapter.head_dim, (h + 1) * adapter.head_dim)
                    heads[..., sl] = source.heads[i][..., sl]
                attn = family.attn_from_heads(i, heads)
            resid = family.join(i, "attn", resid, attn)
            mlp = source.mlp[i] if f"mlp_L{i}" in patched else family.mlp(i, resid)
            resid = family.join(i, "mlp", resid, mlp)
        return adapter.reward_at(resid, batch.score_idx)


def per_side_sources(twins: list[dict], lengths: list[int], rng: random.Random) -> list[tuple[int, int]]:
    """For every twin, two source responses (twin index, side) of its length from two other,
    different twins (of the same rule when there are two, so that about half the sources hold
    the rule's word): one for the chosen side, one for the rejected side."""
    by_length: dict = {}
    for p, n in enumerate(lengths):
        by_length.setdefault(n, []).append(p)
    out = []
    for p, n in enumerate(lengths):
        others = [q for q in by_length[n] if q != p and twins[q]["dimension"] == twins[p]["dimension"]]
        if len(others) < 2:
            others = [q for q in by_length[n] if q != p]
        if len(others) < 2:
            raise ValueError(f"resample twins: fewer than two other twins of length {n} for {twins[p]['pair_id']}")
        q1, q2 = rng.sample(others, 2)
        out.append(((q1, rng.randrange(2)), (q2, rng.randrange(2))))
    return out
