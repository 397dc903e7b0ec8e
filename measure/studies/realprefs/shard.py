"""One shard of the realprefs study: its rows, and how the bundle adds up the rows kept as sums.

A shard holds instrument pairs of one objective (`study.RealprefsStudy.shards`), each read along
that objective's head. `first(plan, stats, k)` measures, from one clean pass and one clean pass of
the resample sources:

- `attribution` (contract rows): embed, each block, bias; `patching` (contract rows): each block
  in `mean` mode, with its off-distribution score;
- `blocks` (one row a pair): each block's `resample` and `swap` effect and off-distribution score,
  in the order of `block_names`, and the margin with the trained blocks patched together;
- `heads` (one row a pair; `reduce` keeps their sums per objective and head): each head's
  attribution, `mean`-mode effect and off-distribution score, in `head_names` order;
- `null` (one row a direction): along each random direction (`study.null_directions`), the sums
  over the shard's pairs of the margin, |margin|, every component's attribution and every patched
  variant's |effect|, from the same passes (their read-outs projected on every direction at once).

`second(plan, stats, k)` patches its objective's first k blocks together (the order fixed by
`orders` from the first stage's rows), k = 1..n: `curve` (one row a pair) and `null_curve` (one
row a direction, sums as for `null`).
"""
from __future__ import annotations

import math

import torch

from bundle_kit import contract, localize

from measure.instruments import offdist
from measure.instruments.patching import check_finite, patch_sets, patch_sweep
from measure.models.adapter import parse_component
from measure.runner.jsonio import fixed
from measure.runner.rows import _fields, _moves, _row, source_run
from measure.studies.realprefs.grid import BLOCK_MODES, HEAD_MODES, null_directions, trained_blocks

PLACES = contract.JSONL_PLACES
Z_PLACES = 4          # off-distribution scores in the wide rows: their flag is a comparison with 1
SUMMED = ("null", "null_curve")


def block_names(n_layers: int) -> list[str]:
    """The blocks in model order: attn_L0, mlp_L0, attn_L1, ..."""
    return [f"{kind}_L{i}" for i in range(n_layers) for kind in ("attn", "mlp")]


def head_names(n_layers: int, n_heads: int) -> list[str]:
    """The heads in model order: head_L0_H0, head_L0_H1, ..."""
    return [f"head_L{i}_H{j}" for i in range(n_layers) for j in range(n_heads)]


def _z(value: float):
    return None if math.isnan(value) else round(value, Z_PLACES)


def _setup(plan, stats, k: int):
    """The shard's pairs, batch, clean run, margins (P,), folds and null directions, with the
    adapter pointed at the shard's heads."""
    adapter = plan.adapter
    pairs, seqs = plan.shard_input(k)
    rows = plan.shard_rows_index(k)
    plan.reads[0].set_on(adapter, rows)
    batch = adapter.batch(seqs)
    run = adapter.clean_run(batch)
    check_finite(run.reward, f"clean rewards of pairs {pairs[0]['pair_id']}..{pairs[-1]['pair_id']}")
    margins = (run.reward[0::2] - run.reward[1::2]).double()
    folds = (torch.tensor([stats.folds[p["seed_id"]] for p in pairs]) if stats is not None and stats.folds else None)
    R = null_directions(adapter.hidden).double()
    clean_out = adapter.readout_at(run.resid_post[-1], batch.score_idx).double()
    null_margins = (clean_out[0::2] - clean_out[1::2]) @ R.T                      # (P, K)
    return adapter, pairs, rows, batch, run, margins, folds, R, null_margins


def _along(readouts: torch.Tensor, R: torch.Tensor, null_margins: torch.Tensor) -> torch.Tensor:
    """(P, K) |effect| along every null direction of a patched variant's read-outs (B, d)."""
    ro = readouts.double()
    return ((ro[0::2] - ro[1::2]) @ R.T - null_margins).abs()


def first(plan, stats, k: int) -> dict[str, list[dict]]:
    """Shard k's first-stage rows by kind (module docstring), rounded as they will be written."""
    try:
        return fixed(_first(plan, stats, k), PLACES)
    finally:
        plan.adapter.set_directions(None)


