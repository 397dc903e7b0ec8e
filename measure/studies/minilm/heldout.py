"""Cross-validated accuracy of the heads and the baselines, and the learned-dimension test
preregistered in `registrations/minilm-learned.yaml`.

`heldout_rows` gives one row per pair: its margin along the head of the fold that did not train
on it and the margins of the three baselines fitted on the same training folds (`baselines.py`).
`learned` turns those rows into the test: per seed, the mean score of its rows; per dimension the
best baseline (highest held-out accuracy; ties in the order of `baselines.NAMES`; chance when all
are below one half); a one-sided exact sign test of the head against it across seeds
(`rankstats.sign_test`); Holm's procedure across the dimensions at `ALPHA` (`rankstats.holm`).
"""
from __future__ import annotations

from collections import defaultdict

import torch

from bundle_kit import rankstats
from measure.studies.minilm import baselines
from measure.studies.minilm.data import DIMENSIONS, FOLDS
from measure.studies.minilm.heads import L2

ALPHA = 0.05
CHANCE = 0.5
TEST = ("one-sided exact sign test across held-out seeds of the head's seed accuracy against the best "
        "baseline's (ties dropped), Holm step-down over the twelve dimensions at family-wise alpha 0.05")


def _diffs(features: dict) -> torch.Tensor:
    return features["chosen"].double() - features["rejected"].double()


def heldout_rows(pairs: list[dict], features: dict, heads: dict) -> list[dict]:
    """One row per pair, in pair order: the margin along the head of the fold that did not train on
    it (`head_margin`), the mean score of the four heads that did (`train_score`), and the
    held-out margin of every baseline fitted on the same folds."""
    diffs = _diffs(features)
    W = heads["fold_heads.weight"].double()                      # (F, K, d)
    rows = [None] * len(pairs)
    for d_index, d in enumerate(DIMENSIONS):
        mine = [i for i, p in enumerate(pairs) if p["dimension"] == d]
        margins = diffs[mine] @ W[:, d_index].T                  # (rows, F): every fold head
        along = dict(zip(mine, margins))
        for f in range(FOLDS):
            test = [i for i in mine if pairs[i]["fold"] == f]
            train = [i for i in mine if pairs[i]["fold"] != f]
            base = baselines.margins([pairs[i] for i in train], [pairs[i] for i in test], L2)
            for j, i in enumerate(test):
                p = pairs[i]
                trained = [baselines.score(float(along[i][g])) for g in range(FOLDS) if g != f]
                rows[i] = {"dimension": d, "pair_id": p["pair_id"], "seed_id": p["seed_id"], "fold": f,
                           "head_margin": float(along[i][f]), "train_score": rankstats.mean(trained),
                           **{f"{name}_margin": base[name][j] for name in baselines.NAMES}}
    return rows


def _seed_accuracy(rows: list[dict], field: str) -> dict[str, float]:
    by_seed = defaultdict(list)
    for r in rows:
        by_seed[r["seed_id"]].append(baselines.score(r[field]))
    return {s: rankstats.mean(v) for s, v in sorted(by_seed.items())}


def learned(rows: list[dict]) -> dict:
    """golden.json's `learned` and `baselines` blocks, from the held-out rows as written."""
    per, pvalues, base_per = {}, {}, {}
    dimensions = [d for d in DIMENSIONS if any(r["dimension"] == d for r in rows)]
    for d in dimensions:
        mine = [r for r in rows if r["dimension"] == d]
        acc = {name: rankstats.mean(baselines.score(r[f"{name}_margin"]) for r in mine)
               for name in ("head",) + baselines.NAMES}
        best = max(baselines.NAMES, key=lambda n: (acc[n], -baselines.NAMES.index(n)))
        head_seed = _seed_accuracy(mine, "head_margin")
        if acc[best] < CHANCE:
            best, base_seed = "chance", {s: CHANCE for s in head_seed}
        else:
            base_seed = _seed_accuracy(mine, f"{best}_margin")
        wins = sum(1 for s in head_seed if head_seed[s] > base_seed[s])
        losses = sum(1 for s in head_seed if head_seed[s] < base_seed[s])
        pvalues[d] = rankstats.sign_test(wins, losses)
        per[d] = {"head_accuracy": acc["head"], "train_accuracy": rankstats.mean(r["train_score"] for r in mine),
                  "best_baseline": best, "best_baseline_accuracy": acc.get(best, CHANCE),
                  "wins": wins, "losses": losses, "ties": len(head_seed) - wins - losses,
                  "p": pvalues[d], "rows": len(mine), "seeds": len(head_seed),
                  "seeds_right": sum(1 for v in head_seed.values() if v > CHANCE),
                  "seeds_wrong": sum(1 for v in head_seed.values() if v < CHANCE)}
        base_per[d] = {n: acc[n] for n in baselines.NAMES}
    holm = rankstats.holm(pvalues, ALPHA)
    for d in dimensions:
        per[d]["holm_threshold"], per[d]["learned"] = holm[d]
    names = [d for d in dimensions if per[d]["learned"]]
    overall = {n: rankstats.mean(baselines.score(r[f"{n}_margin"]) for r in rows) for n in baselines.NAMES}
    return {
        "learned": {"test": TEST, "alpha": ALPHA, "count": len(names), "dimensions": names,
                    "head_accuracy": rankstats.mean(baselines.score(r["head_margin"]) for r in rows),
                    "per_dimension": per},
        "baselines": {"overall": {**overall, "best": max(baselines.NAMES, key=lambda n: (overall[n], -baselines.NAMES.index(n))),
                                  "best_accuracy": max(overall.values())},
                      "per_dimension": base_per},
    }
