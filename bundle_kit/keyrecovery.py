"""Key recovery: how well each instrument's ranking finds a planted answer key, under every
analysis choice declared before the data (a specification curve).

Standard library only; ships in every bundle zip beside `rankstats.py`. The measurement stage
writes `golden.json`'s `key_recovery` block with `summary()` and the bundle's `spec_curve.jsonl`
with `spec_rows()`; `reproduce.py` recomputes every point estimate of both with `check()` and
`check_spec_rows()` whenever the bundle holds a `key.json` with `dimensions`.

Per dimension (one rule of one organism), over the key universe (heads and MLPs), every
per-pair value is divided by the pair's |clean margin|: attribution a / |m|, and each patching
mode's effect e / |m| (signed). A component's score under an aggregation:

- `site` (as the site's other studies score them): attribution |mean of a/|m||, patching the
  mean of |e|/|m|;
- `magnitude`: the mean of the per-pair magnitude, for both methods;
- `signed`: the magnitude of the mean signed value, for both methods.

Scores below the floor count as zero (ties). Metrics over the universe, against a key:

- `auc`: `rankstats.roc_auc` of the scores against membership (chance 0.5);
- `precision_at_k`: the expected share of key members among the k highest scores, k the key's
  size, ties broken at random (`rankstats.topk_inclusion`); chance k / universe.

The key comes from key.json (`keys`): `circuit` (every component the rule's designed circuit
runs through), `direct` (those that write the reward at the scoring token on a clean input with
the word), `single` (those whose removal alone changes the rule's designed reward). A dimension
whose key is empty under a definition (a fallback rule has no single-necessary member) gives no
value there. A headline is the mean over dimensions; every family holds the same number.

Intervals (primary specification only): 95% percentiles of 1000 resamples (seed 0) that draw
families with replacement, organisms within each drawn family, then the seed pairs of every
dimension of each drawn organism; per family, organisms then pairs.
"""
from __future__ import annotations

import itertools
import math
import random

try:  # inside the repository: bundle_kit.keyrecovery
    from . import rankstats
except ImportError:  # inside a bundle zip: beside rankstats.py
    import rankstats

METHODS = ("attribution", "patching_mean", "patching_zero", "patching_swap")
SPEC_FILE = "spec_curve.jsonl"
MODES = ("mean", "zero", "swap")
UNIVERSE_KINDS = ("head", "mlp")
BOOTSTRAP = {"resamples": 1000, "seed": 0, "level": 0.95}
# The specification grid and the primary specification, frozen in registrations/planted-v2-*.yaml.
GRID = {"floor": (0.0, 0.001, 0.005, 0.01, 0.05), "key": ("circuit", "direct", "single"),
        "aggregation": ("site", "magnitude", "signed"), "metric": ("auc", "precision_at_k"),
        "mode": MODES}
PRIMARY = {"floor": 0.01, "key": "circuit", "aggregation": "site", "metric": "auc", "mode": "mean"}
ROBUST_SHARE = 0.9          # a conclusion holding in at least this share of its specifications
# Traps, scored at the primary specification by top-k inclusion (k the circuit key's size):
# trap -> (key members or distractors, roles)
TRAPS = {"backup": ("members", ("backup",)),
         "fallback": ("members", ("primary", "fallback_detector", "fallback_scorer")),
         "offdist_gate": ("distractors", ("offdist_gate",)),
         "upstream": ("members", ("early_compute", "relay")),
         "mover": ("members", ("mover",)),
         "decoy": ("distractors", ("decoy", "canceller"))}
# The background must overlap the weakest designed key members (the minor carriers), or the
# calibration is void: the share of non-key scores (mean-mode patching, per-pair magnitude, no
# floor) at or above the median minor-carrier score must be at least this.
OVERLAP_MIN_SHARE = 0.02


def _kind(component: str) -> str:
    return component.split("_L", 1)[0]


# ---------------------------------------------------------------- the table of per-pair values