def _first(plan, stats, k: int) -> dict[str, list[dict]]:
    adapter, pairs, rows, batch, run, margins, folds, R, null_margins = _setup(plan, stats, k)
    read, max_rows = plan.reads[0], plan.config.max_rows
    blocks, heads = block_names(adapter.n_layers), head_names(adapter.n_layers, adapter.n_heads)
    attr = {c: v.double() for c, v in run.attribution().items()}
    source = source_run(adapter, read, rows, plan.seqs)
    patched = patch_sweep(adapter, batch, run, stats, blocks, BLOCK_MODES, max_rows, folds=folds, source=source,
                          readout=True)
    patched.update(patch_sweep(adapter, batch, run, stats, heads, HEAD_MODES, max_rows, folds=folds, readout=True))
    (trained, trained_out), = patch_sets(adapter, batch, run, stats, [trained_blocks(adapter.n_layers)], "mean",
                                         max_rows, readout=True)
    for (name, mode), (value, _off, _ro) in patched.items():
        check_finite(value, f"pairs {pairs[0]['pair_id']}..{pairs[-1]['pair_id']}, {name} patched ({mode})")
    check_finite(trained, f"pairs {pairs[0]['pair_id']}..{pairs[-1]['pair_id']}, trained blocks patched")
    out = {"attribution": [], "patching": [], "blocks": [], "heads": []}
    attribution_fields = _fields(contract.ATTRIBUTION_ROW, None)
    patching_fields = _fields(contract.PATCHING_ROW, None)
    for p, pair in enumerate(pairs):
        head = {"model": adapter.model_id, **{name: pair[name] for name in contract.ROW_HEAD[1:]}}
        margin = float(margins[p])
        for name in ["embed"] + blocks + ["bias"]:
            kind, layer, _ = parse_component(name)
            chosen, rejected = float(attr[name][2 * p]), float(attr[name][2 * p + 1])
            out["attribution"].append(_row(attribution_fields, head, component=name, kind=kind, layer=layer,
                                           attribution=chosen - rejected, attr_chosen=chosen,
                                           attr_rejected=rejected, margin=margin))
        for name in blocks:
            kind, layer, _ = parse_component(name)
            value, off, _ro = patched[(name, "mean")]
            effect = float(value[p]) - margin
            z = None if math.isnan(float(off[p])) else round(float(off[p]), PLACES)   # as measure/runner/rows.py
            out["patching"].append(_row(patching_fields, head, component=name, kind=kind, layer=layer, mode="mean",
                                        clean_margin=margin, patched_margin=float(value[p]), effect=effect,
                                        moves_pct=_moves(effect, margin), offdist_z=z,
                                        offdist_flag=None if z is None else z > offdist.THRESHOLD))
        wide = {name: pair[name] for name in ("dimension", "pair_id", "seed_id")}
        wide["margin"] = margin
        for mode in ("resample", "swap"):
            wide[mode] = [float(patched[(c, mode)][0][p]) - margin for c in blocks]
            wide[f"{mode}_z"] = [_z(float(patched[(c, mode)][1][p])) for c in blocks]
        wide["trained_blocks"] = float(trained[p])
        out["blocks"].append(wide)
        out["heads"].append({**{name: pair[name] for name in ("dimension", "pair_id", "seed_id")}, "margin": margin,
                             "heads_per_layer": adapter.n_heads,
                             "attribution": [float(attr[h][2 * p] - attr[h][2 * p + 1]) for h in heads],
                             "effect": [float(patched[(h, "mean")][0][p]) - margin for h in heads],
                             "z": [_z(float(patched[(h, "mean")][1][p])) for h in heads]})
    out["null"] = _null_first(pairs, run, R, null_margins, patched, trained_out, blocks, heads)
    return out


def _null_first(pairs, run, R, null_margins, patched, trained_out, blocks, heads) -> list[dict]:
    """One row a direction: the shard's sums along it (module docstring)."""
    along = run.attribution_along(R.float())                                     # {c: (K, B)}
    attr = {c: (v[:, 0::2] - v[:, 1::2]).double().sum(1) for c, v in along.items()}  # (K,) summed over pairs
    effect = {key: _along(value[2], R, null_margins).sum(0) for key, value in patched.items()}
    trained = _along(trained_out, R, null_margins).sum(0)
    out = []
    for d in range(R.shape[0]):
        out.append({"dimension": pairs[0]["dimension"], "direction": d, "pairs": len(pairs),
                    "abs_margin": float(null_margins[:, d].abs().sum()), "margin": float(null_margins[:, d].sum()),
                    "embed": float(attr["embed"][d]), "bias": float(attr["bias"][d]),
                    "attribution": [float(attr[c][d]) for c in blocks + heads],
                    "mean": [float(effect[(c, "mean")][d]) for c in blocks + heads],
                    "resample": [float(effect[(c, "resample")][d]) for c in blocks],
                    "swap": [float(effect[(c, "swap")][d]) for c in blocks],
                    "trained_blocks": float(trained[d])})
    return out


