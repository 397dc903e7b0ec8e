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
# A bundle's rows: one a (dimension, pair), every component's attribution and effect in each mode
# as lists in `components` order (a contract row per component and mode would be 15 times larger).
ROWS_FILE = "hiddenkeys_per_pair.jsonl"   # reproduce.py HIDDEN_KEYS_ROWS
MODES = ("mean", "zero", "swap")


def in_universe(component: str) -> bool:
    """A head or an MLP: the components a key is drawn from (attention blocks are sums of heads)."""
    return component.startswith("head_") or component.startswith("mlp_")


GRID = {"mode": ("mean", "zero", "swap"), "patch_score": ("ratio_of_means", "mean_ratio"),
        "attribution": ("abs_mean", "mean_abs"), "floor": (0.0, 0.01, 0.05)}
PRIMARY = {"mode": "mean", "patch_score": "ratio_of_means", "attribution": "abs_mean", "floor": 0.0}
ROBUST_SHARE = 0.9


def specifications(modes=MODES) -> list[dict]:
    """Every combination of GRID's choices in the patching `modes` measured, the primary first."""
    import itertools
    grid = [dict(zip(GRID, values)) for values in itertools.product(*GRID.values())]
    return [PRIMARY] + [spec for spec in grid if spec != PRIMARY and spec["mode"] in modes]


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
        out["attribution"][component] = attribution
        out["patching"][component] = patching
    return floored(out, spec["floor"])


def floored(method_scores: dict[str, dict[str, float]], floor: float) -> dict[str, dict[str, float]]:
    """The scores with every one under `floor` counted as zero."""
    return {m: {c: (v if v >= floor else 0.0) for c, v in by.items()} for m, by in method_scores.items()}


def wide_rows(attribution_rows, patching_rows, modes=MODES) -> list[dict]:
    """The bundle's rows (ROWS_FILE) from contract rows of the universe's components: one row a
    (dimension, pair), sorted; every component needs an attribution and an effect in each of
    `modes` (the patching modes measured; the mean mode at least)."""
    pairs: dict[tuple, dict] = {}
    for r in attribution_rows:
        if in_universe(r["component"]):
            row = pairs.setdefault((r["dimension"], r["pair_id"]), {
                "dimension": r["dimension"], "pair_id": r["pair_id"], "seed_id": r["seed_id"],
                "clean_margin": r["margin"], "values": {}})
            row["values"].setdefault(r["component"], {})["attribution"] = r["attribution"]
    for r in patching_rows:
        if in_universe(r["component"]) and r["mode"] in modes:
            row = pairs[(r["dimension"], r["pair_id"])]
            if r["clean_margin"] != row["clean_margin"]:
                raise ValueError(f"pair {r['pair_id']}: patching's clean margin {r['clean_margin']} is not attribution's {row['clean_margin']}")
            row["values"][r["component"]][r["mode"]] = r["effect"]
    out = []
    for key in sorted(pairs):
        row = pairs[key]
        values = row.pop("values")
        names = sorted(values)
        for c in names:
            missing = [f for f in ("attribution", *modes) if f not in values[c]]
            if missing:
                raise ValueError(f"pair {row['pair_id']}, {c}: no {', '.join(missing)}")
        out.append({**row, "components": names,
                    **{f: [values[c][f] for c in names] for f in ("attribution", *modes)}})
    return out


def measured_modes(row: dict) -> tuple[str, ...]:
    """The patching modes a ROWS_FILE row holds."""
    return tuple(m for m in MODES if m in row)


def long_rows(rows) -> tuple[list[dict], list[dict]]:
    """(attribution rows, patching rows) with the fields `scores` reads, from ROWS_FILE's rows."""
    attribution, patching = [], []
    for row in rows:
        head = {"dimension": row["dimension"], "pair_id": row["pair_id"], "seed_id": row["seed_id"]}
        for k, c in enumerate(row["components"]):
            attribution.append({**head, "component": c, "attribution": row["attribution"][k],
                                "margin": row["clean_margin"]})
            for mode in measured_modes(row):
                patching.append({**head, "component": c, "mode": mode, "clean_margin": row["clean_margin"],
                                 "effect": row[mode][k]})
    return attribution, patching


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
    """One organism's recovery of its key and, on its null twins, of each decoy; with every
    component's two scores on each set of twins (so a bundle's check sees any changed row)."""
    return judged(scores(attribution_rows, patching_rows, keyed_dimension, spec),
                  scores(attribution_rows, patching_rows, null_dimension, spec), key, decoys)


def judged(keyed_scores: dict, null_scores: dict, key, decoys) -> dict:
    """`organism` from the scores on the keyed twins and on the null twins."""
    real = recovery(keyed_scores, key)
    by_decoy = [recovery(null_scores, decoy) for decoy in decoys]
    null = {m: rankstats.mean(d[m] for d in by_decoy) for m in METHODS}
    return {**{m: real[m] for m in METHODS}, "gap": real["patching"] - real["attribution"],
            "null": null, "key_on_null": recovery(null_scores, key),
            "scores": {"keyed": keyed_scores, "null": null_scores}}


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
            "validity": {"void_share": void_share, "failed": failed},
            # the key verification the site's calibrated rung asks for: every organism the
            # headline counts passed the validation (by neither method); the void ones are listed
            "key_check": {"organisms": len(names), "passed": len(kept), "all_pass": bool(kept),
                          "void": [n for n in names if not valid[n]]}}


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


