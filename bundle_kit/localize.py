"""Where a preference lives, and whether the score moves: the statistics of a localization study.

Standard library only (Python 3.10+): this file ships in every bundle zip beside `reproduce.py`
and `rankstats.py`, and the measurement stage computes `golden.json` with the same functions
(`headline`), so the check recomputes what the study published with the code it was published
with. Every definition is written out in docs/statistics.md ("Where a preference lives"); in
short, per objective (a `dimension` of the rows), every pair read along its objective's head:

- the **patch score** of a component is `ratio_of_means` (rankstats): sum |effect| / sum |clean
  margin| over the objective's pairs; the **attribution score** the mean signed attribution;
- the blocks are **ordered** by patch score in `mean` mode, largest first, ties in model order;
  the **curve** patches the first k blocks together (mean mode), k = 1..n, and its value at k is
  the **removed share** `1 - sum(patched margin) / sum(clean margin)`;
- **k80** is the smallest k whose removed share reaches `TARGET` (n + 1 when none does); the
  first min(k80, n) blocks are the **smallest set**;
- the **moved share** of a set is its patch score as if it were one component: how far patching
  it moves the margin, whichever way;
- agreement: Spearman rho of attribution score against patch score over the blocks, and the AUC
  of the heads' attribution scores against the `TOP_HEADS` heads with the highest patch scores;
- the null: the same scores along random unit directions, read through the same patched passes,
  given as the 5th to 95th percentile over the directions (`band`) and the share of directions
  at or above the head's value.

The files it reads are described in the bundle's README.md.
"""
from __future__ import annotations

import json
import math
import os

try:  # inside the repository (bundle_kit package) and inside an unpacked bundle (flat folder)
    from . import rankstats
except ImportError:
    import rankstats

TARGET = 0.8          # the registered share of the margin a smallest set must remove
TOP_BLOCKS = 4        # the top blocks compared across objectives (Jaccard)
TOP_HEADS = 8         # the heads the AUC counts as found by patching
NULL_LEVEL = 0.90     # the null band: 5th to 95th percentile over the directions
BASELINES = ("length", "bag_of_words", "frozen_trunk")
ALPHA = 0.05          # Holm's family-wise level over the objectives
MODE = "mean"         # the mode of the order, the curve and the agreement

FILES = {
    "attribution": "attribution_per_pair.jsonl", "patching": "patching_per_pair.jsonl",
    "blocks": "blocks_per_pair.jsonl", "curve": "curve_per_pair.jsonl", "heads": "heads_summary.jsonl",
    "null": "null_directions.jsonl", "null_curve": "null_curve.jsonl", "heldout": "heldout_per_pair.jsonl",
}
WEIGHTS = "heads.json"


# ----- small definitions ---------------------------------------------------------------------------
def score_of(margin: float) -> float:
    """A pair's score: 1 if its margin is positive, 0.5 if zero, 0 if negative."""
    return 1.0 if margin > 0 else 0.5 if margin == 0 else 0.0


def patch_score(abs_effect: float, abs_margin: float) -> float:
    """`rankstats.ratio_of_means` of sums already taken: sum |effect| / sum |clean margin|."""
    return rankstats.ratio_of_means([{"effect": abs_effect, "clean_margin": abs_margin}])


def removed_share(patched: float, clean: float) -> float:
    """1 - sum(patched margin) / sum(clean margin): 1 when the patch takes the summed margin to
    zero, above 1 when it reverses it, NaN when the clean margins sum to zero."""
    return 1 - patched / clean if clean != 0 else math.nan


def order_by(scores: dict[str, float], model_order: list[str]) -> list[str]:
    """The components of `scores`, largest score first, ties in model order."""
    where = {c: i for i, c in enumerate(model_order)}
    return sorted(scores, key=lambda c: (-scores[c], where[c]))


def smallest_k(curve: list[float], target: float = TARGET) -> int:
    """The smallest k (from 1) with curve[k - 1] >= target; len(curve) + 1 when none reaches it."""
    return next((k for k, value in enumerate(curve, start=1) if value >= target), len(curve) + 1)


def top_auc(attribution: dict[str, float], patch: dict[str, float], model_order: list[str],
            top: int = TOP_HEADS) -> float:
    """AUC (rankstats.roc_auc) of the attribution scores against the `top` components with the
    highest patch scores (ties in model order)."""
    found = set(order_by(patch, model_order)[:top])
    names = [c for c in model_order if c in patch]
    return rankstats.roc_auc([attribution[c] for c in names], [c in found for c in names])