def pair_table(attribution_rows, patching_rows) -> dict:
    """{dimension: {"components": [names], "seeds": {seed: [(pair values by method), ...]}}}:
    per pair, for each method, the list of values over the components, divided by |margin|."""
    cells: dict = {}
    margins: dict = {}
    for row in attribution_rows:
        if _kind(row["component"]) in UNIVERSE_KINDS:
            key = (row["dimension"], row["seed_id"], row["pair_id"])
            cells.setdefault(key, {}).setdefault("attribution", {})[row["component"]] = row["attribution"]
            margins[key] = row["margin"]
    for row in patching_rows:
        if _kind(row["component"]) in UNIVERSE_KINDS:
            key = (row["dimension"], row["seed_id"], row["pair_id"])
            cells.setdefault(key, {}).setdefault(f"patching_{row['mode']}", {})[row["component"]] = row["effect"]
            margins.setdefault(key, row["clean_margin"])
    out: dict = {}
    for (dimension, seed, pair), by_method in sorted(cells.items()):
        names = sorted(by_method.get("attribution", {}))
        entry = out.setdefault(dimension, {"components": names, "seeds": {}})
        if names != entry["components"]:
            raise rankstats.FixtureError(dimension, None, f"pair {pair}: attribution rows cover other components")
        margin = abs(margins[(dimension, seed, pair)])
        if margin == 0:
            raise rankstats.FixtureError(dimension, None, f"pair {pair}: clean margin is zero")
        values = {}
        for method in METHODS:
            got = by_method.get(method, {})
            if sorted(got) != names:
                raise rankstats.FixtureError(dimension, None, f"pair {pair}: {method} lacks some components")
            values[method] = [got[c] / margin for c in names]
        entry["seeds"].setdefault(seed, []).append(values)
    return out


def scores(entry: dict, seeds, method: str, aggregation: str, floor: float) -> list[float]:
    """Component scores over the (resampled) seeds' pairs; a seed drawn twice counts twice."""
    return [s if s >= floor else 0.0 for s in _unfloored(entry, seeds, method, aggregation)]


def _unfloored(entry: dict, seeds, method: str, aggregation: str) -> list[float]:
    pairs = [pair[method] for seed in seeds for pair in entry["seeds"][seed]]
    n = len(pairs)
    if n == 0:
        raise ValueError("scores: no pairs to score")
    if aggregation == "magnitude" or (aggregation == "site" and method != "attribution"):
        # one component's values over the pairs (fsum is exact: their order is free)
        return [math.fsum(map(abs, column)) / n for column in zip(*pairs)]
    return [abs(math.fsum(column) / n) for column in zip(*pairs)]


def metric(values: list[float], names: list[str], key: list[str], which: str) -> float:
    """AUC or expected precision at k of `values` against the `key` (NaN for an empty key)."""
    members = set(key)
    if not members or len(members) == len(names):
        return math.nan
    if which == "auc":
        return rankstats.roc_auc(values, [c in members for c in names])
    inclusion = rankstats.topk_inclusion(values, len(members))
    return math.fsum(p for c, p in zip(names, inclusion) if c in members) / len(members)


def chance(names: list[str], key: list[str], which: str) -> float:
    """A metric's chance level for one dimension: 0.5 for the AUC, k / universe for precision at k."""
    if not key or len(key) == len(names):
        return math.nan
    return 0.5 if which == "auc" else len(key) / len(names)


def _mean(values) -> float:
    values = [v for v in values if not math.isnan(v)]
    return math.fsum(values) / len(values) if values else math.nan


# ---------------------------------------------------------------- specifications

def specifications(method: str) -> list[dict]:
    """Every specification of the grid that applies to `method` (attribution has no mode)."""
    axes = ["floor", "key", "aggregation", "metric"] + ([] if method == "attribution" else ["mode"])
    return [dict(zip(axes, combo)) for combo in itertools.product(*(GRID[a] for a in axes))]


def _method(spec: dict) -> str:
    return f"patching_{spec['mode']}" if "mode" in spec else "attribution"


def headline(table: dict, key: dict, spec: dict, method: str, units=None, memo: dict | None = None) -> float:
    """The mean over dimensions of one method's metric under one specification. `units`: the
    (dimension, seeds) to average over, a dimension or seed drawn twice counting twice (a
    resample); by default every dimension with all its seeds. `memo` keeps the scores before
    the floor, which many specifications share."""
    values = []
    for d, seeds in (units if units is not None else _every_unit(table, key)):
        entry = table[d]
        k = (d, tuple(seeds), method, spec["aggregation"])
        if memo is None or k not in memo:
            unfloored = _unfloored(entry, seeds, method, spec["aggregation"])
            if memo is not None:
                memo[k] = unfloored
        else:
            unfloored = memo[k]
        s = [v if v >= spec["floor"] else 0.0 for v in unfloored]
        values.append(metric(s, entry["components"], key["dimensions"][d]["keys"][spec["key"]], spec["metric"]))
    return _mean(values)


