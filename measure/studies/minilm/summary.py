"""golden.json of the MiniLM study, computed from the bundle's rows as written (bundle_kit.rankstats).

Beyond the keys every study has (`rank_mode`, `per_dimension_rho`, `mean_rho`, `counts`, ...):

- `patch_score`: `ratio_of_means` (docs/statistics.md); every rho here uses it, and `reproduce.py`
  reads it; `rho_mean_ratio` repeats the rhos with the mean of per-pair ratios, as a sensitivity check;
- `learned`, `baselines`: the preregistered learned-dimension test (`heldout.learned`);
- `data_balance`: the cue checker (`balance.py`) run on the seeds as the bundle holds them;
- `rank_agreement`: the rhos over the learned dimensions and along the random directions, the
  two registered quantities (`learned_mean_rho`, `learned_minus_random`, 0 when nothing is learned),
  and per dimension the rho with its seed-bootstrap interval, the random control's rho and the
  mis-ranked pairs that enter the ranking;
- `margins`, `examples`: the held-out margin distribution, and one pair per dimension by a rule.
"""
from __future__ import annotations

from pathlib import Path

from bundle_kit import rankstats
from bundle_kit.contract import KINDS_COMPARED, RANK_MODE, TOLERANCE
from safe_io import write_atomic

from measure.instruments import offdist
from measure.runner.jsonio import fixed, json_text, read_jsonl
from measure.runner.rows import attribution_gap
from measure.runner.summary import BOOTSTRAP, SeedGroups, crystallization, lineage, rows_by_seed
from measure.studies.minilm import balance, heldout
from measure.studies.minilm.data import DIMENSIONS, FOLDS

PATCH_SCORE = "ratio_of_means"
SENSITIVITY = "mean_ratio"
TOP = 3
EXAMPLE_RULE = ("per dimension, the seed row (m0) whose held-out head margin is the median of the "
                "dimension's seed rows (the lower of the two middle ones)")


def present(rows: list[dict]) -> list[str]:
    """The study's dimensions that these rows hold, in the study's order (all twelve on a full
    run; fewer with `--dimensions`)."""
    held = {r["dimension"] for r in rows}
    return [d for d in DIMENSIONS if d in held]


def _scores(attr: list[dict], patch: list[dict], mode: str, patch_score: str = PATCH_SCORE) -> dict:
    return rankstats.component_scores(rankstats.join_rows(attr, patch, mode), patch_score)


def _rhos(attr, patch, mode=RANK_MODE, patch_score=PATCH_SCORE) -> dict[str, float]:
    return rankstats.dimension_rhos(_scores(attr, patch, mode, patch_score))


def rho_intervals(attr: list[dict], patch: list[dict], mode: str = RANK_MODE) -> dict[str, list[float]]:
    """Per dimension: the seed-bootstrap interval (BOOTSTRAP) of its rho, seeds drawn with
    replacement (a seed drawn twice counts twice: SeedGroups)."""
    joined = rankstats.join_rows(attr, patch, mode)
    out = {}
    for d in present(attr):
        groups = SeedGroups(rows_by_seed(joined, d), PATCH_SCORE)

        def rho(seeds, groups=groups, d=d):
            return rankstats.dimension_rhos(groups.scores(seeds))[d]
        out[d] = list(rankstats.seed_bootstrap(sorted(groups.groups), rho, **BOOTSTRAP))
    return out


def data_balance(pairs: list[dict]) -> dict:
    """The cue checker on the seeds as written (the `m0` rows: the seed's own prompt)."""
    seeds = {d: [p for p in pairs if p["dimension"] == d and p["pair_id"].endswith("-m0")] for d in present(pairs)}
    return {"bands": balance.BANDS, "failures": len(balance.check(seeds)),
            "per_dimension": balance.balance(seeds)}