def jaccard(a, b) -> float:
    """|a & b| / |a | b| of two sets of names (1 when both are empty)."""
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 1.0


def cosine(u: list[float], v: list[float]) -> float:
    """The cosine of two vectors."""
    dot = math.fsum(x * y for x, y in zip(u, v))
    return dot / math.sqrt(math.fsum(x * x for x in u) * math.fsum(y * y for y in v))


def band(values: list[float]) -> list[float]:
    """[5th, 95th] percentile of a null's values (rankstats.percentile_interval at NULL_LEVEL)."""
    return list(rankstats.percentile_interval(values, NULL_LEVEL))


def at_or_above(value: float, values: list[float]) -> float:
    """The share of the null's values at or above `value` (NaN values left out)."""
    kept = [v for v in values if not math.isnan(v)]
    return sum(1 for v in kept if v >= value) / len(kept) if kept else math.nan


def layer_of(component: str) -> int:
    """`attn_L3` -> 3; `head_L2_H5` -> 2."""
    return int(component.split("_L", 1)[1].split("_H", 1)[0])


# ----- reading ------------------------------------------------------------------------------------
def read(folder: str) -> dict:
    """The files `headline` needs, by their FILES keys (and `weights`, heads.json)."""
    out = {key: rankstats.read_jsonl(os.path.join(folder, name)) for key, name in FILES.items()}
    with open(os.path.join(folder, WEIGHTS), encoding="utf-8") as handle:
        out["weights"] = json.load(handle)
    return out


def _objectives(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["dimension"] for r in rows))


# ----- the per-objective statistics ---------------------------------------------------------------
def block_scores(attribution: list[dict], patching: list[dict], mode: str = MODE) -> dict:
    """{objective: {block: (attribution score, patch score)}} from the contract rows
    (rankstats.component_scores, `ratio_of_means`)."""
    return rankstats.component_scores(rankstats.join_rows(attribution, patching, mode), "ratio_of_means")


def head_scores(summary: list[dict]) -> dict:
    """{objective: {head: (attribution score, patch score)}} from heads_summary.jsonl's sums."""
    out: dict = {}
    for r in summary:
        out.setdefault(r["dimension"], {})[r["component"]] = (
            r["attribution_sum"] / r["pairs"], patch_score(r["abs_effect_sum"], r["abs_margin_sum"]))
    return out


def curve_of(rows: list[dict]) -> tuple[list[float], list[float], float, float]:
    """(removed shares, moved shares, summed clean margin, summed |clean margin|) of the nested
    sets, from one objective's curve rows (each: its margin and the patched margins)."""
    n = len(rows[0]["patched"])
    clean = math.fsum(r["margin"] for r in rows)
    size = math.fsum(abs(r["margin"]) for r in rows)
    removed = [removed_share(math.fsum(r["patched"][k] for r in rows), clean) for k in range(n)]
    moved = [rankstats.ratio_of_means([{"effect": r["patched"][k] - r["margin"], "clean_margin": r["margin"]}
                                       for r in rows]) for k in range(n)]
    return removed, moved, clean, size


def where(objective: str, files: dict, blocks: dict, heads: dict, trained: list[str]) -> dict:
    """One objective's answer: the order, the curve, k80 and its set, how far it moves the
    margin, the trained blocks' share, the top blocks and heads."""
    model_blocks = list(blocks)
    patch = {c: blocks[c][1] for c in model_blocks}
    order = order_by(patch, model_blocks)
    curve_rows = [r for r in files["curve"] if r["dimension"] == objective]
    removed, moved, clean, _size = curve_of(curve_rows)
    k80 = smallest_k(removed)
    k = min(k80, len(order))
    smallest = order[:k]
    block_rows = [r for r in files["blocks"] if r["dimension"] == objective]
    trained_patched = math.fsum(r["trained_blocks"] for r in block_rows)
    head_patch = {c: v[1] for c, v in heads.items()}
    top_heads = order_by(head_patch, list(heads))[:TOP_HEADS]
    total = math.fsum(patch.values())
    return {
        "order": order,
        "curve": removed,
        "moved_curve": moved,
        "k80": k80,
        "smallest_set": smallest,
        "layers": sorted({layer_of(c) for c in smallest}),
        "removed": removed[k - 1],
        "moved": moved[k - 1],
        "mean_effect": math.fsum(r["patched"][k - 1] - r["margin"] for r in curve_rows) / len(curve_rows),
        "mean_margin": clean / len(curve_rows),
        "trained_layers_removed": removed_share(trained_patched, math.fsum(r["margin"] for r in block_rows)),
        "trained_layers_moved": rankstats.ratio_of_means(
            [{"effect": r["trained_blocks"] - r["margin"], "clean_margin": r["margin"]} for r in block_rows]),
        "trained_layers_share": math.fsum(patch[c] for c in trained) / total if total else math.nan,
        "top_blocks": order[:TOP_BLOCKS],
        "top_heads": top_heads,
        "heads_in_set": [h for h in top_heads if f"attn_L{layer_of(h)}" in smallest],
    }


