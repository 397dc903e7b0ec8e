"""The instruments, per preference pair: attribution, the reward lens, and activation patching.

A batch holds the pairs' sequences interleaved: row 2p is pair p's chosen response, row 2p+1 its
rejected one, so a row's swap partner is `row ^ 1`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from bundle_kit.contract import MODES, RESAMPLE

from measure.instruments import offdist

from measure.models.adapter import Adapter, Batch, count_layer_evals, parse_component
from measure.models.cache import ActivationCache, head_slice
from measure.models.families import pooled_mean
from measure.models.packed import Packing
from measure.errors import MeasureError

# Every mode `replacement` knows: the contract's three, `resample` (a study gives each sequence a
# source sequence from another pair) and `clean` (a self-check).
KNOWN_MODES = MODES + (RESAMPLE, "clean")


@dataclass
class ActivationStats:
    """Per-feature mean and standard deviation of each component's output over the clean data
    set, every real (non-padding) position, keyed by component: `attn_L{i}`, `mlp_L{i}` (d,),
    `head_L{i}_H{j}` (k,), a head's slice of its layer's o_proj input.
    `offdist`: each patched component's clean reference where the head reads it, the scoring token
    (an `offdist.Reference`) or a pooled read's three read points (`offdist.Reads`)
    (measure/instruments/offdist.py); `folds`: {seed_id: fold} of its cross-fit; both None when
    there are too few seeds."""
    mean: dict[str, torch.Tensor]
    std: dict[str, torch.Tensor]
    offdist: dict[str, offdist.Reference | offdist.Reads] | None = None
    folds: dict[str, int] | None = None


class StatsAccumulator:
    """Adds up clean runs batch by batch; `finish` turns them into `ActivationStats`. With
    `heads=False` the heads are left out (a study that patches no head saves their references)."""

    def __init__(self, heads: bool = True):
        self.heads = heads
        self.sums: dict[str, torch.Tensor] = {}
        self.squares: dict[str, torch.Tensor] = {}
        self.count = 0
        self.head_dim = 0
        self.read: dict[str, list[dict]] = {}  # name -> [{read point: (B, n)}], one dict a batch

    def add(self, adapter: Adapter, batch: Batch, run: ActivationCache) -> None:
        """Add one batch's clean run: its components' sums, squares and read-point values."""
        width = batch.ids.shape[1]
        real = (torch.arange(width, device=batch.ids.device)[None, :]
                < torch.tensor(batch.lengths, device=batch.ids.device)[:, None])
        self.count += int(real.sum())
        self.head_dim = adapter.head_dim
        for i in range(adapter.n_layers):
            parts = ((f"attn_L{i}", run.attn[i]), (f"mlp_L{i}", run.mlp[i]), (f"heads_L{i}", run.heads[i]))
            for name, tensor in parts[:3 if self.heads else 2]:
                values = tensor[real].double()
                self.sums[name] = self.sums.get(name, 0) + values.sum(0)
                self.squares[name] = self.squares.get(name, 0) + values.pow(2).sum(0)
                self.read.setdefault(name, []).append(
                    {k: v.float().cpu() for k, v in read_points(batch, tensor).items()})

    def finish(self, seeds: list[str] | None = None) -> ActivationStats:
        """The statistics, a layer's heads (accumulated side by side) split into one per head.
        `seeds`: the seed_id of every pair added, in order; with at least two distinct seeds
        each patched component also gets its cross-fitted off-distribution reference."""
        head_dim = self.head_dim
        mean = {k: v / self.count for k, v in self.sums.items()}
        std = {k: (self.squares[k] / self.count - mean[k].pow(2)).clamp_min(0).sqrt()
               for k in self.sums}
        mean, std = _per_head(mean, head_dim), _per_head(std, head_dim)
        points = list(next(iter(self.read.values()))[0]) if self.read else []
        by_point = {k: _per_head({name: torch.cat([b[k] for b in batches]) for name, batches in self.read.items()},
                                 head_dim) for k in points}
        read = {name: {k: by_point[k][name] for k in points} for name in (by_point[points[0]] if points else {})}
        if (not seeds or len(set(seeds)) < 2
                or not all(bool(torch.isfinite(t).all()) for v in read.values() for t in v.values())):
            return ActivationStats(mean, std)  # non-finite outputs are reported by the clean run's check
        folds = offdist.seed_folds(seeds, min(offdist.FOLDS, len(set(seeds))))
        effect_fold = torch.tensor([folds[s] for s in seeds])
        n_folds = len(set(folds.values()))
        refs = {}
        for name, values in read.items():
            owner = torch.arange(next(iter(values.values())).shape[0]) // 2
            refs[name] = (offdist.calibrate(values["token"], owner, effect_fold, n_folds) if points == ["token"]
                          else offdist.calibrate_reads(values, owner, effect_fold, n_folds))
        return ActivationStats(mean, std, refs, folds)


def _per_head(values: dict[str, torch.Tensor], head_dim: int) -> dict[str, torch.Tensor]:
    out = {}
    for name, tensor in values.items():
        if name.startswith("heads_L"):
            layer = name[len("heads_L"):]
            for j in range(tensor.shape[-1] // head_dim):
                out[f"head_L{layer}_H{j}"] = tensor[..., head_slice(j, head_dim)].clone()
        else:
            out[name] = tensor
    return out


# ----- patching -----------------------------------------------------------------------------
def read_points(batch: Batch, tensor: torch.Tensor) -> dict[str, torch.Tensor]:
    """Where the off-distribution score looks at `tensor` (B, T, p), one vector per sequence and
    point: the scoring token (`token`), or for a pooled read the pooled value and its first and
    last real tokens (`offdist.POOLED_POINTS`; why: measure/instruments/offdist.py)."""
    if batch.read == "pooled":
        rows = torch.arange(tensor.shape[0], device=tensor.device)
        values = (pooled_mean(tensor, batch.score_idx), tensor[:, 0], tensor[rows, batch.score_idx])
        return dict(zip(offdist.POOLED_POINTS, values))
    return {"token": offdist.read_at(tensor, batch.score_idx)[0]}


def replacement(batch: Batch, clean: torch.Tensor, mode: str, mean: torch.Tensor | None,
                sl: slice | None = None, source: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """The patched version of one output tensor (B, T, n); `sl` restricts the patch to a slice of
    the last dimension (a head's part of its layer's heads), and `mean` is the mean of that part.
    `source` (resample mode): the same output on each row's source sequence, (B, T', n), and
    those sequences' scoring positions (B,); row b takes the value of its own source."""
    sl = sl if sl is not None else slice(None)
    out = clean.clone()
    rows = torch.arange(clean.shape[0], device=clean.device)
    if mode == "zero":
        out[..., sl] = 0
    elif mode == "mean":
        out[..., sl] = mean.to(out.dtype)
    elif mode == "swap" and batch.read == "pooled":
        # on the pooled position: shift the output at every real position by the difference of
        # its pooled means, so its pooled value becomes the partner's (token variation kept)
        own = pooled_mean(clean[..., sl], batch.score_idx)
        out[..., sl] = _shifted(batch, clean[..., sl], own, own[rows ^ 1])
    elif mode == "swap":
        at = clean[rows, batch.score_idx]
        out[rows, batch.score_idx, sl] = at[rows ^ 1][:, sl]
    elif mode == RESAMPLE:
        if source is None:
            raise MeasureError("resample mode needs each sequence's source output (a study's resample sources)")
        values, where = source
        if batch.read == "pooled":  # as swap, with the source's pooled value in place of the partner's
            own = pooled_mean(clean[..., sl], batch.score_idx)
            out[..., sl] = _shifted(batch, clean[..., sl], own, pooled_mean(values[..., sl], where).to(clean.dtype))
        else:
            out[rows, batch.score_idx, sl] = values[rows, where][:, sl].to(clean.dtype)
    elif mode == "clean":  # patching with its own clean output; a self-check
        pass
    else:
        raise MeasureError(f"unknown patching mode {mode!r}; use one of {', '.join(KNOWN_MODES)}")
    return out