def by_rule(organisms: dict[str, dict], valid: dict[str, bool], rules: dict[str, str],
            interval: dict = INTERVAL) -> dict:
    """Each method's recovery over all valid organisms and per keyed rule ({organism: rule}), each
    with an interval resampling that set's organisms: {method: {value, ci, per_family,
    ci_per_family}} (the shape of the site's key-recovery figure)."""
    def point_and_ci(names: list[str], method: str) -> tuple[float, list[float]]:
        rng = random.Random(interval["seed"])
        draws = [rankstats.mean(organisms[rng.choice(names)][method] for _ in names) for _ in range(interval["resamples"])]
        return (rankstats.mean(organisms[n][method] for n in names),
                list(rankstats.percentile_interval(draws, interval["level"])))
    kept = [n for n in sorted(organisms) if valid[n]]
    out = {}
    for method in METHODS:
        value, ci = point_and_ci(kept, method)
        per = {rule: point_and_ci([n for n in kept if rules[n] == rule], method)
               for rule in sorted({rules[n] for n in kept})}
        out[method] = {"value": value, "ci": ci, "per_family": {r: v for r, (v, _c) in per.items()},
                       "ci_per_family": {r: c for r, (_v, c) in per.items()}}
    return out


def recompute(rows, key_doc: dict) -> dict:
    """Everything the bundle publishes, from ROWS_FILE's rows and key.json ({"organisms": {name:
    {keyed, keyed_dimension, null_dimension, key, decoys, valid}}}): the primary's blocks, the
    specification curve, order_claimed, the per-rule breakdown and each organism's result."""
    attribution, patching = long_rows(rows)
    by_dimension: dict[str, tuple[list, list]] = {}
    for r in attribution:
        by_dimension.setdefault(r["dimension"], ([], []))[0].append(r)
    for r in patching:
        by_dimension.setdefault(r["dimension"], ([], []))[1].append(r)
    organisms = key_doc["organisms"]
    missing = sorted(d for o in organisms.values() for d in (o["keyed_dimension"], o["null_dimension"])
                     if d not in by_dimension)
    if missing:
        raise ValueError(f"{ROWS_FILE} has no rows of dimension(s) {', '.join(missing)}")

    unfloored: dict[tuple, dict] = {}   # a dimension's scores under each choice but the floor, computed once

    def at(dimension: str, spec: dict) -> dict:
        choice = (dimension, spec["mode"], spec["patch_score"], spec["attribution"])
        if choice not in unfloored:
            unfloored[choice] = scores(*by_dimension[dimension], dimension, dict(spec, floor=0.0))
        return floored(unfloored[choice], spec["floor"])

    def one(name: str, spec: dict) -> dict:
        o = organisms[name]
        return judged(at(o["keyed_dimension"], spec), at(o["null_dimension"], spec), o["key"], o["decoys"])
    modes = measured_modes(rows[0]) if rows else MODES
    by_spec = {spec_name(spec): {name: one(name, spec) for name in organisms} for spec in specifications(modes)}
    valid = {name: bool(o["valid"]) for name, o in organisms.items()}
    primary = by_spec[spec_name(PRIMARY)]
    block = summary(primary, valid)
    curve = spec_curve(by_spec, valid)
    return {"summary": block, "curve": curve, "order_claimed": order_claimed(block, curve),
            "by_rule": by_rule(primary, valid, {n: o["keyed"] for n, o in organisms.items()}),
            "organisms": primary, "by_spec": by_spec}


CONCLUSIONS = {"gap": "patching ahead", "attribution": "above chance", "patching": "above chance"}


def golden_blocks(result: dict, key_doc: dict) -> dict:
    """What a bundle's golden.json holds of `recompute`'s result: `key_recovery` (with the
    specification curve's shares, the per-rule breakdown as `by_method` and `order_claimed`),
    `null`, `validity`, `key_check`, each organism's figures, and `transfer` when key.json names a
    reference study."""
    curve = result["curve"]
    summary_block = result["summary"]
    return {
        "key_recovery": {**summary_block["key_recovery"], "order_claimed": int(result["order_claimed"]),
                         "robust_share": ROBUST_SHARE, "by_method": result["by_rule"],
                         "spec_curve": {h: {"share": curve["share_agreeing"][h], "specifications": curve["specifications"],
                                            "conclusion": CONCLUSIONS[h]} for h in CONCLUSIONS}},
        **{k: summary_block[k] for k in ("null", "validity", "key_check")},
        "organisms": {name: {"keyed": key_doc["organisms"][name]["keyed"], "valid": key_doc["organisms"][name]["valid"],
                             **o} for name, o in result["organisms"].items()},
        **({"transfer": transfer(result, key_doc)} if "reference" in key_doc else {}),
        **({"relay": relay(key_doc)} if any("check" in o for o in key_doc["organisms"].values()) else {}),
    }