def _every_unit(table: dict, key: dict, dims=None) -> list:
    """(dimension, every seed) for `dims` (default every dimension of the key), in order."""
    return [(d, sorted(table[d]["seeds"])) for d in (dims if dims is not None else sorted(key["dimensions"]))]


def chance_level(table: dict, key: dict, spec: dict) -> float:
    """The chance level of a specification's headline: the mean over dimensions."""
    return _mean(chance(table[d]["components"], key["dimensions"][d]["keys"][spec["key"]], spec["metric"])
                 for d in sorted(key["dimensions"]))


def spec_rows(table: dict, key: dict) -> list[dict]:
    """The specification curve: one row per (headline, specification), with whether the
    headline's conclusion holds there. Headlines: attribution and patching above chance, and the
    gap (patching minus attribution, same choices) above zero."""
    rows = []
    cache: dict = {}
    memo: dict = {}

    def value(spec, method):
        k = (method, spec["floor"], spec["key"], spec["aggregation"], spec["metric"])
        if k not in cache:
            cache[k] = headline(table, key, spec, method, memo=memo)
        return cache[k]

    for spec in specifications("attribution"):
        v, c = value(spec, "attribution"), chance_level(table, key, spec)
        rows.append(_row("attribution", spec, "", v, c, v > c))
    for spec in specifications("patching"):
        v, c = value(spec, _method(spec)), chance_level(table, key, spec)
        rows.append(_row("patching", spec, spec["mode"], v, c, v > c))
    for spec in specifications("patching"):
        gap = value(spec, _method(spec)) - value(spec, "attribution")
        rows.append(_row("gap", spec, spec["mode"], gap, 0.0, gap > 0))
    return rows


def _row(headline_name, spec, mode, value, reference, holds) -> dict:
    return {"headline": headline_name, "floor": spec["floor"], "key": spec["key"],
            "aggregation": spec["aggregation"], "metric": spec["metric"], "mode": mode or "none",
            "primary": all(spec[a] == PRIMARY[a] for a in spec),
            "value": value, "reference": reference, "holds": bool(holds)}


def curve_summary(rows: list[dict]) -> dict:
    """Per headline: how many specifications, the share in which its conclusion holds, and the
    spread of its value (min, median, max)."""
    out = {}
    conclusions = {"attribution": "attribution recovers the key better than chance",
                   "patching": "patching recovers the key better than chance",
                   "gap": "patching recovers the key better than attribution (gap above zero)"}
    for name in ("attribution", "patching", "gap"):
        mine = [r for r in rows if r["headline"] == name]
        values = sorted(r["value"] for r in mine if not math.isnan(r["value"]))
        share = sum(1 for r in mine if r["holds"]) / len(mine)
        block = {"conclusion": conclusions[name], "specifications": len(mine), "share": share,
                 "robust": share >= ROBUST_SHARE, "min": values[0], "median": _median(values), "max": values[-1]}
        if name == "gap":
            block["share_attribution_ahead"] = sum(1 for r in mine if r["value"] < 0) / len(mine)
        out[name] = block
    return out


def _median(values: list[float]) -> float:
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


# ---------------------------------------------------------------- the primary specification

def _groups(key: dict, table: dict) -> dict:
    """{family: {organism: {dimension: [seeds]}}}."""
    groups: dict = {}
    for d, spec in sorted(key["dimensions"].items()):
        if d not in table:
            raise rankstats.FixtureError("key.json", None, f"dimension {d} has no rows")
        groups.setdefault(spec["family"], {}).setdefault(spec["organism"], {})[d] = sorted(table[d]["seeds"])
    return groups


def _primary_values(table, key, units) -> dict:
    """Every method's headline at the primary specification over `units` ((dimension, seeds)),
    and each patching mode's gap to attribution: the point estimates and each resample's."""
    spec = dict(PRIMARY)
    out = {m: headline(table, key, spec, m, units) for m in METHODS}
    for m in METHODS[1:]:
        out[f"gap_{m.split('_', 1)[1]}"] = out[m] - out["attribution"]
    return out


