"""Off-distribution scores for patched activations: pure functions on tensors.

A patched activation is compared with the clean activations of the same component *at the
position where it is read* (for a decoder reward model, the scoring token; an encoder that pools
positions passes its own read mask). The statistic is the Mahalanobis distance under a
Ledoit-Wolf shrinkage covariance, fitted per component. Fits are cross-fitted over seed folds:
the clean activations of a fold are scored against a fit on the other folds only, and so is any
patched activation of a pair in that fold, so a score never comes from a distribution that
contains the pair (or its seed's mutations) itself.

One effect reads several activations (a pair's two responses; an encoder's pooled positions).
Its score is the largest distance among them. The flag threshold is calibrated on clean effects:
the conformal quantile at level `q` of their held-out scores, so a new clean effect exchangeable
with those is flagged with probability at most `1 - q`. The reported score is the distance
divided by that threshold: above 1 is flagged.

**Pooled reads** (an encoder whose head reads the mean over positions) are scored at three read
points of every response, each against the clean values at the same point (`Reads`): the pooled
value itself, the first token ([CLS]) and the last real token ([SEP]). The pooled value alone
cannot see a mean patch: the mean over positions of a block's mean output *is* the data mean, so
its distance is zero by construction, however far that vector is from what the block writes at
the special tokens. An effect's statistic is the largest, over the read points and the two
responses, of each distance divided by its read point's own calibrated threshold; that statistic
is calibrated again on the clean effects (`calibrate_reads`), so the flag keeps its level. Only
those two tokens are scored besides the pooled value: a mean patch writes the data mean at the
interior tokens too, which sits at the centre of their clean values, so scoring them adds memory
(every position of every clean response) and no power against mean patches.

Shapes: N read activations, E effects, p features, r = min(n_fit, p).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

FOLDS = 5
QUANTILE = 0.99
THRESHOLD = 1.0  # on the reported score (distance / calibrated threshold): above it is flagged
VERSION = "mahalanobis-ledoit-wolf-crossfit-2"  # in a run's fingerprint (changed scores never resume); 2: pooled reads at three points


@dataclass(frozen=True)
class Fit:
    """A Ledoit-Wolf covariance in its eigenbasis: `basis` rows are the sample covariance's
    eigenvectors, `inv_var` the inverse shrunk variances along them, `inv_rest` the inverse
    shrunk variance of every direction orthogonal to them (the shrinkage target's share)."""
    mean: torch.Tensor       # (p,)
    basis: torch.Tensor      # (r, p)
    inv_var: torch.Tensor    # (r,)
    inv_rest: float
    shrinkage: float         # delta in [0, 1]: (1 - delta) * S + delta * (tr S / p) * I


@dataclass(frozen=True)
class Reference:
    """One component's clean distribution: a fit per fold (fit k excludes fold k) and the raw
    distance threshold calibrated on held-out clean effects."""
    fits: tuple[Fit, ...]
    threshold: float
    quantile: float
    n_calibration: int       # clean effects the threshold was calibrated on


def seed_folds(seed_ids: list[str], folds: int = FOLDS) -> dict[str, int]:
    """{seed_id: fold}: sorted distinct seeds dealt round-robin into `folds` folds."""
    return {s: k % folds for k, s in enumerate(sorted(set(seed_ids)))}


def ledoit_wolf(x: torch.Tensor) -> Fit:
    """Fit on samples x (n, p), n >= 2. The shrinkage intensity is Ledoit and Wolf's (2004)
    estimate towards a scaled identity, computed through the n x n Gram matrix so a wide
    activation (p >> n) never needs a p x p matrix."""
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"ledoit_wolf needs samples (n >= 2, p), got shape {tuple(x.shape)}")
    x = x.double()
    n, p = x.shape
    mean = x.mean(0)
    xc = x - mean
    gram = xc @ xc.T                                      # (n, n)
    trace = float(gram.diagonal().sum()) / n              # tr S, S = xc^T xc / n
    mu = trace / p
    s_frob2 = float(gram.pow(2).sum()) / n ** 2           # ||S||_F^2
    d2 = s_frob2 - p * mu ** 2                            # ||S - mu I||_F^2
    b2_bar = (float(gram.diagonal().pow(2).sum()) - float(gram.pow(2).sum()) / n) / n ** 2
    delta = 1.0 if d2 <= 0 else min(max(b2_bar, 0.0), d2) / d2
    _u, sing, vh = torch.linalg.svd(xc / math.sqrt(n), full_matrices=False)
    floor = max(mu, 1e-30) * 1e-12                        # a constant feature must not divide by 0
    var = ((1 - delta) * sing.pow(2) + delta * mu).clamp_min(floor)
    rest = max(delta * mu, floor)
    return Fit(mean, vh, 1.0 / var, 1.0 / rest, delta)


