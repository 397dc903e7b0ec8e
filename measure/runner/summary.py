"""golden.json: the study's summary, computed by bundle_kit.rankstats from the rows as written."""
from __future__ import annotations

import math
from collections import defaultdict

from bundle_kit import rankstats
from bundle_kit.contract import KINDS_COMPARED, MODES, RANK_MODE

from measure.instruments import offdist

TOP = 3
BOOTSTRAP = {"resamples": 1000, "seed": 0, "level": 0.95}
# The one patch score every study ranks by (docs/statistics.md); golden.json names it, and the
# bundle's reproduce.py reads it from there.
PATCH_SCORE = "ratio_of_means"


def _nan_to_none(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def _scores(attr_rows, patch_rows, mode, patch_score=PATCH_SCORE):
    return rankstats.component_scores(rankstats.join_rows(attr_rows, patch_rows, mode), patch_score)


def _top(scores: dict[str, tuple[float, float]], which: int) -> list[str]:
    ranks = rankstats.rankings(scores)
    return [c for c in sorted(ranks, key=lambda c: (ranks[c][which], c))][:TOP]


def lineage(rows: list[dict]) -> dict[str, dict[str, int]]:
    """Per dimension: its pairs (n) and its seeds (n_effective) in these rows."""
    pairs, seeds = defaultdict(set), defaultdict(set)
    for r in rows:
        pairs[r["dimension"]].add(r["pair_id"])
        seeds[r["dimension"]].add(r["seed_id"])
    return {d: {"n": len(pairs[d]), "n_effective": len(seeds[d])} for d in sorted(pairs)}


def crystallization(lens_rows: list[dict]) -> dict:
    """The crystallization depth of the lens rows (rankstats.crystallization_depth), per dimension and over all."""
    by_pair = defaultdict(list)
    for r in lens_rows:
        by_pair[(r["dimension"], r["pair_id"])].append((r["layer"], r["running_margin"]))
    depths = defaultdict(list)
    for (dimension, _pair), values in by_pair.items():
        values.sort()
        depths[dimension].append(rankstats.crystallization_depth([v for _, v in values]))
    every = [d for values in depths.values() for d in values]
    return {"definition": "first layer l where m_l >= m_L / 2, as a fraction of depth; mean over pairs",
            "mean_depth": rankstats.mean(every),
            "per_dimension": {d: rankstats.mean(v) for d, v in sorted(depths.items())}}


class SeedGroups:
    """Each seed's joined rows, grouped by (dimension, component) once, for the seed bootstrap.

    A resample's component scores are `rankstats.component_scores` of the rows of the seeds it
    drew, a seed drawn twice counting twice. Building that joined table and grouping it again for
    each of the 1,000 resamples was most of a study's bundle stage. Here each resample extends the
    seeds' groups instead. rankstats' own statistics then score them (`mean`, `ratio_of_means`,
    `patch_fraction`). They sum with math.fsum, which rounds the exact sum once, so the order the
    rows come in cannot change a bit (tests/measure/test_seed_groups.py compares the two)."""

    def __init__(self, items_by_seed: dict[str, list], patch_score: str = PATCH_SCORE):
        if patch_score not in rankstats.PATCH_SCORES:
            raise ValueError(f"unknown patch score {patch_score!r} (known: {', '.join(rankstats.PATCH_SCORES)})")
        self.patch_score = patch_score
        self.groups: dict[str, dict[tuple[str, str], tuple[list, list]]] = {}
        for seed, items in items_by_seed.items():
            groups = self.groups[seed] = {}
            for (dimension, _pair, component), (attr_row, patch_row) in items:
                attr, patch = groups.setdefault((dimension, component), ([], []))
                attr.append(attr_row["attribution"])
                patch.append(patch_row)

    def scores(self, seeds: list[str]) -> dict[str, dict[str, tuple[float, float]]]:
        """What rankstats.component_scores gives for the joined rows of `seeds`."""
        buckets: dict[tuple[str, str], tuple[list, list]] = {}
        for seed in seeds:
            for key, (attr, patch) in self.groups[seed].items():
                if key in buckets:
                    buckets[key][0].extend(attr)
                    buckets[key][1].extend(patch)
                else:
                    buckets[key] = (list(attr), list(patch))
        out: dict[str, dict[str, tuple[float, float]]] = {}
        for (dimension, component), (attr, patch) in sorted(buckets.items()):
            patch_value = (rankstats.mean(rankstats.patch_fraction(r) for r in patch)
                           if self.patch_score == "mean_ratio" else rankstats.ratio_of_means(patch))
            out.setdefault(dimension, {})[component] = (rankstats.mean(attr), patch_value)
        return out


def rows_by_seed(joined: dict, dimension: str | None = None) -> dict[str, list]:
    """The joined rows (rankstats.join_rows) of each seed, of one dimension or of all, in key order."""
    by_seed = defaultdict(list)
    for key, both in sorted(joined.items()):
        if dimension is None or key[0] == dimension:
            by_seed[both[0]["seed_id"]].append((key, both))
    return by_seed


def rho_intervals(attr_rows, patch_rows, mode: str = RANK_MODE, dimensions=None,
                  patch_score: str = PATCH_SCORE) -> dict:
    """Per dimension: the seed-bootstrap interval (rankstats.seed_bootstrap, BOOTSTRAP) of the
    attribution-vs-patching rho, resampling the dimension's seeds with replacement. `dimensions`
    fixes the order of the keys (default: sorted)."""
    joined = rankstats.join_rows(attr_rows, patch_rows, mode)
    if dimensions is None:
        dimensions = sorted({key[0] for key in joined})
    out = {}
    for d in dimensions:
        groups = SeedGroups(rows_by_seed(joined, d), patch_score)

        def rho(seeds, groups=groups):
            rhos = rankstats.dimension_rhos(groups.scores(seeds))
            return next(iter(rhos.values())) if rhos else float("nan")
        out[d] = list(rankstats.seed_bootstrap(sorted(groups.groups), rho, **BOOTSTRAP))
    return out


class _KeyRecovery:
    """AUC of a ranking against the planted key, with seed-level bootstrap intervals."""

    def __init__(self, attr_rows, patch_rows, key: dict, mode: str, patch_score: str = PATCH_SCORE):
        self.patch_score = patch_score
        self.key = {d: set(v["components"]) for d, v in key["dimensions"].items()}
        self.by_seed = rows_by_seed(rankstats.join_rows(attr_rows, patch_rows, mode))
        self.groups = SeedGroups(self.by_seed, patch_score)
        self.seed_dimension = {s: items[0][0][0] for s, items in self.by_seed.items()}
        self.cache: dict[tuple, dict] = {}

    def aucs(self, seeds: list[str]) -> dict[str, dict[str, float]]:
        """{dimension: {"attribution": auc, "patching": auc}} over the (resampled) seeds."""
        token = tuple(seeds)
        if token not in self.cache:
            out = {}
            for dimension, comps in self.groups.scores(seeds).items():   # a seed drawn twice counts twice
                names = list(comps)
                positive = [c in self.key.get(dimension, ()) for c in names]
                out[dimension] = {
                    # |attribution score|: the key marks membership, not a sign, so a member that
                    # pushes the margin down is found as surely as one that pushes it up
                    # (bundles/organism/CORRECTIONS.md: the signed score was published first)
                    "attribution": rankstats.roc_auc([abs(comps[c][0]) for c in names], positive),
                    "patching": rankstats.roc_auc([comps[c][1] for c in names], positive)}
            self.cache[token] = out
        return self.cache[token]

    def summary(self) -> dict:
        dims = sorted(set(self.seed_dimension.values()))
        every = sorted(self.by_seed)

        def stat(dimension, which):
            def f(seeds):
                got = self.aucs(seeds)
                if dimension is None:
                    values = [_value(got.get(d), which) for d in dims]
                    values = [v for v in values if not math.isnan(v)]
                    return rankstats.mean(values) if values else math.nan
                return _value(got.get(dimension), which)
            return f

        def block(dimension, seeds):
            full = self.aucs(seeds)
            if dimension is None:
                a = rankstats.mean([full[d]["attribution"] for d in dims])
                p = rankstats.mean([full[d]["patching"] for d in dims])
            else:
                a, p = full[dimension]["attribution"], full[dimension]["patching"]
            return {"attribution_auc": a,
                   "attribution_ci": list(rankstats.seed_bootstrap(seeds, stat(dimension, "attribution"), **BOOTSTRAP)),
                   "patching_auc": p,
                   "patching_ci": list(rankstats.seed_bootstrap(seeds, stat(dimension, "patching"), **BOOTSTRAP)),
                   "gap_patching_minus_attribution": p - a,
                   "gap_ci": list(rankstats.seed_bootstrap(seeds, stat(dimension, "gap"), **BOOTSTRAP))}

        per_dimension = {}
        for d in dims:
            seeds = [s for s in every if self.seed_dimension[s] == d]
            n = len({pair for items in (self.by_seed[s] for s in seeds) for (_d, pair, _c), _ in items})
            per_dimension[d] = dict(block(d, seeds), n=n, n_effective=len(seeds),
                                    key_size=len(self.key.get(d, ())))
        overall = dict(block(None, every),
                       n=sum(v["n"] for v in per_dimension.values()), n_effective=len(every))
        return {"overall": overall, "per_dimension": per_dimension}


def _value(entry, which):
    if entry is None:
        return math.nan
    if which == "gap":
        return entry["patching"] - entry["attribution"]
    return entry[which]


def key_recovery(attr_rows, patch_rows, key: dict, mode: str = RANK_MODE, patch_score: str = PATCH_SCORE) -> dict:
    """The key_recovery block: ROC AUC of each ranking against the key, with seed-bootstrap intervals."""
    universe_attr = [r for r in attr_rows if r["kind"] in ("mlp", "head")]
    universe_patch = [r for r in patch_rows if r["kind"] in ("mlp", "head")]
    result = _KeyRecovery(universe_attr, universe_patch, key, mode, patch_score).summary()
    by_mode = {}
    for other in MODES:  # point estimates of the patching AUC in every mode
        recovery = _KeyRecovery(universe_attr, universe_patch, key, other, patch_score)
        full = recovery.aucs(sorted(recovery.by_seed))
        by_mode[other] = {"overall": rankstats.mean(v["patching"] for v in full.values()),
                          "per_dimension": {d: v["patching"] for d, v in sorted(full.items())}}
    result["patching_auc_by_mode"] = by_mode
    return {"universe": key["universe"], "rank_mode": mode, "chance": 0.5,
            "interval": f"{int(BOOTSTRAP['level'] * 100)}% percentile, {BOOTSTRAP['resamples']} "
                        f"resamples of seeds (rankstats.seed_bootstrap, seed {BOOTSTRAP['seed']})",
            **result}


def golden(study: str, model_id: str, identity: dict, files: dict[str, list[dict]],
           key: dict | None, tolerance: float, extra: dict, patch_score: str = PATCH_SCORE) -> dict:
    """golden.json's content, from the rows as written (rankstats for every statistic); every
    ranking by `patch_score` (rankstats.PATCH_SCORES), which golden.json names."""
    attr, patch = files["attribution"], files["patching"]
    scores = _scores(attr, patch, RANK_MODE, patch_score)
    rhos = rankstats.dimension_rhos(scores)
    per_dim = lineage(attr)
    pairs_per_dim = sorted({v["n"] for v in per_dim.values()})
    patched = sorted({r["component"] for r in patch})
    compared = sorted({c for comps in scores.values() for c in comps})
    out = {
        "study": study,
        "model": model_id,
        "rank_mode": RANK_MODE,
        "patch_score": patch_score,
        "components_compared": "attn and mlp components (embed is attributed, not patched)",
        "tolerance": tolerance,
        "counts": {
            "pairs": sum(v["n"] for v in per_dim.values()),
            "pairs_per_dimension": pairs_per_dim[0] if len(pairs_per_dim) == 1 else
            {d: v["n"] for d, v in per_dim.items()},
            "n_effective": sum(v["n_effective"] for v in per_dim.values()),
            "dimensions": len(per_dim),
            "components_attributed": len({r["component"] for r in attr if r["kind"] != "bias"}),
            "components_patched": len(patched),
            "components_ranked_both": len(compared),
            "heads_patched": len({r["component"] for r in files["patching_heads"]}),
            "attribution_rows": len(attr),
            "patching_rows": len(patch),
            "heads_attribution_rows": len(files["attribution_heads"]),
            "heads_patching_rows": len(files["patching_heads"]),
            "lens_rows": len(files["lens"]),
        },
        "mean_rho": _nan_to_none(rankstats.mean(rhos.values())),
        "per_dimension_rho": {d: _nan_to_none(v) for d, v in rhos.items()},
        "kinds_compared": KINDS_COMPARED,
        "identity": identity,
        "per_dimension_n": per_dim,
    }
    by_mode = {}
    for mode in [m for m in MODES if any(r["mode"] == m for r in patch)]:   # a bundle may keep fewer modes
        mode_rhos = rankstats.dimension_rhos(_scores(attr, patch, mode, patch_score))
        by_mode[mode] = {"mean_rho": _nan_to_none(rankstats.mean(mode_rhos.values())),
                         "per_dimension_rho": {d: _nan_to_none(v) for d, v in mode_rhos.items()}}
    out["rho_by_mode"] = by_mode
    heads = _scores(files["attribution_heads"], files["patching_heads"], RANK_MODE, patch_score)
    out["top_components"] = {
        d: {"attribution": _top(scores[d], 0), "patching": _top(scores[d], 1),
            "heads_attribution": _top(heads[d], 0) if d in heads else [],
            "heads_patching": _top(heads[d], 1) if d in heads else []}
        for d in scores}
    margins = {}
    for r in attr:
        margins[(r["dimension"], r["pair_id"])] = r["margin"]
    out["clean_accuracy"] = {
        d: sum(1 for (dd, _p), m in margins.items() if dd == d and m > 0) / per_dim[d]["n"]
        for d in per_dim}
    out["crystallization"] = crystallization(files["lens"]) if files["lens"] else None   # a bundle without lens rows
    out["key_recovery"] = (key_recovery(attr + files["attribution_heads"],
                                        patch + files["patching_heads"], key, patch_score=patch_score)
                           if key is not None else None)
    out.update(extra)
    out["offdist"] = offdist.golden_block(patch, files["patching_heads"])
    if "per_dimension_rho_ci" not in out:  # a study may place it earlier (MiniLM does, in extra)
        out["per_dimension_rho_ci"] = {d: [_nan_to_none(v) for v in ci]
                                       for d, ci in rho_intervals(attr, patch, patch_score=patch_score).items()}
    return out