def components(blocks: dict, heads: dict, extra: dict) -> dict:
    """The per-component table of one objective: attribution and patch scores (every mode)."""
    out = {}
    for c, (a, p) in blocks.items():
        out[c] = {"attribution": a, MODE: p, **{m: extra[m][c] for m in extra}}
    for c, (a, p) in heads.items():
        out[c] = {"attribution": a, MODE: p}
    return out


def other_modes(rows: list[dict], names: list[str]) -> dict[str, dict[str, float]]:
    """{mode: {block: patch score}} of the resample and swap effects in blocks_per_pair.jsonl."""
    size = math.fsum(abs(r["margin"]) for r in rows)
    return {m: {c: patch_score(math.fsum(abs(r[m][i]) for r in rows), size) for i, c in enumerate(names)}
            for m in ("resample", "swap")}


# ----- accuracy and the preregistered test --------------------------------------------------------
def accuracy(rows: list[dict], field: str = "margin") -> float:
    """The mean score (`score_of`) of the rows' `field`."""
    return rankstats.mean(score_of(r[field]) for r in rows)


def test(rows: list[dict], best: str) -> dict:
    """The group-level sign test of the model against the best baseline: per group (`seed_id`),
    the sum of (model score - baseline score) over its pairs is a win above 0, a loss below."""
    sums: dict[str, float] = {}
    for r in rows:
        sums[r["seed_id"]] = sums.get(r["seed_id"], 0.0) + score_of(r["margin"]) - score_of(r[f"margin_{best}"])
    wins = sum(1 for v in sums.values() if v > 0)
    losses = sum(1 for v in sums.values() if v < 0)
    return {"best": best, "wins": wins, "losses": losses, "p": rankstats.sign_test(wins, losses)}


# ----- the null ---------------------------------------------------------------------------------------
def null_values(rows: list[dict], curve_rows: list[dict], names: list[str], heads: list[str],
                trained: list[str], k: int) -> dict[str, list[float]]:
    """Per statistic, its value along every random direction of one objective (direction order)."""
    by_dir = {r["direction"]: r for r in curve_rows}
    out: dict[str, list[float]] = {"rho": [], "auc_heads": [], "trained_layers_share": [],
                                   "trained_layers_moved": [], "smallest_set_moved": []}
    for r in sorted(rows, key=lambda r: r["direction"]):
        attribution = {c: r["attribution"][i] / r["pairs"] for i, c in enumerate(names + heads)}
        patch = {c: patch_score(r[MODE][i], r["abs_margin"]) for i, c in enumerate(names + heads)}
        out["rho"].append(rankstats.spearman([attribution[c] for c in names], [patch[c] for c in names]))
        out["auc_heads"].append(top_auc({h: attribution[h] for h in heads}, {h: patch[h] for h in heads}, heads))
        total = math.fsum(patch[c] for c in names)
        out["trained_layers_share"].append(math.fsum(patch[c] for c in trained) / total if total else math.nan)
        out["trained_layers_moved"].append(patch_score(r["trained_blocks"], r["abs_margin"]))
        out["smallest_set_moved"].append(patch_score(by_dir[r["direction"]]["curve"][k - 1], r["abs_margin"]))
    return out


def null_summary(values: dict[str, list[float]], head: dict[str, float]) -> dict:
    """Per statistic: the head's value, the null band and the share of directions at or above it."""
    return {name: {"head": head[name], "band": band(vals), "at_or_above": at_or_above(head[name], vals)}
            for name, vals in values.items()}


