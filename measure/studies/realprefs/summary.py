"""golden.json of the realprefs study, from the bundle's files as written.

Every point estimate comes from `bundle_kit.localize.headline` (the function the bundle's
`reproduce.py` recomputes them with): accuracy and the baselines, the preregistered test, where
each objective lives (`where`), agreement of attribution with patching, the relation between
helpfulness and harmlessness, the per-component tables and the random-direction null. The
quantity keys the registrations read are listed in docs/realprefs-plan.md.

Added here: the counts; `per_dimension_rho`/`mean_rho` (the block rhos, which every bundle's
generic check recomputes); the intervals (95 % percentile, `BOOTSTRAP` resamples of the groups,
`rankstats.seed_bootstrap`), computed from the shards' per-pair rows (the heads' are kept in the
bundle as sums only, so their AUC interval is not recomputable from the bundle); the
off-distribution counts; the decomposition's sum gap and the gap between the instruments' margins
and the held-out scoring's; the definitions in words.
"""
from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np

from bundle_kit import localize, rankstats
from bundle_kit.contract import GOLDEN, KINDS_COMPARED, README, TOLERANCE

from measure.errors import MeasureError
from measure.instruments import offdist
from measure.runner.jsonio import fixed, json_text
from measure.runner.rows import attribution_gap
from measure.runner.summary import BOOTSTRAP
from measure.studies.realprefs.baselines import group_bootstrap
from measure.studies.realprefs.grid import STUDY, trained_blocks
from measure.studies.realprefs.readme import bundle_readme
from measure.studies.realprefs.shard import block_names, head_names

DEFINITIONS = {
    "patch_score": "ratio_of_means: sum |effect| / sum |clean margin| over the objective's instrument pairs "
                   "(docs/statistics.md)",
    "order": "blocks by mean-mode patch score, largest first, ties in model order",
    "curve": "removed share of the first k blocks patched together (mean mode), k = 1..n: "
             "1 - sum(patched margin) / sum(clean margin)",
    "k80": f"smallest k whose removed share reaches {localize.TARGET}; n + 1 when none does",
    "moved": "the patch score of a set patched together: sum |patched - clean margin| / sum |clean margin|",
    "trained_layers_share": "the trained blocks' share of the sum of the blocks' mean patch scores",
    "auc_heads": f"AUC of the heads' attribution scores against the {localize.TOP_HEADS} heads with the highest "
                 "mean patch scores (ties in model order)",
    "null": f"the same statistics along random unit directions through the same passes; band = 5th to 95th "
            f"percentile over the directions; at_or_above = share of directions at or above the head's value",
    "interval": f"{int(BOOTSTRAP['level'] * 100)}% percentile, {BOOTSTRAP['resamples']} resamples of the "
                f"objective's groups with replacement (rankstats.seed_bootstrap, seed {BOOTSTRAP['seed']})",
    "accuracy": "mean score over the evaluation pairs (1 margin > 0, 0.5 zero, 0 negative)",
    "test": "per group, sum of (model score - best baseline's score): win above 0, loss below; one-sided exact "
            f"sign test; Holm over the objectives at {localize.ALPHA}",
}


def _clean(value):
    """NaN and infinity as null (golden.json holds finite numbers only)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def summarise(plan, staging: Path, put) -> dict:
    """golden.json and README.md of the bundle staged in `staging` (written with `put`); returns
    golden.json's content."""
    from measure.runner.study import joined_rows

    adapter = plan.adapter
    blocks, heads = block_names(adapter.n_layers), head_names(adapter.n_layers, adapter.n_heads)
    trained = trained_blocks(adapter.n_layers)
    files = localize.read(str(staging))
    check_size(staging)
    answer = localize.headline(files, trained)
    objectives = list(answer["where"])
    head_rows = joined_rows(plan)["heads"]  # per pair, as the shards hold them
    accuracy = {o: accuracy_intervals(o, files, answer) for o in objectives}
    answer["relation"]["both_above_chance"] = int(all(
        accuracy[o]["accuracy"][0] > 0.5 for o in ("helpfulness", "harmlessness") if o in accuracy))
    golden = {
        "study": STUDY, "model": adapter.model_id, "rank_mode": localize.MODE, "patch_score": "ratio_of_means",
        "tolerance": TOLERANCE,
        "components_compared": "attn and mlp blocks (embed is attributed, not patched); heads in agreement/auc_heads",
        "counts": counts(plan, files, objectives, blocks, heads),
        "mean_rho": answer["agreement"]["mean_rho"],
        "per_dimension_rho": {o: answer["agreement"][o]["rho"] for o in objectives},
        "kinds_compared": KINDS_COMPARED,
        "structure": {"blocks": blocks, "heads": heads, "trained_blocks": trained, "target": localize.TARGET,
                      "top_blocks": localize.TOP_BLOCKS, "top_heads": localize.TOP_HEADS},
        **answer,
        "intervals": {o: {**accuracy[o], **intervals(o, files, head_rows, answer, blocks, trained)}
                      for o in objectives},
        "offdist": offdist_counts(files, blocks),
        "attribution_sum_gap": attribution_gap(files["attribution"]),
        "null_attribution_sum_gap": null_gap(files["null"]),
        "margin_gap": margin_gap(files),
        "definitions": DEFINITIONS,
        "identity": plan.identity,
    }
    golden = fixed(_clean(golden), 6)
    put(GOLDEN, json_text(golden))
    put(README, bundle_readme(golden))
    return golden