def _shifted(batch: Batch, part: torch.Tensor, own: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """`part` (B, T, n) shifted at every real position by `target - own` ((B, n) pooled values),
    so its pooled value becomes `target`."""
    width = part.shape[1]
    real = (torch.arange(width, device=part.device)[None, :] <= batch.score_idx[:, None]).to(part.dtype)
    return part + real.unsqueeze(-1) * (target - own).unsqueeze(1)


def _offdist(batch: Batch, patched: torch.Tensor, name: str, stats: ActivationStats | None,
             sl: slice | None, folds: torch.Tensor | None) -> torch.Tensor:
    """(P,) each pair's off-distribution score (measure/instruments/offdist.py): the patched value at the
    read points of both responses against the clean ones there, cross-fitted by the pair's
    fold (folds (P,)); above 1 is flagged. NaN when there is no reference."""
    if stats is None or stats.offdist is None or folds is None:
        return torch.full((batch.ids.shape[0] // 2,), float("nan"), dtype=torch.float64)
    sl = sl if sl is not None else slice(None)
    ref = stats.offdist[name]
    where = (ref.refs[0] if isinstance(ref, offdist.Reads) else ref).fits[0].mean.device
    points = {k: v.float().to(where) for k, v in read_points(batch, patched[..., sl]).items()}
    owner = torch.arange(batch.ids.shape[0], device=where) // 2
    if isinstance(ref, offdist.Reads):
        return offdist.score_reads(ref, points, owner, folds.to(where)).cpu()
    return offdist.score(ref, points["token"], owner, folds.to(where)).cpu()


def _margins(rewards: torch.Tensor) -> torch.Tensor:
    """(V, B) rewards -> (V, P) margins, chosen minus rejected."""
    return rewards[:, 0::2] - rewards[:, 1::2]


def patch_sweep(adapter: Adapter, batch: Batch, run: ActivationCache, stats: ActivationStats | None,
                components: list[str], modes=MODES, max_rows: int = 512,
                counter: dict | None = None, folds: torch.Tensor | None = None,
                source: ActivationCache | None = None, readout: bool = False
                ) -> dict[tuple[str, str], tuple[torch.Tensor, ...]]:
    """{(component, mode): (patched margins (P,), off-distribution score (P,))}; `folds` (P,)
    gives each pair's cross-fit fold (`stats.folds` of its seed), without it the score is NaN.
    `source`: the clean run of every row's source sequence (row b of it is row b's), for the
    `resample` mode. With `readout`, each value also holds the patched read-outs (B, d), the
    vectors the reward head reads (`Adapter.readout_at`), so the same passes can be read along
    other directions.

    Resumes every patched run from the cached input of the patched layer, and batches the
    variants that resume from the same point (all of one layer's attention-side patches, all of
    its MLP patches) into one pass, in chunks of at most `max_rows` sequences."""
    ctx = adapter.context(batch.ids.shape[1], batch.lengths)
    B = batch.ids.shape[0]
    groups: dict[tuple[int, str], list[tuple[str, str]]] = {}
    for name in components:
        kind, layer, _head = parse_component(name)
        if kind not in ("attn", "mlp", "head"):
            raise MeasureError(f"component {name!r} cannot be patched")
        side = "mlp" if kind == "mlp" else "attn"
        for mode in modes:
            groups.setdefault((layer, side), []).append((name, mode))
    results = {}
    with torch.no_grad():
        for (layer, side), variants in sorted(groups.items()):
            per_chunk = max(1, max_rows // B)
            for start in range(0, len(variants), per_chunk):
                chunk = variants[start:start + per_chunk]
                resids, offs = [], []
                for name, mode in chunk:
                    resid, off = _patched_stream(adapter, batch, run, stats, name, mode, folds, source)
                    resids.append(resid)
                    offs.append(off)
                final = adapter.continue_from(torch.cat(resids), layer, side, ctx, counter)
                rewards = adapter.reward_at(final, batch.score_idx.repeat(len(chunk)))
                margins = _margins(rewards.reshape(len(chunk), B))
                outs = (adapter.readout_at(final, batch.score_idx.repeat(len(chunk))).reshape(len(chunk), B, -1)
                        if readout else None)
                for k, (name, mode) in enumerate(chunk):
                    results[(name, mode)] = (margins[k], offs[k]) + ((outs[k],) if readout else ())
    return results


def patch_sets(adapter: Adapter, batch: Batch, run: ActivationCache, stats: ActivationStats | None,
               sets: list[list[str]], mode: str = "mean", max_rows: int = 512,
               source: ActivationCache | None = None, readout: bool = False,
               counter: dict | None = None) -> list[tuple[torch.Tensor, ...]]:
    """Each set of components patched together, every member at once in `mode`: one (patched
    margins (P,),) per set, in order, with the read-outs (B, d) as a second value when `readout`.

    A set's pass starts from the cached stream entering its lowest member's sublayer and runs the
    model up from there, each member's output replaced where it is computed (a head within its
    layer's heads; a block's patch holds over its heads'). Sets that start at the same sublayer
    go through as one batch, in chunks of at most `max_rows` sequences. `swap` is refused: in a
    joint patch a member's partner value would itself be patched upstream, so the mode would
    mean something else than for one component."""
    if mode == "swap":
        raise MeasureError("patch_sets: swap mode is not defined for components patched together")
    family, L, B = adapter.family, adapter.n_layers, batch.ids.shape[0]
    ctx = adapter.context(batch.ids.shape[1], batch.lengths)
    starts: dict[tuple[int, int], list[int]] = {}
    members = []
    for s, names in enumerate(sets):
        parsed = [parse_component(c) for c in names]
        if not parsed or any(kind not in ("attn", "mlp", "head") for kind, _i, _h in parsed):
            raise MeasureError(f"set {names!r}: every member must be an attn or mlp block or a head")
        members.append(set(names))
        starts.setdefault(min((i, 1 if kind == "mlp" else 0) for kind, i, _h in parsed), []).append(s)
    results: list = [None] * len(sets)
    per_chunk = max(1, max_rows // B)
    with torch.no_grad():
        for (first, side), indices in sorted(starts.items()):
            for at in range(0, len(indices), per_chunk):
                chunk = indices[at:at + per_chunk]
                final = _joint_pass(adapter, batch, run, stats, [members[s] for s in chunk], mode,
                                    first, side, ctx, source, counter)
                where = batch.score_idx.repeat(len(chunk))
                margins = _margins(adapter.reward_at(final, where).reshape(len(chunk), B))
                outs = adapter.readout_at(final, where).reshape(len(chunk), B, -1) if readout else None
                for k, s in enumerate(chunk):
                    results[s] = (margins[k],) + ((outs[k],) if readout else ())
    return results


def _joint_pass(adapter, batch, run, stats, chunk: list[set], mode, first: int, side: int, ctx, source, counter):
    """The final stream (V * B, T, d) of V sets patched together, from the sublayer (`first`,
    `side`: 0 attention, 1 MLP) where each of them starts."""
    family, B = adapter.family, batch.ids.shape[0]
    V = len(chunk)
    tile = lambda t: t.repeat(V, *([1] * (t.dim() - 1)))  # noqa: E731  (variant-major, as the sweep stacks)

    def patched(part, name, sl, src):
        return replacement(batch, part, mode, stats.mean[name] if stats else None, sl, src)

    stream = tile(run.resid_pre[first] if side == 0 else run.resid_mid[first])
    for i in range(first, adapter.n_layers):
        if not (i == first and side == 1):
            attn, heads = (tile(run.attn[i]), tile(run.heads[i])) if i == first else family.attn(i, stream, ctx)
            parts = []
            for v, names in enumerate(chunk):
                a, z = attn[v * B:(v + 1) * B], heads[v * B:(v + 1) * B]
                mine = [n for n in names if n.startswith(f"head_L{i}_H")]
                for name in mine:
                    sl = head_slice(parse_component(name)[2], adapter.head_dim)
                    z = patched(z, name, sl, (source.heads[i], source.batch.score_idx) if source else None)
                if mine:
                    a = family.attn_from_heads(i, z)
                if f"attn_L{i}" in names:
                    a = patched(a, f"attn_L{i}", None, (source.attn[i], source.batch.score_idx) if source else None)
                parts.append(a)
            stream = family.join(i, "attn", stream, torch.cat(parts))
            count_layer_evals(counter, stream.shape[0], 0.5)
        out = tile(run.mlp[i]) if (i == first and side == 1) else family.mlp(i, stream)
        parts = []
        for v, names in enumerate(chunk):
            m = out[v * B:(v + 1) * B]
            if f"mlp_L{i}" in names:
                m = patched(m, f"mlp_L{i}", None, (source.mlp[i], source.batch.score_idx) if source else None)
            parts.append(m)
        stream = family.join(i, "mlp", stream, torch.cat(parts))
        count_layer_evals(counter, stream.shape[0], 0.5)
    return stream


def patch_ladder(adapter: Adapter, batch: Batch, run: ActivationCache | None, stats: ActivationStats | None,
                 components: list[str], modes=MODES, max_rows: int = 512,
                 counter: dict | None = None, folds: torch.Tensor | None = None, buckets: int = 4
                 ) -> dict[tuple[str, str], tuple[torch.Tensor, torch.Tensor]]:
    """`patch_sweep`'s results (equal to float rounding, not bit for bit) from fewer, larger passes.

    Opt-in: the committed studies use `patch_sweep`, whose bytes this would change. Three changes:
    - one pass up the layers for variants of every patch point (a ladder): at layer i the pass
      holds every variant patched below i, and the variants patched at layer i join it there, so
      a study makes L layer calls per chunk instead of about L^2/2 (same layer evaluations);
    - the pass holds its sequences packed end to end, real tokens only (`models/packed.py`), so
      each projection and MLP of a layer is one matrix product over every variant's and every
      sequence's tokens, and no padding is computed; only the attention scores are laid out per
      sequence, the sequences cut into `buckets` groups of similar length, each padded to its
      own longest;
    - the last layer runs on the scoring tokens alone (the one position read after it), its
      attention's keys and values excepted.
    `run` None: the ladder makes the clean run itself, packed the same way (`_Ladder.clean_run`).
    A pass holds at most `max_rows` sequences (variants times the batch's rows)."""
    family = adapter.family
    if getattr(family, "residual", None) != "pre-norm":  # packing needs causal attention
        raise MeasureError(f"{adapter.model_id}: the ladder sweep is for causal decoders; use patch_sweep")
    ctx = adapter.context(batch.ids.shape[1], batch.lengths)
    B = batch.ids.shape[0]
    variants = []
    for name in components:
        kind, layer, _head = parse_component(name)
        if kind not in ("attn", "mlp", "head"):
            raise MeasureError(f"component {name!r} cannot be patched")
        variants.extend((layer, 1 if kind == "mlp" else 0, name, mode) for mode in modes)
    variants.sort(key=lambda v: v[:2])  # by resume point; stable, so model order within one
    rewards = torch.empty(len(variants), B, dtype=torch.float32, device=batch.ids.device)
    offs = {}
    with torch.no_grad():
        ladder = _Ladder(family, batch, ctx, adapter.n_layers, counter, buckets)
        run = run if run is not None else ladder.clean_run(adapter, batch)
        streams = {}
        for layer, side, name, mode in variants:
            streams[(name, mode)], offs[(name, mode)] = _patched_stream(adapter, batch, run, stats, name, mode, folds)
        per_chunk = max(1, max_rows // B)
        for start in range(0, len(variants), per_chunk):
            chunk = variants[start:start + per_chunk]
            rewards[start:start + len(chunk)] = adapter.reward_of(ladder.climb(chunk, streams)).reshape(len(chunk), B)
    margins = _margins(rewards)
    return {(v[2], v[3]): (margins[k], offs[(v[2], v[3])]) for k, v in enumerate(variants)}


class _Ladder:
    """One pass up the layers for a chunk of variants, their sequences packed (`Packing`)."""

    def __init__(self, family, batch: Batch, ctx, n_layers: int, counter: dict | None, buckets: int):
        self.family, self.ctx, self.n_layers, self.counter = family, ctx, n_layers, counter
        self.B = batch.ids.shape[0]
        self.packing = Packing.of(batch.lengths, buckets, batch.ids.device)
        device, width = batch.ids.device, batch.ids.shape[1]
        self.width = width
        lengths = torch.tensor(batch.lengths, device=device)
        positions = torch.arange(width, device=device)
        # the real tokens, and the scoring tokens, in the batch's flattened (B * width) layout
        self.real = (positions[None, :] < lengths[:, None]).flatten().nonzero().squeeze(1)
        self.score_flat = torch.arange(self.B, device=device) * width + batch.score_idx
        self.score_packed = torch.cumsum(lengths, 0) - lengths + batch.score_idx  # (B,) the same, packed
        self.tokens = int(self.packing.positions.shape[0])
        self.score_is_last = bool((batch.score_idx == lengths - 1).all())  # true of causal decoders
        self.tiles: dict[int, Packing] = {}

    def clean_run(self, adapter: Adapter, batch: Batch) -> ActivationCache:
        """The clean run made packed (no padding computed), laid out as `Adapter.clean_run`
        lays it out, with zeros at the padding (which the ladder never reads)."""
        family, packing, ctx = self.family, self.packing, self.ctx
        x = family.embed(batch.ids).flatten(0, 1)[self.real]
        run = ActivationCache(adapter, batch, embed=self._unpack(x))
        for i in range(self.n_layers):
            run.resid_pre.append(self._unpack(x))
            attn, heads = family.attn_packed(i, x, packing, ctx)
            x = family.join(i, "attn", x, attn)
            self._count(1, x.shape[0])
            mlp = family.mlp(i, x)
            run.attn.append(self._unpack(attn))
            run.heads.append(self._unpack(heads))
            run.resid_mid.append(self._unpack(x))
            x = family.join(i, "mlp", x, mlp)
            run.mlp.append(self._unpack(mlp))
            run.resid_post.append(self._unpack(x))
            self._count(1, x.shape[0])
        run.reward = adapter.reward_of(x[self.score_packed])
        return run

    def _unpack(self, x: torch.Tensor) -> torch.Tensor:
        """(tokens, n) packed -> (B, T, n) in the batch's layout, zeros at the padding."""
        out = x.new_zeros(self.B * self.width, x.shape[-1])
        return out.index_copy_(0, self.real, x).reshape(self.B, self.width, -1)

    def _tiled(self, copies: int) -> Packing:
        if copies not in self.tiles:
            self.tiles[copies] = self.packing.tile(copies)
        return self.tiles[copies]

    def _at_score(self, copies: int) -> torch.Tensor:
        k = torch.arange(copies, device=self.score_packed.device)
        return (self.score_packed[None] + k[:, None] * self.tokens).flatten()

    def climb(self, chunk, streams) -> torch.Tensor:
        """(variants * B, d) the final stream at each row's scoring token, in the chunk's order:
        from the chunk's lowest patch point up, each variant's tokens joining the pass right
        after its patched sublayer. Only the scoring token is read after the last layer, so its
        MLP runs on those tokens alone, and so does its attention (queries and output; keys and
        values at every token) when the scoring token is each sequence's last."""
        family, last = self.family, self.n_layers - 1
        x, copies, scored = None, 0, False  # x: (copies * tokens, d), or (copies * B, d) once scored
        for i in range(chunk[0][0], self.n_layers):
            for side in (0, 1):
                narrow = i == last and (side == 1 or self.score_is_last)  # the scoring tokens are enough
                if x is not None and side == 0:
                    packing, tokens = self._tiled(copies), x.shape[0]
                    out = family.attn_packed(i, x, packing, self.ctx, last_only=narrow)[0]
                    x = family.join(i, "attn", x[packing.ends] if narrow else x, out)
                    self._count(copies, tokens)
                elif x is not None:
                    x = x[self._at_score(copies)] if narrow and not scored else x
                    x = family.join(i, "mlp", x, family.mlp(i, x))
                    self._count(copies, x.shape[0])
                scored = narrow
                joining = [v for v in chunk if v[0] == i and v[1] == side]
                if joining:
                    where = self.score_flat if narrow else self.real
                    parts = [streams[(v[2], v[3])].flatten(0, 1)[where] for v in joining]
                    x = torch.cat(([x] if x is not None else []) + parts)
                    copies += len(joining)
        return x

    def _count(self, copies: int, tokens: int) -> None:
        """Half a layer (one sublayer) of `copies * B` sequences, `tokens` token positions."""
        count_layer_evals(self.counter, copies * self.B, 0.5)
        if self.counter is not None:  # token-layers: one token through one layer
            self.counter["token_layers"] = self.counter.get("token_layers", 0) + tokens * 0.5


def _patched_stream(adapter, batch, run, stats, name, mode, folds=None, source=None):
    """The residual stream right after the patched sublayer, and the off-distribution score.
    `source`: the clean run of each row's source sequence (resample mode)."""
    kind, i, head = parse_component(name)
    if kind == "mlp":
        mean = stats.mean[name] if stats else None
        src = (source.mlp[i], source.batch.score_idx) if source is not None else None
        patched = replacement(batch, run.mlp[i], mode, mean, None, src)
        off = _offdist(batch, patched, name, stats, None, folds)
        return adapter.family.join(i, "mlp", run.resid_mid[i], patched), off
    if kind == "attn":
        mean = stats.mean[name] if stats else None
        src = (source.attn[i], source.batch.score_idx) if source is not None else None
        patched = replacement(batch, run.attn[i], mode, mean, None, src)
        off = _offdist(batch, patched, name, stats, None, folds)
        return adapter.family.join(i, "attn", run.resid_pre[i], patched), off
    sl = head_slice(head, adapter.head_dim)
    mean = stats.mean[name] if stats else None
    src = (source.heads[i], source.batch.score_idx) if source is not None else None
    heads = replacement(batch, run.heads[i], mode, mean, sl, src)
    off = _offdist(batch, heads, name, stats, sl, folds)
    return adapter.family.join(i, "attn", run.resid_pre[i], adapter.family.attn_from_heads(i, heads)), off


# ----- the naive reference: one full forward pass per patched variant, via hooks ----------
def naive_patch(adapter: Adapter, batch: Batch, replacements: dict[str, torch.Tensor],
                counter: dict | None = None) -> torch.Tensor:
    """Rewards (B,) from the Hugging Face model's own full forward pass, with each named
    component's output replaced (every position) by the given tensor via hooks."""
    handles = []
    for name, value in replacements.items():
        kind, i, head = parse_component(name)
        points = adapter.family.hook_points(i) if kind in ("attn", "mlp", "head") else None
        if kind == "head":
            sl = head_slice(head, adapter.head_dim)

            def pre(module, args, value=value, sl=sl):
                heads = args[0].clone()
                heads[..., sl] = value[..., sl]
                return (heads,) + tuple(args[1:])
            handles.append(points.heads.register_forward_pre_hook(pre))
        else:
            if points is None:
                raise MeasureError(f"component {name!r} cannot be patched")
            module = points.attn if kind == "attn" else points.mlp

            def hook(module, args, output, value=value):
                if isinstance(output, tuple):
                    return (value,) + tuple(output[1:])
                return value
            handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            hidden = adapter.base(input_ids=batch.ids, attention_mask=_real_mask(batch)).last_hidden_state
    finally:
        for handle in handles:
            handle.remove()
    count_layer_evals(counter, batch.ids.shape[0], adapter.n_layers)
    # the base model's output is already through its final norm: read it, then each row's direction
    dirs, bias = adapter.directions(batch.ids.shape[0])
    return (adapter.family.read_out(hidden, batch.score_idx).float() * dirs).sum(-1) + bias


def _real_mask(batch: Batch) -> torch.Tensor:
    """(B, T) 1 at real tokens, 0 at padding (the model's own forward pass masks padding with it)."""
    width = batch.ids.shape[1]
    return (torch.arange(width, device=batch.ids.device)[None, :]
            < torch.tensor(batch.lengths, device=batch.ids.device)[:, None]).long()


def naive_sweep(adapter: Adapter, batch: Batch, stats: ActivationStats | None,
                components: list[str], modes=MODES, counter: dict | None = None):
    """The plain loop the sweep replaces: per pair, per component, per mode, a full forward pass
    of the pair's two responses. Returns {(component, mode): patched margins (P,)}."""
    n_pairs = batch.ids.shape[0] // 2
    clean_outputs = _naive_clean_outputs(adapter, batch, counter)
    row_dirs = adapter._row_dirs  # per-row directions: each pair's own two rows
    results = {}
    try:
        _naive_loop(adapter, batch, stats, components, modes, counter, clean_outputs, row_dirs, results)
    finally:
        adapter._row_dirs = row_dirs
    return results


def _naive_loop(adapter, batch, stats, components, modes, counter, clean_outputs, row_dirs, results):
    n_pairs = batch.ids.shape[0] // 2
    for name in components:
        kind, i, head = parse_component(name)
        key = f"heads_L{i}" if kind == "head" else name
        sl = head_slice(head, adapter.head_dim) if kind == "head" else None
        for mode in modes:
            margins = []
            for p in range(n_pairs):
                sub = Batch(batch.ids[2 * p:2 * p + 2], batch.score_idx[2 * p:2 * p + 2],
                            batch.lengths[2 * p:2 * p + 2], batch.read)
                clean = clean_outputs[key][2 * p:2 * p + 2]
                if row_dirs is not None:
                    adapter._row_dirs = (row_dirs[0][2 * p:2 * p + 2], row_dirs[1][2 * p:2 * p + 2])
                mean = stats.mean[name] if stats else None
                value = replacement(sub, clean, mode, mean, sl)
                rewards = naive_patch(adapter, sub, {name: value}, counter)
                margins.append(rewards[0] - rewards[1])
            results[(name, mode)] = torch.stack(margins)


def _naive_clean_outputs(adapter: Adapter, batch: Batch, counter) -> dict[str, torch.Tensor]:
    """Every component's clean output, read by hooks during one full forward pass."""
    store, handles = {}, []
    for i in range(adapter.n_layers):
        points = adapter.family.hook_points(i)

        def keep(name):
            def hook(module, args, output):
                store[name] = output[0] if isinstance(output, tuple) else output
            return hook

        def keep_in(name):
            def pre(module, args):
                store[name] = args[0]
            return pre
        handles.append(points.attn.register_forward_hook(keep(f"attn_L{i}")))
        handles.append(points.mlp.register_forward_hook(keep(f"mlp_L{i}")))
        handles.append(points.heads.register_forward_pre_hook(keep_in(f"heads_L{i}")))
    try:
        with torch.no_grad():
            adapter.base(input_ids=batch.ids, attention_mask=_real_mask(batch))
    finally:
        for handle in handles:
            handle.remove()
    count_layer_evals(counter, batch.ids.shape[0], adapter.n_layers)
    return store


def check_finite(values: torch.Tensor, what: str) -> None:
    """Stop the run (MeasureError naming `what`) if any value is NaN or infinite."""
    if not torch.isfinite(values).all():
        raise MeasureError(f"{what}: the model produced NaN or infinite values "
                           f"(try --dtype float32, or check the weights)")

