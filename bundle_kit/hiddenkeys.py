"""Key recovery of keys made by training and hidden until unblinding (the routed study,
registrations/routed-gap.yaml and routed-null.yaml in the repository this file comes from).

Standard library only; ships in a bundle zip beside `rankstats.py`. Per organism (one keyed
rule), over its heads and MLPs (`head_L{i}_H{j}`, `mlp_L{i}`), each component gets two scores
on the organism's study twins of one dimension:

- attribution: |mean margin attribution| (the magnitude of the attribution score of
  docs/statistics.md), divided by the mean |clean margin| (a constant per dimension: the ranking
  is unchanged, and a floor can be set in margins);
- patching: the one patch score, sum |effect| / sum |clean margin| (`ratio_of_means`), with
  mean-mode patching.

Key recovery is `rankstats.roc_auc` of a score against membership in a key (chance 0.5). The
headline `gap` is the mean over valid organisms of patching's recovery minus attribution's; its
interval resamples organisms with replacement (the organism is the unit: every twin of one
organism shares its weights). The null control scores each organism's null twins against ten
decoy keys and averages over decoys, then over organisms (valid or not: a decoy is never
trained); `worst_distance` is the larger of the two methods' distances from 0.5. A second
control, not registered: the real key scored on the null twins (`key_on_null`), which a method
finds only by something other than the rule.

The specification curve varies every analysis choice fixed before unblinding (GRID): the
patching mode, the patch score (`ratio_of_means` or the per-pair `mean_ratio`), attribution's
aggregation (|mean| or the mean of magnitudes) and a floor below which a score counts as zero
(attribution is in units of the mean |clean margin| for it, patching already is). An order
between the methods is claimed only if the primary gap's interval excludes zero and at least
ROBUST_SHARE of the specifications give a gap of the same sign.
"""
from __future__ import annotations

import math
import random

try:  # inside the repository: bundle_kit.hiddenkeys
    from . import rankstats
except ImportError:  # inside a bundle zip: beside rankstats.py
    import rankstats

METHODS = ("attribution", "patching")
INTERVAL = {"resamples": 1000, "seed": 0, "level": 0.90}


def in_universe(component: str) -> bool:
    """A head or an MLP: the components a key is drawn from (attention blocks are sums of heads)."""
    return component.startswith("head_") or component.startswith("mlp_")


GRID = {"mode": ("mean", "zero", "swap"), "patch_score": ("ratio_of_means", "mean_ratio"),
        "attribution": ("abs_mean", "mean_abs"), "floor": (0.0, 0.01, 0.05)}
PRIMARY = {"mode": "mean", "patch_score": "ratio_of_means", "attribution": "abs_mean", "floor": 0.0}
ROBUST_SHARE = 0.9


def specifications() -> list[dict]:
    """Every combination of GRID's choices, the primary first."""
    import itertools
    grid = [dict(zip(GRID, values)) for values in itertools.product(*GRID.values())]
    return [PRIMARY] + [spec for spec in grid if spec != PRIMARY]


def spec_name(spec: dict) -> str:
    return "/".join(f"{k}={spec[k]}" for k in GRID)


def scores(attribution_rows, patching_rows, dimension: str, spec: dict = PRIMARY) -> dict[str, dict[str, float]]:
    """{method: {component: score}} over the universe, for one dimension's twins."""
    rows_a = [r for r in attribution_rows if r["dimension"] == dimension and in_universe(r["component"])]
    rows_p = [r for r in patching_rows if r["dimension"] == dimension and in_universe(r["component"])]
    joined = rankstats.join_rows(rows_a, rows_p, spec["mode"])
    if not joined:
        raise ValueError(f"dimension {dimension}: no attribution and {spec['mode']}-mode patching rows to join")
    per: dict[str, tuple[list, list]] = {}
    for (_d, _pair, component), (attr_row, patch_row) in sorted(joined.items()):
        values, patched = per.setdefault(component, ([], []))
        values.append(attr_row["attribution"])
        patched.append(patch_row)
    unit = rankstats.mean(abs(p["clean_margin"]) for _a, rows in per.values() for p in rows) or 1.0
    out: dict[str, dict[str, float]] = {"attribution": {}, "patching": {}}
    for component, (values, patched) in per.items():
        attribution = (abs(rankstats.mean(values)) if spec["attribution"] == "abs_mean"
                       else rankstats.mean(abs(v) for v in values)) / unit
        patching = (rankstats.ratio_of_means(patched) if spec["patch_score"] == "ratio_of_means"
                    else rankstats.mean(rankstats.patch_fraction(r) for r in patched))
        out["attribution"][component] = attribution if attribution >= spec["floor"] else 0.0
        out["patching"][component] = patching if patching >= spec["floor"] else 0.0
    return out


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


def organism(attribution_rows, patching_rows, keyed_dimension: str, null_dimension: str, key, decoys,
             spec: dict = PRIMARY) -> dict:
    """One organism's recovery of its key and, on its null twins, of each decoy."""
    real = recovery(scores(attribution_rows, patching_rows, keyed_dimension, spec), key)
    null_scores = scores(attribution_rows, patching_rows, null_dimension, spec)
    by_decoy = [recovery(null_scores, decoy) for decoy in decoys]
    null = {m: rankstats.mean(d[m] for d in by_decoy) for m in METHODS}
    return {**{m: real[m] for m in METHODS}, "gap": real["patching"] - real["attribution"],
            "null": null, "key_on_null": recovery(null_scores, key)}


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
    # not registered: the real key scored on the null twins, where its rule's word makes no
    # difference; near 0.5 unless a method finds the key by something other than the rule
    # (members that are simply louder, say)
    on_null = {m: rankstats.mean(organisms[n]["key_on_null"][m] for n in kept) if kept else math.nan
               for m in METHODS}
    failed = int(void_share > 0.5 or worst > 0.05)
    return {"key_recovery": {**recovered, "organisms": len(names), "valid": len(kept),
                             "interval_level": interval["level"], "resamples": interval["resamples"]},
            "null": {**null, "worst_distance": {"value": worst}, "key_on_null": on_null},
            "validity": {"void_share": void_share, "failed": failed}}


def spec_curve(by_spec: dict[str, dict[str, dict]], valid: dict[str, bool]) -> dict:
    """From {spec name: {organism: organism()}} (the primary's name among them): each
    specification's mean recoveries and gap over the valid organisms, and per headline the
    share of specifications on the primary's side (the gap's sign; a method's AUC above or
    below 0.5)."""
    primary = spec_name(PRIMARY)
    rows = []
    for name, organisms in by_spec.items():
        kept = [n for n in sorted(organisms) if valid[n]]
        values = {k: rankstats.mean(organisms[n][k] for n in kept) if kept else math.nan
                  for k in (*METHODS, "gap")}
        rows.append({"spec": name, "primary": name == primary, **values})
    reference = {"attribution": 0.5, "patching": 0.5, "gap": 0.0}
    first = next(r for r in rows if r["primary"])
    share = {}
    for k, ref in reference.items():
        side = first[k] > ref
        share[k] = sum(1 for r in rows if (r[k] > ref) == side and not math.isnan(r[k])) / len(rows)
    return {"specifications": len(rows), "share_agreeing": share, "rows": rows}


def order_claimed(summary_block: dict, curve: dict) -> bool:
    """Whether an order between the methods may be stated: the primary gap's interval excludes
    zero and at least ROBUST_SHARE of the specifications agree on its sign."""
    lo, hi = summary_block["key_recovery"]["gap"]["interval"]
    return (lo > 0 or hi < 0) and curve["share_agreeing"]["gap"] >= ROBUST_SHARE
