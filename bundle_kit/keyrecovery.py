"""Key recovery: how well each instrument's ranking finds a planted answer key.

Standard library only; ships in every bundle zip beside `rankstats.py`. The measurement stage
writes `golden.json`'s `key_recovery` block with `summary()`, and `reproduce.py` recomputes its
point estimates with `check()` whenever the bundle holds a `key.json` with `dimensions`.

Per dimension (one rule of one organism) and method, over the key universe (heads and MLPs):

- a component's score: attribution = |mean signed attribution over pairs|; patching (each mode)
  = mean |effect| / |clean margin| over pairs (`rankstats.patch_fraction`);
- AUC: `rankstats.roc_auc` of the scores against key membership (chance 0.5);
- rho: `rankstats.spearman` of the scores against the key's role strength (0 outside the key);
- top-k inclusion: `rankstats.topk_inclusion` with k = the key's size, ties shared; averaged
  over the key members of each role (`role_recall`) and over the distractors of each role
  (`distractor_rate`).

Intervals: AUCs and their gaps resample organisms, then seed pairs inside each rule
(`rankstats.hierarchical_bootstrap`); rhos resample seed pairs with the organisms fixed.
"""
from __future__ import annotations

import math

try:  # inside the repository: bundle_kit.keyrecovery
    from . import rankstats
except ImportError:  # inside a bundle zip: beside rankstats.py
    import rankstats

METHODS = ("attribution", "patching_mean", "patching_zero", "patching_swap")
UNIVERSE_KINDS = ("head", "mlp")
BOOTSTRAP = {"resamples": 1000, "seed": 0, "level": 0.95}


def _kind(component: str) -> str:
    return component.split("_L", 1)[0]


def seed_sums(attribution_rows, patching_rows) -> dict:
    """{dimension: {"components": [...], "seeds": {seed: {method: ([sums], n)}}}} over the key
    universe; a seed's sums add its pairs' per-pair values (signed attribution, patch fraction)."""
    table: dict = {}

    def add(dimension, seed, method, component, value):
        entry = table.setdefault(dimension, {"components": set(), "values": {}})
        entry["components"].add(component)
        cell = entry["values"].setdefault((seed, method, component), [0.0, 0])
        cell[0] += value
        cell[1] += 1

    for row in attribution_rows:
        if _kind(row["component"]) in UNIVERSE_KINDS:
            add(row["dimension"], row["seed_id"], "attribution", row["component"], row["attribution"])
    for row in patching_rows:
        if _kind(row["component"]) in UNIVERSE_KINDS:
            add(row["dimension"], row["seed_id"], f"patching_{row['mode']}", row["component"],
                rankstats.patch_fraction(row))
    out = {}
    for dimension, entry in sorted(table.items()):
        names = sorted(entry["components"])
        seeds: dict = {}
        for (seed, method, _c) in entry["values"]:
            seeds.setdefault(seed, {}).setdefault(method, None)
        for seed, methods in seeds.items():
            for method in methods:
                cells = [entry["values"].get((seed, method, c)) for c in names]
                if any(c is None for c in cells):
                    raise rankstats.FixtureError(dimension, None, f"seed {seed}: {method} lacks some components")
                methods[method] = ([c[0] for c in cells], cells[0][1])
        out[dimension] = {"components": names, "seeds": seeds}
    return out


def scores(entry: dict, seeds: list[str], method: str) -> list[float]:
    """Component scores over the (resampled) seeds; a seed drawn twice counts twice."""
    total = [0.0] * len(entry["components"])
    count = 0
    for seed in seeds:
        sums, n = entry["seeds"][seed][method]
        total = [a + b for a, b in zip(total, sums)]
        count += n
    return [abs(t / count) for t in total]


def dimension_stats(entry: dict, key_dim: dict, seeds: list[str], methods=METHODS) -> dict:
    names = entry["components"]
    members = set(key_dim["components"])
    strength = [key_dim["roles"][c]["strength"] if c in members else 0.0 for c in names]
    positive = [c in members for c in names]
    out = {}
    for method in methods:
        s = scores(entry, seeds, method)
        inclusion = dict(zip(names, rankstats.topk_inclusion(s, len(members))))
        out[method] = {"auc": rankstats.roc_auc(s, positive), "rho": rankstats.spearman(s, strength),
                       "members": {c: inclusion[c] for c in key_dim["components"]},
                       "distractors": {c: inclusion[c] for c in key_dim.get("distractors", {})}}
    return out