def relay(key_doc: dict) -> dict:
    """How much of a key's margin other components carry, from each valid organism's check in
    key.json: the mean sufficiency (the margin left with everything but the key resampled) and
    leak (the largest change one other component makes), and how often each component is the
    one that leaks most."""
    checks = [o["check"] for o in key_doc["organisms"].values() if o["valid"]]
    if not checks:
        return {"organisms": 0}
    where: dict[str, int] = {}
    for c in checks:
        where[c["leak_component"]] = where.get(c["leak_component"], 0) + 1
    return {"organisms": len(checks), "sufficiency": rankstats.mean(c["sufficiency"] for c in checks),
            "leak": rankstats.mean(c["leak"] for c in checks),
            "leak_component": {k: where[k] for k in sorted(where)}}


def transfer(result: dict, key_doc: dict) -> dict:
    """The equivalence test of this study's valid organisms' gaps against the reference study's
    (key.json `reference`: its gaps and the registered bound); `inside` is 1 when it transfers."""
    gaps = [o["gap"] for name, o in sorted(result["organisms"].items()) if key_doc["organisms"][name]["valid"]]
    ref = key_doc["reference"]
    block = equivalence(gaps, ref["gaps"], ref["bound"])
    return {**block, "inside": int(block["verdict"] == "transfers")}


SPEC_LABELS = {"abs_mean": "signed", "mean_abs": "magnitude"}   # the site figure's names for the aggregations


# The choices each headline depends on (the others leave its value unchanged, so its rows say "none").
DEPENDS = {"attribution": ("floor", "attribution"), "patching": ("floor", "mode", "patch_score"),
           "gap": tuple(GRID)}


def spec_rows(curve: dict) -> list[dict]:
    """The specification curve as the site's figure reads it: one row a headline and distinct
    specification of the choices it depends on (DEPENDS), each as often as in `curve`'s shares."""
    out, seen = [], set()
    reference = {"attribution": 0.5, "patching": 0.5, "gap": 0.0}
    for row in curve["rows"]:
        spec = dict(part.split("=", 1) for part in row["spec"].split("/"))
        for headline in ("gap", "attribution", "patching"):
            chosen = {k: (spec[k] if k in DEPENDS[headline] else "none") for k in GRID}
            ident = (headline, *chosen.values())
            if ident in seen:
                continue
            seen.add(ident)
            value = row[headline]
            out.append({"headline": headline, "floor": float(spec["floor"]), "key": "trained",
                        "aggregation": SPEC_LABELS.get(chosen["attribution"], "none"), "metric": "auc",
                        "mode": chosen["mode"], "patch_score": chosen["patch_score"], "primary": row["primary"],
                        "value": value, "reference": reference[headline], "holds": value > reference[headline]})
    return out


def equivalence(gaps: list[float], reference: list[float], bound: float, interval: dict = INTERVAL) -> dict:
    """Two one-sided tests of whether the mean gap over `gaps` (one a valid organism of one study)
    equals that over `reference` (another study's) within +/- `bound`: the difference of the
    means, its interval (each study's organisms resampled with replacement, independently; the
    two one-sided tests at level (1 - interval level) / 2 each), and the verdict: "transfers"
    when the interval lies inside (-bound, bound), "fails" when it lies wholly outside that band
    or the two means have opposite signs with neither interval holding zero (a flipped sign fails
    even inside the band), else "inconclusive"."""
    if not gaps or not reference:
        raise ValueError("equivalence needs at least one organism on each side")
    rng = random.Random(interval["seed"])
    draws = [rankstats.mean(rng.choice(gaps) for _ in gaps) - rankstats.mean(rng.choice(reference) for _ in reference)
             for _ in range(interval["resamples"])]
    lo, hi = rankstats.percentile_interval(draws, interval["level"])

    def own(values: list[float]) -> tuple[float, float]:
        r = random.Random(interval["seed"])
        return rankstats.percentile_interval(
            [rankstats.mean(r.choice(values) for _ in values) for _ in range(interval["resamples"])], interval["level"])
    a, b = own(gaps), own(reference)
    flipped = (a[0] > 0 and b[1] < 0) or (a[1] < 0 and b[0] > 0)
    verdict = ("fails" if lo >= bound or hi <= -bound or flipped else
               "transfers" if -bound < lo and hi < bound else "inconclusive")
    return {"difference": rankstats.mean(gaps) - rankstats.mean(reference), "interval": [lo, hi],
            "bound": bound, "verdict": verdict, "gap": rankstats.mean(gaps), "gap_interval": list(a),
            "reference_gap": rankstats.mean(reference), "reference_interval": list(b)}


def order_claimed(summary_block: dict, curve: dict) -> bool:
    """Whether an order between the methods may be stated: the primary gap's interval excludes
    zero and at least ROBUST_SHARE of the specifications agree on its sign."""
    lo, hi = summary_block["key_recovery"]["gap"]["interval"]
    return (lo > 0 or hi < 0) and curve["share_agreeing"]["gap"] >= ROBUST_SHARE