# ----- everything ---------------------------------------------------------------------------------
def headline(files: dict, trained: list[str]) -> dict:
    """Every point estimate the study publishes, from its files (`read`): accuracy, the test,
    where each objective lives, agreement, the relation between objectives and the null.
    `trained`: the names of the trained blocks."""
    attribution = [r for r in files["attribution"] if r["kind"] in ("attn", "mlp")]
    objectives = _objectives(files["patching"])
    blocks = block_scores(attribution, files["patching"])
    heads = head_scores(files["heads"])
    names = list(dict.fromkeys(r["component"] for r in files["patching"]))
    head_names = list(dict.fromkeys(r["component"] for r in files["heads"]))
    out: dict = {"accuracy": {}, "baselines": {}, "gain": {}, "test": {}, "where": {}, "agreement": {},
                 "components": {}, "null": {}}
    for o in objectives:
        held = [r for r in files["heldout"] if r["dimension"] == o]
        out["accuracy"][o] = accuracy(held)
        out["baselines"][o] = {b: accuracy(held, f"margin_{b}") for b in BASELINES}
        best = max(BASELINES, key=lambda b: (round(out["baselines"][o][b], 12), -BASELINES.index(b)))
        out["gain"][o] = out["accuracy"][o] - out["baselines"][o][best]
        out["test"][o] = test(held, best)
        mine = {c: blocks[o][c] for c in names}
        answer = where(o, files, mine, heads[o], trained)
        out["where"][o] = answer
        out["agreement"][o] = {
            "rho": rankstats.spearman([mine[c][0] for c in names], [mine[c][1] for c in names]),
            "auc_heads": top_auc({h: v[0] for h, v in heads[o].items()}, {h: v[1] for h, v in heads[o].items()},
                                 head_names)}
        out["components"][o] = components(mine, heads[o], other_modes(
            [r for r in files["blocks"] if r["dimension"] == o], names))
        values = null_values([r for r in files["null"] if r["dimension"] == o],
                             [r for r in files["null_curve"] if r["dimension"] == o], names, head_names, trained,
                             min(answer["k80"], len(names)))
        own = {"rho": out["agreement"][o]["rho"], "auc_heads": out["agreement"][o]["auc_heads"],
               "trained_layers_share": answer["trained_layers_share"],
               "trained_layers_moved": answer["trained_layers_moved"], "smallest_set_moved": answer["moved"]}
        out["null"][o] = {"directions": len(values["rho"]), **null_summary(values, own)}
    decided = rankstats.holm({o: out["test"][o]["p"] for o in objectives}, ALPHA)
    for o in objectives:
        out["test"][o]["rejected"] = int(decided[o][1])
    out["test"]["rejected_count"] = sum(out["test"][o]["rejected"] for o in objectives)
    out["agreement"]["mean_rho"] = rankstats.mean(out["agreement"][o]["rho"] for o in objectives)
    out["agreement"]["mean_auc_heads"] = rankstats.mean(out["agreement"][o]["auc_heads"] for o in objectives)
    out["relation"] = relation(files, out, objectives)
    return out


def relation(files: dict, out: dict, objectives: list[str]) -> dict:
    """Helpfulness against harmlessness: their heads' cosine, the helpfulness head's accuracy on
    the harmlessness pairs, the overlap of their top blocks, heads and smallest sets; every pair
    of objectives' head cosine."""
    weights = files["weights"]
    rows = dict(zip(weights["objectives"], weights["weight"]))
    res: dict = {"cosines": {f"{a}|{b}": cosine(rows[a], rows[b]) for i, a in enumerate(weights["objectives"])
                             for b in weights["objectives"][i + 1:]}}
    a, b = "helpfulness", "harmlessness"
    if a in objectives and b in objectives:
        res["head_cosine"] = cosine(rows[a], rows[b])
        res["helpfulness_head_on_harmlessness"] = accuracy(
            [r for r in files["heldout"] if r["dimension"] == b], f"margin_head_{a}")
        res["top_block_jaccard"] = jaccard(out["where"][a]["top_blocks"], out["where"][b]["top_blocks"])
        res["top_head_jaccard"] = jaccard(out["where"][a]["top_heads"], out["where"][b]["top_heads"])
        res["smallest_set_jaccard"] = jaccard(out["where"][a]["smallest_set"], out["where"][b]["smallest_set"])
        res["both_learned"] = int(out["test"][a]["rejected"] == 1 and out["test"][b]["rejected"] == 1)
    return res