def _trap_values(table: dict, key: dict) -> dict:
    """Per trap and method: the mean top-k inclusion (k the circuit key's size, primary floor
    and aggregation) of the trap's key members or distractors, over every instance."""
    collected: dict = {t: {m: [] for m in METHODS} for t in TRAPS}
    roles_seen: dict = {m: {} for m in METHODS}
    for d, spec in sorted(key["dimensions"].items()):
        entry = table[d]
        names = entry["components"]
        k = len(spec["keys"]["circuit"])
        for m in METHODS:
            s = scores(entry, sorted(entry["seeds"]), m, PRIMARY["aggregation"], PRIMARY["floor"])
            inclusion = dict(zip(names, rankstats.topk_inclusion(s, k)))
            for which in ("members", "distractors"):
                block = spec["roles"] if which == "members" else spec.get("distractors", {})
                for c, info in block.items():
                    roles_seen[m].setdefault(info["role"], []).append(inclusion[c])
                    for trap, (kind, roles) in TRAPS.items():
                        if kind == which and info["role"] in roles:
                            collected[trap][m].append(inclusion[c])
    traps = {t: {m: _mean(v) if v else None for m, v in by.items()} for t, by in collected.items()}
    roles = {r: {m: _mean(roles_seen[m].get(r, [])) for m in METHODS} for r in sorted(roles_seen["attribution"])}
    return {"traps": traps, "by_role": roles}


def _background(table: dict, key: dict) -> dict:
    """Mean-mode patch scores and attribution scores (per-pair magnitude, no floor) of the
    components outside each key, beside the minor carriers' (the weakest designed members)."""
    out = {}
    for method in ("attribution", "patching_mean"):
        background, minor = [], []
        for d, spec in sorted(key["dimensions"].items()):
            entry = table[d]
            s = dict(zip(entry["components"], scores(entry, sorted(entry["seeds"]), method, "magnitude", 0.0)))
            members = set(spec["keys"]["circuit"])
            background += [v for c, v in s.items() if c not in members]
            carriers = [c for c, info in spec["roles"].items() if info["role"] == "carrier"]
            if carriers:
                minor.append(s[min(carriers, key=lambda c: (abs(spec["roles"][c]["shapley"]), c))])
        background.sort()
        minor.sort()
        threshold = _median(minor)
        out[method] = {"background": _quantiles(background), "minor_carriers": _quantiles(minor),
                       "share_above_minor_carrier_median": sum(1 for v in background if v >= threshold) / len(background)}
    return out


def _quantiles(values: list[float]) -> dict:
    def q(p):
        return values[min(len(values) - 1, int(p * (len(values) - 1) + 0.5))]
    return {"n": len(values), "p10": q(0.1), "p50": q(0.5), "p90": q(0.9), "max": values[-1]}


def point(table: dict, key: dict, rows: list[dict] | None = None) -> dict:
    """Every point estimate of the key-recovery block (`rows`: the specification curve's, when
    already computed)."""
    groups = _groups(key, table)
    dims = sorted(key["dimensions"])
    primary = _primary_values(table, key, _every_unit(table, key))
    per_family = {f: _primary_values(table, key, _every_unit(table, key, [d for o in orgs.values() for d in o]))
                  for f, orgs in groups.items()}
    per_organism = {o: _primary_values(table, key, _every_unit(table, key, list(ds)))
                    for orgs in groups.values() for o, ds in orgs.items()}
    mechanisms = sorted({spec["mechanism"] for spec in key["dimensions"].values()})
    per_mechanism = {mech: _primary_values(table, key, _every_unit(table, key, [d for d in dims
                                                                             if key["dimensions"][d]["mechanism"] == mech]))
                     for mech in mechanisms}
    curve = curve_summary(rows if rows is not None else spec_rows(table, key))
    background = _background(table, key)
    out = {
        "headline": {
            "attribution": {"value": primary["attribution"], "share": curve["attribution"]["share"]},
            "patching": {"value": primary["patching_mean"], "share": curve["patching"]["share"]},
            "gap": {"value": primary["gap_mean"], "share_patching_ahead": curve["gap"]["share"],
                    "share_attribution_ahead": curve["gap"]["share_attribution_ahead"]},
        },
        "by_method": {m: {"value": primary[m], "per_family": {f: v[m] for f, v in per_family.items()},
                          "per_organism": {o: v[m] for o, v in per_organism.items()},
                          "per_mechanism": {k: v[m] for k, v in per_mechanism.items()}} for m in METHODS},
        "gap": {mode: {"value": primary[f"gap_{mode}"], "per_family": {f: v[f"gap_{mode}"] for f, v in per_family.items()}}
                for mode in MODES},
        "by_family": {f: dict({m: v[m] for m in METHODS}, gap_mean=v["gap_mean"]) for f, v in per_family.items()},
        "by_organism": {o: dict({m: v[m] for m in METHODS}, gap_mean=v["gap_mean"]) for o, v in per_organism.items()},
        "by_mechanism": {k: dict({m: v[m] for m in METHODS}, gap_mean=v["gap_mean"]) for k, v in per_mechanism.items()},
        "spec_curve": curve,
        "background": background,
        "overlap": {"share": background["patching_mean"]["share_above_minor_carrier_median"],
                    "minimum": OVERLAP_MIN_SHARE,
                    "holds": background["patching_mean"]["share_above_minor_carrier_median"] >= OVERLAP_MIN_SHARE},
        **_trap_values(table, key),
    }
    return out