BUNDLE_LIMIT = 20_000_000  # bytes: the bundle folder's budget (issue 30), golden.json and README.md included
SUMMARY_ROOM = 400_000     # what golden.json and README.md may take, beside the files already staged


def check_size(staging: Path) -> None:
    """Refuse a bundle over BUNDLE_LIMIT, in one line naming its largest file, before anything is
    swapped in (the shards stay: a smaller bundle needs no measurement again)."""
    sizes = {p.name: p.stat().st_size for p in Path(staging).iterdir() if p.is_file()}
    if sum(sizes.values()) + SUMMARY_ROOM > BUNDLE_LIMIT:
        largest = max(sizes, key=sizes.get)
        raise MeasureError(f"{staging.name}: the bundle would be over {BUNDLE_LIMIT // 1_000_000} MB "
                           f"({sum(sizes.values()):,} bytes before golden.json; largest {largest}, {sizes[largest]:,})")


def counts(plan, files: dict, objectives: list[str], blocks: list[str], heads: list[str]) -> dict:
    """How many of everything the bundle holds."""
    def per(rows):
        return {o: sum(1 for r in rows if r["dimension"] == o) for o in objectives}
    return {
        "pairs": len(plan.pairs), "instrument_pairs": per(plan.pairs), "eval_pairs": per(files["heldout"]),
        "groups": {o: len({p["seed_id"] for p in plan.pairs if p["dimension"] == o}) for o in objectives},
        "objectives": len(objectives), "blocks": len(blocks), "heads": len(heads),
        "null_directions": len({r["direction"] for r in files["null"]}),
        "attribution_rows": len(files["attribution"]), "patching_rows": len(files["patching"]),
        "blocks_rows": len(files["blocks"]), "curve_rows": len(files["curve"]),
        "heads_summary_rows": len(files["heads"]), "null_rows": len(files["null"]),
        "null_curve_rows": len(files["null_curve"]), "heldout_rows": len(files["heldout"]),
    }


def accuracy_intervals(objective: str, files: dict, answer: dict) -> dict:
    """95 % intervals of the objective's accuracy, of each baseline's and of the gain over the best
    baseline, over resamples of its evaluation groups: `baselines.group_bootstrap`, the resampling
    (and seed) `data/realprefs/baselines.json` states its baselines' intervals with."""
    held = [r for r in files["heldout"] if r["dimension"] == objective]
    groups = [r["seed_id"] for r in held]
    model = np.array([localize.score_of(r["margin"]) for r in held])
    base = {b: np.array([localize.score_of(r[f"margin_{b}"]) for r in held]) for b in localize.BASELINES}
    best = answer["test"][objective]["best"]
    return {"accuracy": list(group_bootstrap(model, groups)),
            "baselines": {b: list(group_bootstrap(v, groups)) for b, v in base.items()},
            "gain": list(group_bootstrap(model - base[best], groups))}


