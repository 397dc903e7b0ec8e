"""Per-pair rows of one shard: attribution, patching and lens, rounded as they will be written."""
from __future__ import annotations

import math

import torch

from bundle_kit import contract

from measure.instruments import offdist
from measure.models.adapter import Adapter, parse_component
from measure.errors import MeasureError
from measure.instruments.patching import MODES, ActivationStats, check_finite, patch_sweep
from measure.runner.jsonio import fixed

PLACES = contract.JSONL_PLACES


def _row(fields: tuple[str, ...], head: dict, **values) -> dict:
    """A row with exactly the contract's fields, in the contract's order."""
    merged = {**head, **values}
    if set(merged) != set(fields):
        raise MeasureError(f"a row's fields {sorted(merged)} are not the contract's {list(fields)}")
    return {name: merged[name] for name in fields}


def _moves(effect: float, clean: float):
    if clean == 0:
        return 0.0 if effect == 0 else None
    return 100 * abs(effect) / abs(clean)


def shard_rows(adapter: Adapter, pairs: list[dict], seqs: list[list[int]], stats: ActivationStats,
               max_rows: int, modes=MODES, patch_heads: bool = True) -> dict[str, list[dict]]:
    """All rows for these pairs (`seqs` interleaves chosen/rejected token ids)."""
    batch = adapter.batch(seqs)
    run = adapter.clean_run(batch)
    check_finite(run.reward, f"clean rewards of pairs {pairs[0]['pair_id']}..{pairs[-1]['pair_id']}")
    rewards = run.reward.double()
    margins = rewards[0::2] - rewards[1::2]
    attr = {k: v.double() for k, v in run.attribution().items()}
    running = run.lens().double()
    components = [c for c in adapter.components(heads=patch_heads) if c != "embed"]
    folds = (torch.tensor([stats.folds[p["seed_id"]] for p in pairs])
             if stats is not None and stats.folds else None)
    patched = patch_sweep(adapter, batch, run, stats, components, modes, max_rows, folds=folds)
    out = {"attribution": [], "attribution_heads": [], "patching": [], "patching_heads": [],
           "lens": []}
    for p, pair in enumerate(pairs):
        head = {"model": adapter.model_id, **{name: pair[name] for name in contract.ROW_HEAD[1:]}}
        margin = float(margins[p])
        for name in adapter.components() + ["bias"]:
            kind, layer, _ = parse_component(name)
            chosen, rejected = float(attr[name][2 * p]), float(attr[name][2 * p + 1])
            row = _row(contract.ATTRIBUTION_ROW, head, component=name, kind=kind, layer=layer,
                       attribution=chosen - rejected, attr_chosen=chosen, attr_rejected=rejected,
                       margin=margin)
            out["attribution_heads" if kind == "head" else "attribution"].append(row)
        for name in components:
            kind, layer, _ = parse_component(name)
            for mode in modes:
                value, off = patched[(name, mode)]
                patched_margin = float(value[p])
                check_finite(value[p:p + 1], f"pair {pair['pair_id']}, {name} patched ({mode})")
                effect = patched_margin - margin
                z = None if math.isnan(float(off[p])) else round(float(off[p]), PLACES)
                row = _row(contract.PATCHING_ROW, head, component=name, kind=kind, layer=layer, mode=mode,
                           clean_margin=margin, patched_margin=patched_margin, effect=effect,
                           moves_pct=_moves(effect, margin), offdist_z=z,
                           offdist_flag=None if z is None else z > offdist.THRESHOLD)
                out["patching_heads" if kind == "head" else "patching"].append(row)
        for i in range(adapter.n_layers):
            out["lens"].append(_row(contract.LENS_ROW, head, layer=i, depth=(i + 1) / adapter.n_layers,
                                    running_margin=float(running[i, 2 * p] - running[i, 2 * p + 1])))
    return {k: fixed(v, PLACES) for k, v in out.items()}


def attribution_gap(rows: list[dict]) -> float:
    """Largest |sum of attributions - margin| over pairs (embed + attn + mlp + bias rows)."""
    sums: dict[str, float] = {}
    margins: dict[str, float] = {}
    for r in rows:
        if r["kind"] in ("embed", "attn", "mlp", "bias"):
            sums[r["pair_id"]] = sums.get(r["pair_id"], 0.0) + r["attribution"]
            margins[r["pair_id"]] = r["margin"]
    if not sums:
        raise MeasureError("no attribution rows")
    return max(abs(sums[k] - margins[k]) for k in sums)