def _resample(groups: dict, rng: random.Random, families: bool) -> dict:
    """{dimension: [seeds]} of one resample; a dimension drawn twice gets a suffix."""
    out = {}
    names = sorted(groups)
    drawn = [rng.choice(names) for _ in names] if families else names
    for fi, family in enumerate(drawn):
        orgs = sorted(groups[family])
        for oi, org in enumerate(rng.choice(orgs) for _ in orgs):
            for d, seeds in sorted(groups[family][org].items()):
                out[(d, fi, oi)] = [rng.choice(seeds) for _ in seeds]
    return out


def _boot(table, key, groups, boot, families: bool) -> dict:
    """Percentile intervals of every primary value over resamples of `groups` (families too
    when `families`), each computed as the point estimates are (`_primary_values`)."""
    rng = random.Random(boot["seed"])
    collected: dict = {}
    for _ in range(boot["resamples"]):
        units = [(d, seeds) for (d, _f, _o), seeds in _resample(groups, rng, families).items()]
        for name, v in _primary_values(table, key, units).items():
            collected.setdefault(name, []).append(v)
    return {name: list(rankstats.percentile_interval(v, boot["level"])) for name, v in collected.items()}


def summary(attribution_rows, patching_rows, key: dict, bootstrap: dict | None = None) -> dict:
    """The `key_recovery` block of golden.json (point estimates and intervals)."""
    boot = dict(BOOTSTRAP, **(bootstrap or {}))
    table = pair_table(attribution_rows, patching_rows)
    groups = _groups(key, table)
    out = point(table, key)
    overall = _boot(table, key, groups, boot, families=True)
    out["headline"]["attribution"]["ci"] = overall["attribution"]
    out["headline"]["patching"]["ci"] = overall["patching_mean"]
    out["headline"]["gap"]["ci"] = overall["gap_mean"]
    for m in METHODS:
        out["by_method"][m]["ci"] = overall[m]
        out["by_method"][m]["ci_per_family"] = {}
    for mode in MODES:
        out["gap"][mode]["ci"] = overall[f"gap_{mode}"]
        out["gap"][mode]["ci_per_family"] = {}
    for family in sorted(groups):
        within = _boot(table, key, {family: groups[family]}, boot, families=False)
        for m in METHODS:
            out["by_method"][m]["ci_per_family"][family] = within[m]
        for mode in MODES:
            out["gap"][mode]["ci_per_family"][family] = within[f"gap_{mode}"]
    out["intervals_excluding_estimate"] = excluding_estimate(out)
    dims = key["dimensions"]
    return {"universe": key.get("universe", "head and mlp components"),
            "universe_size": {f: len(table[next(d for d in sorted(dims) if dims[d]["family"] == f)]["components"])
                              for f in sorted(groups)},
            "methods": list(METHODS), "families": len(groups),
            "organisms": sum(len(o) for o in groups.values()), "dimensions": len(dims),
            "n_effective": sum(len(s) for o in groups.values() for ds in o.values() for s in ds.values()),
            "primary": dict(PRIMARY), "grid": {a: list(v) for a, v in GRID.items()},
            "robust_share": ROBUST_SHARE,
            "interval": (f"{int(boot['level'] * 100)}% percentile, {boot['resamples']} resamples "
                         f"(seed {boot['seed']}): families with replacement, then organisms within each "
                         "drawn family, then seed pairs within each rule; per family, organisms then pairs"),
            **out}