def rank_agreement(files: dict, learned: list[str]) -> dict:
    """The rhos over the learned dimensions beside the random-direction control (registered in
    minilm-heldout-agreement and minilm-transfer), and what enters each ranking."""
    head = _rhos(files["attribution"], files["patching"])
    random = _rhos(files["random_attribution"], files["random_patching"])
    sensitivity = _rhos(files["attribution"], files["patching"], patch_score=SENSITIVITY)
    intervals = rho_intervals(files["attribution"], files["patching"])
    margin = {(r["dimension"], r["pair_id"]): r["margin"] for r in files["attribution"]}
    learned_mean = rankstats.mean(head[d] for d in learned) if learned else 0.0
    random_mean = rankstats.mean(random.values())
    return {
        "patch_score": PATCH_SCORE, "mode": RANK_MODE,
        "definition": "Spearman rho between the attribution ranking and the mean-ablation patch ranking of the "
                      "attn and mlp blocks; every pair read along the head of the fold that did not train on it",
        "control": "the same instruments and scores along one random unit direction per fold and dimension",
        "learned_dimensions": list(learned),
        "learned_mean_rho": learned_mean,
        "random_mean_rho": random_mean,
        "learned_minus_random": learned_mean - random_mean if learned else 0.0,
        "all_mean_rho": rankstats.mean(head.values()),
        "random_min_rho": min(random.values()), "random_max_rho": max(random.values()),
        "interval": f"{int(BOOTSTRAP['level'] * 100)}% percentile, {BOOTSTRAP['resamples']} resamples of the "
                    f"dimension's seeds (rankstats.seed_bootstrap, seed {BOOTSTRAP['seed']}); twelve intervals, "
                    "none corrected for multiplicity",
        "per_dimension": {d: {"rho": head[d], "ci": intervals[d], "rho_mean_ratio": sensitivity[d],
                              "random_rho": random[d], "learned": d in learned,
                              "pairs": sum(1 for (dd, _p) in margin if dd == d),
                              "misranked_pairs": sum(1 for (dd, _p), m in margin.items() if dd == d and m < 0)}
                          for d in present(files["attribution"])},
    }


