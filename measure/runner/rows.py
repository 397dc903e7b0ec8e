"""Per-pair rows of one shard: attribution, patching and lens, rounded as they will be written."""
from __future__ import annotations

import math

import torch

from bundle_kit import contract

from measure.instruments import offdist
from measure.models.adapter import Adapter, parse_component
from measure.errors import MeasureError
from measure.instruments.patching import ActivationStats, check_finite, patch_sweep
from measure.runner.jsonio import fixed
from measure.runner.reads import Read, files

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
               max_rows: int, reads: list[Read], rows: torch.Tensor,
               plan_seqs: list | None = None) -> dict[str, list[dict]]:
    """All rows of these pairs along every read (`seqs` interleaves chosen/rejected token ids;
    `rows` is each sequence's pair index in the plan, which picks its direction of each read;
    `plan_seqs`, every plan pair's (chosen, rejected) ids, gives a read's resample sources)."""
    batch = adapter.batch(seqs)
    out = {kind: [] for kind in files(reads)}
    for read in reads:
        read.set_on(adapter, rows)
        try:
            source = source_run(adapter, read, rows, plan_seqs)
            _read_rows(adapter, pairs, batch, stats, max_rows, read, out, source)
        finally:
            adapter.set_directions(None)
    return {k: fixed(v, PLACES) for k, v in out.items()}


def source_run(adapter: Adapter, read: Read, rows: torch.Tensor, plan_seqs: list | None):
    """The clean run of the resample source of every sequence of the batch (row b: the source of
    row b), or None when the read has no sources."""
    if read.sources is None:
        return None
    if plan_seqs is None:
        raise MeasureError("a read with resample sources needs the plan's sequences")
    side = torch.arange(rows.shape[0]) % 2
    picks = read.sources[rows, side].tolist()
    return adapter.clean_run(adapter.batch([plan_seqs[s // 2][s % 2] for s in picks]))


def _read_rows(adapter, pairs, batch, stats, max_rows, read: Read, out: dict, source=None) -> None:
    """Append the rows of one read of the batch to `out`."""
    run = adapter.clean_run(batch)
    check_finite(run.reward, f"clean rewards of pairs {pairs[0]['pair_id']}..{pairs[-1]['pair_id']}")
    rewards = run.reward.double()
    margins = rewards[0::2] - rewards[1::2]
    attr = {k: v.double() for k, v in run.attribution().items()}
    running = run.lens().double() if read.lens else None
    components = [c for c in adapter.components(heads=read.heads and read.patch_heads) if c != "embed"]
    folds = (torch.tensor([stats.folds[p["seed_id"]] for p in pairs])
             if stats is not None and stats.folds else None)
    if read.modes_of_heads == read.modes:  # one sweep: a layer's attention-side variants in one batch
        patched = patch_sweep(adapter, batch, run, stats, components, read.modes, max_rows, folds=folds, source=source)
    else:
        heads = [c for c in components if c.startswith("head_")]
        patched = patch_sweep(adapter, batch, run, stats, [c for c in components if c not in heads], read.modes,
                              max_rows, folds=folds, source=source)
        patched.update(patch_sweep(adapter, batch, run, stats, heads, read.modes_of_heads, max_rows, folds=folds,
                                   source=source))
    fields = {kind: _fields(row, read.name) for kind, row in
              (("attribution", contract.ATTRIBUTION_ROW), ("patching", contract.PATCHING_ROW),
               ("lens", contract.LENS_ROW))}
    along = f", along {read.name}" if read.name else ""
    for p, pair in enumerate(pairs):
        head = {"model": adapter.model_id, **{name: pair[name] for name in contract.ROW_HEAD[1:]}}
        if read.name is not None:
            head["direction"] = read.name
        margin = float(margins[p])
        for name in adapter.components(heads=read.heads) + ["bias"]:
            kind, layer, _ = parse_component(name)
            chosen, rejected = float(attr[name][2 * p]), float(attr[name][2 * p + 1])
            row = _row(fields["attribution"], head, component=name, kind=kind, layer=layer,
                       attribution=chosen - rejected, attr_chosen=chosen, attr_rejected=rejected,
                       margin=margin)
            out[read.prefix + ("attribution_heads" if kind == "head" else "attribution")].append(row)
        for name in components:
            kind, layer, _ = parse_component(name)
            for mode in (read.modes_of_heads if kind == "head" else read.modes):
                value, off = patched[(name, mode)]
                patched_margin = float(value[p])
                check_finite(value[p:p + 1], f"pair {pair['pair_id']}, {name} patched ({mode}{along})")
                effect = patched_margin - margin
                z = None if math.isnan(float(off[p])) else round(float(off[p]), PLACES)
                row = _row(fields["patching"], head, component=name, kind=kind, layer=layer, mode=mode,
                           clean_margin=margin, patched_margin=patched_margin, effect=effect,
                           moves_pct=_moves(effect, margin), offdist_z=z,
                           offdist_flag=None if z is None else z > offdist.THRESHOLD)
                out[read.prefix + ("patching_heads" if kind == "head" else "patching")].append(row)
        if read.lens:
            for i in range(adapter.n_layers):
                out[read.prefix + "lens"].append(_row(
                    fields["lens"], head, layer=i, depth=(i + 1) / adapter.n_layers,
                    running_margin=float(running[i, 2 * p] - running[i, 2 * p + 1])))


def _fields(row: tuple[str, ...], direction: str | None) -> tuple[str, ...]:
    """A contract row's fields, with `direction` after `seed_id` for a named read."""
    if direction is None:
        return row
    at = row.index("seed_id") + 1
    return row[:at] + ("direction",) + row[at:]


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