def excluding_estimate(block: dict) -> list[str]:
    """Every interval of the block that does not contain its own estimate (a percentile interval
    of a statistic that resampling biases: duplicated pairs average less of the background out).
    Labels name the estimate, e.g. `by_method/attribution/per_family/deep`."""
    out = []
    for path, value in _flat(block):
        if len(path) >= 2 and path[-2] in ("per_family",) or path[-1] == "value":
            ci_path = path[:-2] + ("ci_per_family", path[-1]) if path[-2] == "per_family" else path[:-1] + ("ci",)
            node = block
            for k in ci_path:
                node = node.get(k) if isinstance(node, dict) else None
            if isinstance(node, list) and len(node) == 2 and not node[0] <= value <= node[1]:
                out.append("/".join(path))
    return sorted(out)


# ---------------------------------------------------------------- reproduce.py's check

def _flat(block, prefix=()):
    if isinstance(block, dict):
        for k, v in block.items():
            yield from _flat(v, prefix + (k,))
    elif isinstance(block, (int, float)) and not isinstance(block, bool):
        yield prefix, float(block)


def recompute(attribution_rows, patching_rows, key: dict) -> dict:
    """The point estimates and the specification curve's rows, from the rows and the key: what
    `check` and `check_spec_rows` compare (computed once when both are asked)."""
    table = pair_table(attribution_rows, patching_rows)
    rows = spec_rows(table, key)
    return {"point": point(table, key, rows), "spec_rows": rows}


def check(attribution_rows, patching_rows, key: dict, published: dict, tolerance: float,
          recomputed: dict | None = None):
    """Recompute every point estimate of `published` (golden.json's key_recovery block) from the
    rows and the key (or take `recompute`'s); returns (report lines, [(disagreement, key path)], ok)."""
    mine = (recomputed or recompute(attribution_rows, patching_rows, key))["point"]
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
    lines = ["key recovery at the primary specification "
             f"(floor {PRIMARY['floor']}, key {PRIMARY['key']}, {PRIMARY['aggregation']} scores, "
             f"{PRIMARY['metric']}, {PRIMARY['mode']} mode; chance 0.5)", ""]
    table_rows = [["family"] + list(METHODS)]
    for family, values in sorted(mine["by_family"].items()):
        table_rows.append([family] + [f"{values[m]:.6f}" for m in METHODS])
    table_rows.append(["all"] + [f"{mine['by_method'][m]['value']:.6f}" for m in METHODS])
    widths = [max(len(r[i]) for r in table_rows) for i in range(len(table_rows[0]))]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
              for r in table_rows]
    curve = mine["spec_curve"]
    lines += ["", f"gap, mean-mode patching minus attribution  {mine['headline']['gap']['value']:+.6f}",
              "specification curve: share of specifications in which the conclusion holds"]
    for name in ("attribution", "patching", "gap"):
        lines.append(f"  {curve[name]['conclusion']}: {curve[name]['share']:.4f} of {curve[name]['specifications']}")
    worst = max(comparisons)[0] if comparisons else 0.0
    ok = all(d <= tolerance for d, _ in comparisons)
    lines += [f"key-recovery values compared  {len(comparisons)} (intervals are not recomputed)",
              f"largest disagreement          {worst:.2e}" if math.isfinite(worst) else "largest disagreement          missing value"]
    return lines, comparisons, ok


def check_spec_rows(attribution_rows, patching_rows, key: dict, published_rows: list[dict], tolerance: float,
                    recomputed: dict | None = None):
    """Recompute `spec_curve.jsonl` row by row (or take `recompute`'s rows); returns
    ([(disagreement, 'spec_curve.jsonl:LINE')], ok)."""
    mine = recomputed["spec_rows"] if recomputed else spec_rows(pair_table(attribution_rows, patching_rows), key)
    out = []
    if len(mine) != len(published_rows):
        return [(math.inf, f"spec_curve.jsonl: {len(published_rows)} rows, {len(mine)} specifications")], False
    for n, (a, b) in enumerate(zip(mine, published_rows), start=1):
        same = all(a[f] == b.get(f) for f in ("headline", "floor", "key", "aggregation", "metric", "mode", "primary", "holds"))
        diffs = [abs(a[f] - b[f]) if isinstance(b.get(f), (int, float)) and not math.isnan(a[f]) else
                 (0.0 if math.isnan(a[f]) and b.get(f) is None else math.inf) for f in ("value", "reference")]
        out.append((max(diffs) if same else math.inf, f"spec_curve.jsonl:{b.get('_line', n)}"))
    return out, all(d <= tolerance for d, _ in out)