def intervals(objective: str, files: dict, head_rows: list[dict], answer: dict, blocks: list[str],
              trained: list[str]) -> dict:
    """The objective's intervals over resamples of its groups: the smallest set's removed and
    moved share and mean effect, the trained blocks' removed share, rho and the heads' AUC."""
    where = answer["where"][objective]
    k = min(where["k80"], len(blocks)) - 1
    mine = lambda rows: [r for r in rows if r["dimension"] == objective]  # noqa: E731
    curve = {r["pair_id"]: r for r in mine(files["curve"])}
    wide = {r["pair_id"]: r for r in mine(files["blocks"])}
    heads = {r["pair_id"]: r for r in mine(head_rows)}
    attribution, effect = {}, {}
    for r in mine(files["attribution"]):
        attribution.setdefault(r["pair_id"], {})[r["component"]] = r["attribution"]
    for r in mine(files["patching"]):
        effect.setdefault(r["pair_id"], {})[r["component"]] = abs(r["effect"])
    groups = sorted({r["seed_id"] for r in curve.values()})
    at = {g: i for i, g in enumerate(groups)}
    columns = 6 + 2 * len(blocks) + 2 * len(heads[next(iter(heads))]["attribution"])
    M = np.zeros((len(groups), columns))
    for pid, r in curve.items():
        m = r["margin"]
        vec = [1.0, m, abs(m), r["patched"][k], abs(r["patched"][k] - m), wide[pid]["trained_blocks"]]
        vec += [attribution[pid][c] for c in blocks] + [effect[pid][c] for c in blocks]
        vec += heads[pid]["attribution"] + [abs(e) for e in heads[pid]["effect"]]
        M[at[r["seed_id"]]] += np.array(vec, dtype=np.float64)
    nb, nh = len(blocks), (columns - 6 - 2 * len(blocks)) // 2
    head_names_ = [f"h{i}" for i in range(nh)]

    def totals(seeds):
        return np.bincount([at[s] for s in seeds], minlength=len(groups)) @ M

    def stat(fn):
        return list(rankstats.seed_bootstrap(groups, lambda seeds: fn(totals(seeds)), **BOOTSTRAP))

    def rho(t):
        return rankstats.spearman(list(t[6:6 + nb] / t[0]), list(t[6 + nb:6 + 2 * nb] / t[2]))

    def auc(t):
        a = t[6 + 2 * nb:6 + 2 * nb + nh] / t[0]
        p = t[6 + 2 * nb + nh:] / t[2]
        return localize.top_auc(dict(zip(head_names_, a)), dict(zip(head_names_, p)), head_names_)

    return {
        "groups": len(groups),
        "smallest_set_removed": stat(lambda t: localize.removed_share(t[3], t[1])),
        "smallest_set_moved": stat(lambda t: localize.patch_score(t[4], t[2])),
        "smallest_set_mean_effect": stat(lambda t: (t[3] - t[1]) / t[0]),
        "trained_layers_removed": stat(lambda t: localize.removed_share(t[5], t[1])),
        "rho": stat(rho),
        "auc_heads": stat(auc),
    }


def offdist_counts(files: dict, blocks: list[str]) -> dict:
    """Effects scored and flagged per mode (blocks; heads in mean mode), per objective and overall."""
    out: dict = {"statistic": offdist.STATISTIC["pooled"], "threshold": offdist.THRESHOLD, "per_objective": {}}
    for o in dict.fromkeys(r["dimension"] for r in files["patching"]):
        block = {"mean": Counter(), "resample": Counter(), "swap": Counter()}
        for r in files["patching"]:
            if r["dimension"] == o and r["offdist_z"] is not None:
                block["mean"][r["component"]] += int(r["offdist_flag"])
        for r in files["blocks"]:
            if r["dimension"] == o:
                for mode in ("resample", "swap"):
                    for c, z in zip(blocks, r[f"{mode}_z"]):
                        block[mode][c] += int(z is not None and z > offdist.THRESHOLD)
        heads = [r for r in files["heads"] if r["dimension"] == o]
        out["per_objective"][o] = {
            "blocks_flagged": {m: sum(c.values()) for m, c in block.items()},
            "blocks_scored": sum(1 for r in files["patching"] if r["dimension"] == o and r["offdist_z"] is not None),
            "heads_flagged": sum(r["offdist_flagged"] for r in heads),
            "heads_scored": sum(r["offdist_scored"] for r in heads),
            "per_block": {c: {m: block[m][c] for m in block} for c in blocks},
        }
    return out


def null_gap(rows: list[dict]) -> float:
    """Largest |sum of attributions - summed margin| along a random direction (embed, blocks and
    bias: the decomposition's own check, there)."""
    return max(abs(r["embed"] + r["bias"] + math.fsum(r["attribution"][:len(r["resample"])]) - r["margin"])
               for r in rows)


def margin_gap(files: dict) -> float:
    """Largest |instrument margin - held-out margin| over the instrument pairs (padded batches
    against one sequence at a time)."""
    held = {r["pair_id"]: r["margin"] for r in files["heldout"]}
    return max(abs(r["margin"] - held[r["pair_id"]]) for r in files["blocks"] if r["pair_id"] in held)