def margins(held: list[dict]) -> dict:
    """The held-out head margins, per dimension: quartiles, extremes, how many are negative."""
    out = {}
    for d in present(held):
        values = sorted(r["head_margin"] for r in held if r["dimension"] == d)
        n = len(values)
        out[d] = {"min": values[0], "q1": values[n // 4], "median": values[(n - 1) // 2],
                  "q3": values[(3 * n) // 4], "max": values[-1], "negative": sum(1 for v in values if v < 0)}
    return out


def examples(pairs: list[dict], held: list[dict], per: dict) -> dict:
    """One pair per dimension, by EXAMPLE_RULE, with its held-out margins."""
    by_id = {r["pair_id"]: r for r in held}
    out = {}
    for d in present(held):
        seeds = sorted((by_id[p["pair_id"]]["head_margin"], p["pair_id"]) for p in pairs
                       if p["dimension"] == d and p["pair_id"].endswith("-m0"))
        pair_id = seeds[(len(seeds) - 1) // 2][1]
        p = next(p for p in pairs if p["pair_id"] == pair_id)
        best = per[d]["best_baseline"]
        out[d] = {"pair_id": pair_id, "prompt": p["prompt"], "chosen": p["chosen"], "rejected": p["rejected"],
                  "head_margin": by_id[pair_id]["head_margin"], "best_baseline": best,
                  "best_baseline_margin": by_id[pair_id][f"{best}_margin"] if best != "chance" else 0.0}
    return out


def summarise(out: Path, identity: dict, file_names: dict[str, str], head_modes: tuple[str, ...],
              study: str) -> dict:
    """golden.json and README.md of the bundle in `out`, from its rows as written (`file_names`:
    {row kind: file name}, `head_modes`: the modes measured along the heads)."""
    from measure.studies.minilm.readme import bundle_readme
    files = {name: read_jsonl(out / filename) for name, filename in file_names.items()}
    pairs = read_jsonl(out / "pairs.jsonl")
    attr, patch = files["attribution"], files["patching"]
    test = heldout.learned(files["heldout"])
    scores = _scores(attr, patch, RANK_MODE)
    rhos = rankstats.dimension_rhos(scores)
    per_dim = lineage(attr)
    compared = sorted({c for comps in scores.values() for c in comps})
    golden = {
        "study": study, "model": "minilm", "rank_mode": RANK_MODE, "patch_score": PATCH_SCORE,
        "components_compared": "attn and mlp blocks (embed is attributed, not patched)",
        "tolerance": TOLERANCE,
        "counts": {
            "pairs": len(pairs), "pairs_per_dimension": len(pairs) // len(present(pairs)),
            "n_effective": len({p["seed_id"] for p in pairs}), "dimensions": len(present(pairs)),
            "seeds_per_dimension": len({p["seed_id"] for p in pairs}) // len(present(pairs)), "folds": FOLDS,
            "components_attributed": len({r["component"] for r in attr if r["kind"] != "bias"}),
            "components_patched": len({r["component"] for r in patch}),
            "components_ranked_both": len(compared), "heads_patched": 0,
            "attribution_rows": len(attr), "patching_rows": len(patch), "lens_rows": len(files["lens"]),
            "random_attribution_rows": len(files["random_attribution"]),
            "random_patching_rows": len(files["random_patching"]), "heldout_rows": len(files["heldout"]),
        },
        "mean_rho": rankstats.mean(rhos.values()),
        "per_dimension_rho": rhos,
        "kinds_compared": KINDS_COMPARED,
        "identity": identity,
        "per_dimension_n": per_dim,
        **test,
        "data_balance": data_balance(pairs),
        "rank_agreement": rank_agreement(files, test["learned"]["dimensions"]),
        "rho_by_mode": {m: {"mean_rho": rankstats.mean(v.values()), "per_dimension_rho": v}
                        for m in head_modes for v in [_rhos(attr, patch, m)]},
        "rho_mean_ratio": {m: {"mean_rho": rankstats.mean(v.values()), "per_dimension_rho": v}
                           for m in head_modes for v in [_rhos(attr, patch, m, SENSITIVITY)]},
        "random_rho": {"mean_rho": rankstats.mean(v.values()), "per_dimension_rho": v}
        if (v := _rhos(files["random_attribution"], files["random_patching"])) else None,
        "top_components": {d: {"attribution": _top(scores[d], 0), "patching": _top(scores[d], 1)} for d in scores},
        "margins": margins(files["heldout"]),
        "examples": examples(pairs, files["heldout"], test["learned"]["per_dimension"]),
        "example_rule": EXAMPLE_RULE,
        "crystallization": crystallization(files["lens"]),
        "offdist": offdist.golden_block(patch, [], modes=head_modes, read="pooled"),
        "attribution_sum_gap": max(attribution_gap(attr), attribution_gap(files["random_attribution"])),
        "margin_gap": _margin_gap(attr, files["heldout"]),
        "attribution": "every LayerNorm's scale frozen at its clean value; direct path to the mean-pooled read (measure/models/bert.py)",
    }
    golden = fixed(golden, 6)
    write_atomic(out / "golden.json", json_text(golden))
    write_atomic(out / "README.md", bundle_readme(golden))
    return golden


def _top(scores: dict[str, tuple[float, float]], which: int) -> list[str]:
    ranks = rankstats.rankings(scores)
    return sorted(ranks, key=lambda c: (ranks[c][which], c))[:TOP]


def _margin_gap(attr: list[dict], held: list[dict]) -> float:
    """The largest difference between a pair's clean margin as the instruments read it (padded
    batches) and its held-out head margin from the committed features (one text at a time)."""
    head = {r["pair_id"]: r["head_margin"] for r in held}
    return max(abs(r["margin"] - head[r["pair_id"]]) for r in attr)