def second(plan, stats, k: int) -> dict[str, list[dict]]:
    """Shard k's second-stage rows: its objective's nested sets patched together (module docstring)."""
    try:
        adapter, pairs, _rows, batch, run, margins, _folds, R, null_margins = _setup(plan, stats, k)
        order = plan.payload["orders"][pairs[0]["dimension"]]
        sets = patch_sets(adapter, batch, run, stats, [order[:j] for j in range(1, len(order) + 1)], "mean",
                          plan.config.max_rows, readout=True)
        for j, (value, _ro) in enumerate(sets, start=1):
            check_finite(value, f"pairs {pairs[0]['pair_id']}..{pairs[-1]['pair_id']}, first {j} blocks patched")
        curve = [{**{name: pair[name] for name in ("dimension", "pair_id", "seed_id")}, "margin": float(margins[p]),
                  "patched": [float(value[p]) for value, _ro in sets]} for p, pair in enumerate(pairs)]
        along = [_along(ro, R, null_margins).sum(0) for _value, ro in sets]            # each (K,)
        patched_sum = [((ro.double()[0::2] - ro.double()[1::2]) @ R.T).sum(0) for _value, ro in sets]
        null = [{"dimension": pairs[0]["dimension"], "direction": d, "pairs": len(pairs),
                 "curve": [float(a[d]) for a in along], "patched": [float(s[d]) for s in patched_sum]}
                for d in range(R.shape[0])]
        return fixed({"curve": curve, "null_curve": null}, PLACES)
    finally:
        plan.adapter.set_directions(None)


def orders(rows: dict[str, list[dict]]) -> dict:
    """The second stage's payload: per objective, its blocks by `mean` patch score (ratio of
    means over its pairs), largest first, ties in model order (`localize.order_by`)."""
    attribution = [r for r in rows["attribution"] if r["kind"] in ("attn", "mlp")]
    scores = localize.block_scores(attribution, rows["patching"])
    names = list(dict.fromkeys(r["component"] for r in rows["patching"]))
    return {"orders": {o: localize.order_by({c: v[1] for c, v in comps.items()}, names)
                       for o, comps in scores.items()}}


def reduce(kind: str, rows: list[dict]) -> list[dict]:
    """`heads`: per objective and head, the sums over its pairs; `null`, `null_curve`: per
    objective and direction, the sums over its shards (in shard order); other kinds as they are."""
    if kind == "heads":
        return _head_sums(rows)
    if kind not in SUMMED:
        return rows
    out: dict = {}
    for r in rows:
        key = (r["dimension"], r["direction"])
        if key not in out:
            out[key] = dict(r)
            continue
        acc = out[key]
        for name, value in r.items():
            if name in ("dimension", "direction"):
                continue
            acc[name] = [a + b for a, b in zip(acc[name], value)] if isinstance(value, list) else acc[name] + value
    return list(out.values())


def _head_sums(rows: list[dict]) -> list[dict]:
    """heads_summary.jsonl: per objective and head (model order), over the objective's pairs:
    how many, the summed attribution, |effect| and |clean margin|, scored and flagged effects."""
    out = []
    for objective in dict.fromkeys(r["dimension"] for r in rows):
        mine = [r for r in rows if r["dimension"] == objective]
        size = math.fsum(abs(r["margin"]) for r in mine)
        n_heads, per_layer = len(mine[0]["attribution"]), mine[0]["heads_per_layer"]
        for h in range(n_heads):
            z = [r["z"][h] for r in mine if r["z"][h] is not None]
            out.append({"dimension": objective, "component": f"head_L{h // per_layer}_H{h % per_layer}",
                        "layer": h // per_layer, "mode": HEAD_MODES[0], "pairs": len(mine),
                        "attribution_sum": math.fsum(r["attribution"][h] for r in mine),
                        "abs_effect_sum": math.fsum(abs(r["effect"][h]) for r in mine), "abs_margin_sum": size,
                        "offdist_scored": len(z), "offdist_flagged": sum(1 for v in z if v > offdist.THRESHOLD)})
    return out