def distance(fit: Fit, v: torch.Tensor) -> torch.Tensor:
    """(m,) Mahalanobis distances of v (m, p) under the fit."""
    diff = v.double() - fit.mean
    along = diff @ fit.basis.T                            # (m, r)
    rest = (diff.pow(2).sum(-1) - along.pow(2).sum(-1)).clamp_min(0)
    return (along.pow(2) @ fit.inv_var + rest * fit.inv_rest).sqrt()


def read_at(tensor: torch.Tensor, where: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The activations of tensor (B, T, p) at the read positions, and the sequence each came
    from: `where` is (B,) long (one position per sequence: a decoder's scoring token) or (B, T)
    bool (an encoder's pooled positions). Returns values (N, p) and rows (N,) long."""
    if where.dtype == torch.bool:
        rows, cols = where.nonzero(as_tuple=True)
    else:
        rows = torch.arange(tensor.shape[0], device=tensor.device)
        cols = where.to(tensor.device)
    return tensor[rows, cols], rows


def effect_max(scores: torch.Tensor, owner: torch.Tensor, n_effects: int) -> torch.Tensor:
    """(E,) the largest score (N,) of each effect; owner (N,) long gives each score's effect."""
    out = torch.full((n_effects,), -math.inf, dtype=scores.dtype, device=scores.device)
    return out.scatter_reduce(0, owner.to(scores.device), scores, reduce="amax")


def fold_distances(fits: tuple[Fit, ...], v: torch.Tensor, owner: torch.Tensor,
                   effect_fold: torch.Tensor) -> torch.Tensor:
    """(N,) the distance of each activation v (N, p) under the fit that excludes its effect's
    fold; effect_fold (E,) long."""
    fold = effect_fold.to(owner.device)[owner]
    out = torch.empty(v.shape[0], dtype=torch.float64, device=v.device)
    for k, fit in enumerate(fits):
        sel = fold == k
        if bool(sel.any()):
            out[sel] = distance(fit, v[sel])
    return out


def conformal_quantile(scores: torch.Tensor, q: float = QUANTILE) -> float:
    """The ceil(q (n + 1))-th smallest of n scores (the largest if n + 1 < 1 / (1 - q))."""
    ordered = scores.double().sort().values
    n = ordered.shape[0]
    rank = min(math.ceil(q * (n + 1)), n)
    return float(ordered[rank - 1])


def calibrate(clean: torch.Tensor, owner: torch.Tensor, effect_fold: torch.Tensor,
              folds: int = FOLDS, q: float = QUANTILE) -> Reference:
    """Fit one component's reference on its clean read activations clean (N, p), owned by
    effects (owner (N,)) whose folds are effect_fold (E,), and calibrate its threshold on the
    held-out clean effects. Every fold must leave at least two samples to fit on."""
    clean = clean.double()
    fold = effect_fold.to(owner.device)[owner]
    fits = []
    for k in range(folds):
        keep = fold != k
        if int(keep.sum()) < 2:
            raise ValueError(f"fold {k}: fewer than 2 clean activations outside it to fit on")
        fits.append(ledoit_wolf(clean[keep]))
    fits = tuple(fits)
    held_out = effect_max(fold_distances(fits, clean, owner, effect_fold), owner, effect_fold.shape[0])
    return Reference(fits, conformal_quantile(held_out, q), q, int(effect_fold.shape[0]))


def score(ref: Reference, patched: torch.Tensor, owner: torch.Tensor,
          effect_fold: torch.Tensor) -> torch.Tensor:
    """(E,) each effect's off-distribution score: the largest held-out distance of its patched
    read activations (N, p) divided by the calibrated threshold. Above 1 is flagged."""
    d = fold_distances(ref.fits, patched, owner, effect_fold)
    return effect_max(d, owner, effect_fold.shape[0]) / ref.threshold


def flagged(scores: torch.Tensor) -> torch.Tensor:
    """(E,) bool: beyond the clean threshold."""
    return scores > THRESHOLD


# ----- several read points (a pooled read) ------------------------------------------------------
POOLED_POINTS = ("pooled", "first", "last")


@dataclass(frozen=True)
class Reads:
    """One component's references at several read points: `refs[k]` is point `points[k]`'s
    Reference (its threshold scales that point's distances), `threshold` the calibrated bar on
    the largest scaled distance of a clean effect."""
    points: tuple[str, ...]
    refs: tuple[Reference, ...]
    threshold: float
    quantile: float
    n_calibration: int


def _scaled(refs: tuple[Reference, ...], values: tuple[torch.Tensor, ...], owner: torch.Tensor,
            effect_fold: torch.Tensor) -> torch.Tensor:
    """(E,) the largest held-out distance over every read point, each over its point's threshold."""
    n_effects = effect_fold.shape[0]
    per_point = [effect_max(fold_distances(ref.fits, v, owner, effect_fold), owner, n_effects) / ref.threshold
                 for ref, v in zip(refs, values)]
    return torch.stack(per_point).amax(0)


def calibrate_reads(clean: dict[str, torch.Tensor], owner: torch.Tensor, effect_fold: torch.Tensor,
                    folds: int = FOLDS, q: float = QUANTILE) -> Reads:
    """References at each read point of `clean` ({point: (N, p)}, rows owned alike), and the
    conformal quantile of the clean effects' largest scaled distance."""
    points = tuple(clean)
    refs = tuple(calibrate(clean[k], owner, effect_fold, folds, q) for k in points)
    held_out = _scaled(refs, tuple(clean[k].double() for k in points), owner, effect_fold)
    return Reads(points, refs, conformal_quantile(held_out, q), q, int(effect_fold.shape[0]))


def score_reads(reads: Reads, patched: dict[str, torch.Tensor], owner: torch.Tensor,
                effect_fold: torch.Tensor) -> torch.Tensor:
    """(E,) each effect's score at several read points, over the calibrated bar: above 1 is flagged."""
    return _scaled(reads.refs, tuple(patched[k] for k in reads.points), owner, effect_fold) / reads.threshold


# ----- the study's summary ------------------------------------------------------------------
STATISTIC = {
    "token": "Mahalanobis distance at the scoring token, Ledoit-Wolf covariance per component, "
             "cross-fitted over seed folds; offdist_z = the larger of the two responses' "
             "distances / the component's calibrated threshold",
    "pooled": "Mahalanobis distance, Ledoit-Wolf covariance per component and read point, cross-fitted over "
              "seed folds, at three read points of each response: the pooled value, the first token and the "
              "last real token; offdist_z = the largest over points and responses of the distance over its "
              "point's calibrated threshold, divided by the threshold calibrated on that statistic",
}


def golden_block(patch_rows: list[dict], head_rows: list[dict], modes=("mean", "zero", "swap"),
                 read: str = "token") -> dict:
    """golden.json's `offdist` block, counted from the rows as written: per mode, how many
    effects were scored and how many flagged (attn/mlp rows, then head rows); `read` is the
    model's read (`token` or `pooled`), which decides what was scored."""
    def count(rows, flag):
        return {m: sum(1 for r in rows if r["mode"] == m and r.get("offdist_flag") is flag) for m in modes}

    def scored(rows):
        return {m: sum(1 for r in rows if r["mode"] == m and r.get("offdist_z") is not None) for m in modes}

    return {"statistic": STATISTIC[read],
            "quantile": QUANTILE, "folds": FOLDS, "threshold": THRESHOLD,
            "scored": scored(patch_rows), "flagged": count(patch_rows, True),
            "heads_scored": scored(head_rows), "heads_flagged": count(head_rows, True)}


# ----- storage (plain tensors, so torch.load(weights_only=True) can read it back) -----------
def to_state(ref: Reference | Reads) -> dict:
    """A fitted reference as plain tensors and numbers (what stats.pt stores; torch.load(weights_only=True) reads it)."""
    if isinstance(ref, Reads):
        return {"points": list(ref.points), "refs": [to_state(r) for r in ref.refs], "threshold": ref.threshold,
                "quantile": ref.quantile, "n_calibration": ref.n_calibration}
    return {"threshold": ref.threshold, "quantile": ref.quantile, "n_calibration": ref.n_calibration,
            "fits": [{"mean": f.mean, "basis": f.basis, "inv_var": f.inv_var,
                      "inv_rest": f.inv_rest, "shrinkage": f.shrinkage} for f in ref.fits]}


def from_state(state: dict) -> Reference | Reads:
    """The reference `to_state` stored."""
    if "points" in state:
        return Reads(tuple(state["points"]), tuple(from_state(r) for r in state["refs"]), float(state["threshold"]),
                     float(state["quantile"]), int(state["n_calibration"]))
    fits = tuple(Fit(f["mean"], f["basis"], f["inv_var"], float(f["inv_rest"]), float(f["shrinkage"]))
                 for f in state["fits"])
    return Reference(fits, float(state["threshold"]), float(state["quantile"]), int(state["n_calibration"]))