def _groups(key: dict, table: dict) -> dict:
    groups: dict = {}
    for dimension, spec in sorted(key["dimensions"].items()):
        if dimension not in table:
            raise rankstats.FixtureError("key.json", None, f"dimension {dimension} has no rows")
        groups.setdefault(spec["organism"], {})[dimension] = sorted(table[dimension]["seeds"])
    return groups


def _mean(values):
    values = [v for v in values if not math.isnan(v)]
    return rankstats.mean(values) if values else math.nan


def point(table: dict, key: dict) -> dict:
    """Every point estimate of the key-recovery block, from all seeds."""
    groups = _groups(key, table)
    per = {d: dimension_stats(table[d], key["dimensions"][d], seeds)
           for g in groups.values() for d, seeds in g.items()}
    out: dict = {"auc": {}, "rho_strength": {}, "role_recall": {}, "distractor_rate": {}, "gap": {}}
    for method in METHODS:
        per_org = {org: _mean(per[d][method]["auc"] for d in dims) for org, dims in groups.items()}
        values = list(per_org.values())
        mu = rankstats.mean(values)
        sd = math.sqrt(rankstats.mean([(v - mu) ** 2 for v in values]) * len(values) / (len(values) - 1)) \
            if len(values) > 1 else 0.0
        rules = sorted({key["dimensions"][d]["rule"] for d in per})
        out["auc"][method] = {
            "mean": _mean(per[d][method]["auc"] for d in per),
            "per_organism": per_org,
            "spread": {"min": min(values), "max": max(values), "sd": sd},
            "per_rule": {r: _mean(per[d][method]["auc"] for d in per if key["dimensions"][d]["rule"] == r)
                         for r in rules}}
        out["rho_strength"][method] = {
            "mean": _mean(per[d][method]["rho"] for d in per),
            "per_organism": {org: _mean(per[d][method]["rho"] for d in dims) for org, dims in groups.items()}}
        for which, target in (("members", "role_recall"), ("distractors", "distractor_rate")):
            by_role: dict = {}
            for d in per:
                spec = key["dimensions"][d]
                roles = spec["roles"] if which == "members" else spec.get("distractors", {})
                for c, value in per[d][method][which].items():
                    by_role.setdefault(roles[c]["role"], []).append(value)
            out[target][method] = {role: rankstats.mean(v) for role, v in sorted(by_role.items())}
    for method in METHODS[1:]:
        mode = method.split("_", 1)[1]
        out["gap"][f"{mode}_minus_attribution"] = out["auc"][method]["mean"] - out["auc"]["attribution"]["mean"]
        out["gap"][f"{mode}_minus_attribution_per_organism"] = {
            org: out["auc"][method]["per_organism"][org] - out["auc"]["attribution"]["per_organism"][org]
            for org in groups}
    # the same numbers arranged for tables: one row per organism, rule or role
    out["by_organism"] = {org: dict({m: out["auc"][m]["per_organism"][org] for m in METHODS},
                                    gap_mean=out["gap"]["mean_minus_attribution_per_organism"][org])
                          for org in groups}
    out["by_rule"] = {r: {m: out["auc"][m]["per_rule"][r] for m in METHODS} for r in out["auc"]["attribution"]["per_rule"]}
    for target in ("role_recall", "distractor_rate"):
        roles = sorted({r for m in METHODS for r in out[target][m]})
        out[f"{target}_by_role"] = {r: {m: out[target][m][r] for m in METHODS} for r in roles}
    return out


def _auc_statistic(table, key):
    def statistic(sample):
        values: dict = {m: [] for m in METHODS}
        for _org, dims in sample:
            for d, seeds in dims.items():
                stats = dimension_stats(table[d], key["dimensions"][d], seeds)
                for m in METHODS:
                    values[m].append(stats[m]["auc"])
        out = {m: _mean(v) for m, v in values.items()}
        for m in METHODS[1:]:
            out[f"gap_{m.split('_', 1)[1]}"] = out[m] - out["attribution"]
        return out
    return statistic


