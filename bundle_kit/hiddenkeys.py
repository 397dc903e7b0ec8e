"""Key recovery of keys made by training and hidden until unblinding (the routed study,
registrations/routed-gap.yaml and routed-null.yaml in the repository this file comes from).

Standard library only; ships in a bundle zip beside `rankstats.py`. Per organism (one keyed
rule), over its heads and MLPs (`head_L{i}_H{j}`, `mlp_L{i}`), each component gets two scores
on the organism's study twins of one dimension:

- attribution: |mean margin attribution| (rankstats.component_scores' attribution score, its
  magnitude);
- patching: the one patch score, sum |effect| / sum |clean margin| (`ratio_of_means`), with
  mean-mode patching.

Key recovery is `rankstats.roc_auc` of a score against membership in a key (chance 0.5). The
headline `gap` is the mean over valid organisms of patching's recovery minus attribution's; its
interval resamples organisms with replacement (the organism is the unit: every twin of one
organism shares its weights). The null control scores each organism's null twins against ten
decoy keys and averages over decoys, then over organisms (valid or not: a decoy is never
trained); `worst_distance` is the larger of the two methods' distances from 0.5.
"""
from __future__ import annotations

import math
import random

try:  # inside the repository: bundle_kit.hiddenkeys
    from . import rankstats
except ImportError:  # inside a bundle zip: beside rankstats.py
    import rankstats

METHODS = ("attribution", "patching")
MODE = "mean"
INTERVAL = {"resamples": 1000, "seed": 0, "level": 0.90}


def in_universe(component: str) -> bool:
    """A head or an MLP: the components a key is drawn from (attention blocks are sums of heads)."""
    return component.startswith("head_") or component.startswith("mlp_")


def scores(attribution_rows, patching_rows, dimension: str) -> dict[str, dict[str, float]]:
    """{method: {component: score}} over the universe, for one dimension's twins."""
    rows_a = [r for r in attribution_rows if r["dimension"] == dimension and in_universe(r["component"])]
    rows_p = [r for r in patching_rows if r["dimension"] == dimension and in_universe(r["component"])]
    joined = rankstats.join_rows(rows_a, rows_p, MODE)
    if not joined:
        raise ValueError(f"dimension {dimension}: no attribution and {MODE}-mode patching rows to join")
    comps = rankstats.component_scores(joined, "ratio_of_means")[dimension]
    return {"attribution": {c: abs(a) for c, (a, _p) in comps.items()},
            "patching": {c: p for c, (_a, p) in comps.items()}}


def recovery(method_scores: dict[str, dict[str, float]], key) -> dict[str, float]:
    """{method: AUC} of each method's scores against membership in `key`."""
    out = {}
    for method in METHODS:
        names = sorted(method_scores[method])
        missing = sorted(set(key) - set(names))
        if missing:
            raise ValueError(f"key member(s) {', '.join(missing)} have no {method} score")
        out[method] = rankstats.roc_auc([method_scores[method][c] for c in names], [c in key for c in names])
    return out


def organism(attribution_rows, patching_rows, keyed_dimension: str, null_dimension: str, key, decoys) -> dict:
    """One organism's recovery of its key and, on its null twins, of each decoy."""
    real = recovery(scores(attribution_rows, patching_rows, keyed_dimension), key)
    null_scores = scores(attribution_rows, patching_rows, null_dimension)
    by_decoy = [recovery(null_scores, decoy) for decoy in decoys]
    null = {m: rankstats.mean(d[m] for d in by_decoy) for m in METHODS}
    return {**{m: real[m] for m in METHODS}, "gap": real["patching"] - real["attribution"],
            "null": null}


def summary(organisms: dict[str, dict], valid: dict[str, bool], interval: dict = INTERVAL) -> dict:
    """golden.json's `key_recovery`, `null` and `validity` blocks from {organism: organism()}
    and {organism: whether its key passed validation}."""
    names = sorted(organisms)
    kept = [n for n in names if valid[n]]
    void_share = 1 - len(kept) / len(names)

    def means(members: list[str]) -> dict[str, float]:
        return {k: rankstats.mean(organisms[n][k] for n in members) for k in (*METHODS, "gap")}

    rng = random.Random(interval["seed"])
    draws = [means([rng.choice(kept) for _ in kept]) for _ in range(interval["resamples"])] if kept else []
    point = means(kept) if kept else {k: math.nan for k in (*METHODS, "gap")}
    recovered = {k: {"value": point[k],
                     "interval": list(rankstats.percentile_interval([d[k] for d in draws], interval["level"]))}
                 for k in (*METHODS, "gap")}
    null = {m: rankstats.mean(organisms[n]["null"][m] for n in names) for m in METHODS}
    worst = max(abs(null[m] - 0.5) for m in METHODS)
    failed = int(void_share > 0.5 or worst > 0.05)
    return {"key_recovery": {**recovered, "organisms": len(names), "valid": len(kept),
                             "interval_level": interval["level"], "resamples": interval["resamples"]},
            "null": {**null, "worst_distance": {"value": worst}},
            "validity": {"void_share": void_share, "failed": failed}}