def _rho_statistic(table, key):
    def statistic(sample):
        values: dict = {m: [] for m in METHODS}
        for _org, dims in sample:
            for d, seeds in dims.items():
                stats = dimension_stats(table[d], key["dimensions"][d], seeds)
                for m in METHODS:
                    values[m].append(stats[m]["rho"])
        return {m: _mean(v) for m, v in values.items()}
    return statistic


def summary(attribution_rows, patching_rows, key: dict, bootstrap: dict | None = None) -> dict:
    """The `key_recovery` block of golden.json (point estimates and intervals)."""
    boot = dict(BOOTSTRAP, **(bootstrap or {}))
    table = seed_sums(attribution_rows, patching_rows)
    groups = _groups(key, table)
    out = point(table, key)
    two_level = rankstats.hierarchical_bootstrap(groups, _auc_statistic(table, key), **boot)
    seed_level = rankstats.hierarchical_bootstrap(groups, _rho_statistic(table, key), resample_groups=False, **boot)
    for m in METHODS:
        out["auc"][m]["ci"] = list(two_level[m])
        out["rho_strength"][m]["ci"] = list(seed_level[m])
    for m in METHODS[1:]:
        mode = m.split("_", 1)[1]
        out["gap"][f"{mode}_minus_attribution_ci"] = list(two_level[f"gap_{mode}"])
    universe = len(next(iter(table.values()))["components"])
    return {"universe": key.get("universe", "head and mlp components"), "universe_size": universe,
            "methods": list(METHODS), "chance_auc": 0.5,
            "organisms": len(groups), "dimensions": len(key["dimensions"]),
            "n_effective": sum(len(s) for g in groups.values() for s in g.values()),
            "interval": (f"{int(boot['level'] * 100)}% percentile, {boot['resamples']} resamples "
                         f"(seed {boot['seed']}): AUCs and gaps resample organisms, then seed pairs "
                         "within each rule; rhos resample seed pairs with the organisms fixed"),
            **out}


# ---------------------------------------------------------------- reproduce.py's check

def _flat(block, prefix=()):
    if isinstance(block, dict):
        for k, v in block.items():
            yield from _flat(v, prefix + (k,))
    elif isinstance(block, (int, float)) and not isinstance(block, bool):
        yield prefix, float(block)


def check(attribution_rows, patching_rows, key: dict, published: dict, tolerance: float):
    """Recompute every point estimate of `published` (golden.json's key_recovery block) from the
    rows and the key; returns (report lines, [(disagreement, key path)], ok)."""
    table = seed_sums(attribution_rows, patching_rows)
    mine = point(table, key)
    comparisons = []
    for path, value in _flat(mine):
        node = published
        for k in path:
            node = node.get(k) if isinstance(node, dict) else None
        theirs = node if isinstance(node, (int, float)) and not isinstance(node, bool) else None
        diff = math.inf if theirs is None else abs(value - theirs)
        if math.isnan(value) and theirs is None:
            diff = 0.0
        comparisons.append((diff, "key_recovery/" + "/".join(path)))
    lines = ["key recovery (AUC of |score| against the planted key; chance 0.5)", ""]
    table_rows = [["organism"] + list(METHODS)]
    for org in sorted(mine["auc"]["attribution"]["per_organism"]):
        table_rows.append([org] + [f"{mine['auc'][m]['per_organism'][org]:.6f}" for m in METHODS])
    table_rows.append(["mean"] + [f"{mine['auc'][m]['mean']:.6f}" for m in METHODS])
    widths = [max(len(r[i]) for r in table_rows) for i in range(len(table_rows[0]))]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
              for r in table_rows]
    lines += ["", f"gap, mean-mode patching minus attribution  {mine['gap']['mean_minus_attribution']:+.6f}"]
    worst = max(comparisons)[0] if comparisons else 0.0
    ok = all(d <= tolerance for d, _ in comparisons)
    lines += [f"key-recovery values compared  {len(comparisons)} (intervals are not recomputed)",
              f"largest disagreement          {worst:.2e}" if math.isfinite(worst) else "largest disagreement          missing value"]
    return lines, comparisons, ok
