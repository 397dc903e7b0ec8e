"""Write a synthetic study folder in the fixture format of docs/ARCHITECTURE.md.

Used to (re)make the small committed fixture in tests/bundles/fixtures/tiny/ and, at a larger
size, by benchmarks/benchmark_reproduce.py. The golden.json rhos come from bundle_kit.rankstats
run on the rows as written (read back after rounding), exactly as the contract asks.

    python tests/bundles/study_maker.py tests/bundles/fixtures/tiny
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bundle_kit import rankstats  # noqa: E402

MODES = ("mean", "zero", "swap")
ATTRIBUTION_KEYS = ("model", "dimension", "pair_id", "seed_id", "component", "kind", "layer",
                    "attribution", "attr_chosen", "attr_rejected", "margin")
PATCHING_KEYS = ("model", "dimension", "pair_id", "seed_id", "component", "kind", "layer", "mode",
                 "clean_margin", "patched_margin", "effect", "moves_pct", "offdist_z")

README = """\
# Study bundle: {study}

A synthetic study made for the bundle tests (not a measurement). Run `python reproduce.py`.

## attribution_per_pair.jsonl
One row per (pair, component). `model`: the model id. `dimension`: the preference dimension.
`pair_id`: the pair. `seed_id`: the hand-written seed pair it was mutated from. `component`:
`embed`, `attn_L{{i}}`, `mlp_L{{i}}` or `bias`. `kind`: embed, attn, mlp or bias. `layer`: the
layer index (-1 for embed and bias). `attribution`: `attr_chosen - attr_rejected`, the
component's share of the margin. `attr_chosen`, `attr_rejected`: its projection on each response.
`margin`: r(chosen) - r(rejected).

## patching_per_pair.jsonl
One row per (pair, component, mode). The first seven fields as above. `mode`: mean, zero or swap.
`clean_margin`, `patched_margin`: the margin before and after patching. `effect`:
`patched_margin - clean_margin`. `moves_pct`: `100 * |effect| / |clean_margin|`. `offdist_z`:
how far the patched activation sits from the clean distribution.

## golden.json
`rank_mode`: the patching mode the rankings use. `tolerance`: the allowed disagreement.
`counts`: row and pair counts. `mean_rho`: the mean of `per_dimension_rho`, the Spearman rank
correlation per dimension of attribution score against patch score.

## reproduce.py, rankstats.py
The check and the statistics it uses, copied in by the site build.
"""


def _dump(row: dict, keys: tuple) -> str:
    return json.dumps({k: row[k] for k in keys}, ensure_ascii=False) + "\n"


def write_study(folder: Path, *, study: str = "tiny", dimensions: tuple = ("brevity", "honesty", "safety"),
                pairs_per_dimension: int = 5, layers: int = 3, seed: int = 5, tie: bool = True,
                tolerance: float = 1e-6) -> dict:
    """Write the study's files into `folder`; return golden.json's content."""
    rng = random.Random(seed)
    model = "synthetic/tiny-reward-model"
    components = [("embed", "embed", -1)]
    for layer in range(layers):
        components += [(f"attn_L{layer}", "attn", layer), (f"mlp_L{layer}", "mlp", layer)]
    components.append(("bias", "bias", -1))
    attribution_lines, patching_lines = [], []
    for d_index, dimension in enumerate(dimensions):
        # each component gets a per-dimension strength, so rankings are not pure noise
        strength = {name: rng.gauss(0, 1) for name, _kind, _layer in components}
        for p in range(pairs_per_dimension):
            pair_id = f"{dimension}-{p:03d}"
            seed_id = f"{dimension}-s{p // 2}"
            shares = {}
            for name, kind, layer in components:
                chosen = round(strength[name] + rng.gauss(0, 0.5), 8)
                rejected = round(rng.gauss(0, 0.5), 8)
                shares[name] = (chosen, rejected)
            if tie and d_index == 0:  # two components with equal scores: average ranks must share
                shares["mlp_L0"] = shares["attn_L0"]
            margin = round(sum(c - r for c, r in shares.values()), 8)
            for name, kind, layer in components:
                chosen, rejected = shares[name]
                attribution_lines.append(_dump({
                    "model": model, "dimension": dimension, "pair_id": pair_id, "seed_id": seed_id,
                    "component": name, "kind": kind, "layer": layer,
                    "attribution": round(chosen - rejected, 8), "attr_chosen": chosen,
                    "attr_rejected": rejected, "margin": margin}, ATTRIBUTION_KEYS))
            for name, kind, layer in components:
                if kind in ("embed", "bias"):
                    continue  # attributed, not patched
                for mode in MODES:
                    effect = round(-strength[name] * rng.uniform(0.2, 1.2) + rng.gauss(0, 0.3), 8)
                    patched = round(margin + effect, 8)
                    effect = round(patched - margin, 8)
                    patching_lines.append(_dump({
                        "model": model, "dimension": dimension, "pair_id": pair_id, "seed_id": seed_id,
                        "component": name, "kind": kind, "layer": layer, "mode": mode,
                        "clean_margin": margin, "patched_margin": patched, "effect": effect,
                        "moves_pct": round(100 * abs(effect) / abs(margin), 8) if margin else 0.0,
                        "offdist_z": round(abs(rng.gauss(0, 1)), 8)}, PATCHING_KEYS))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "attribution_per_pair.jsonl").write_text("".join(attribution_lines), encoding="utf-8")
    (folder / "patching_per_pair.jsonl").write_text("".join(patching_lines), encoding="utf-8")

    # The rhos are computed from the files as written, as the contract asks.
    attribution = rankstats.read_jsonl(folder / "attribution_per_pair.jsonl", rankstats.ATTRIBUTION_FIELDS)
    patching = rankstats.read_jsonl(folder / "patching_per_pair.jsonl", rankstats.PATCHING_FIELDS)
    scores = rankstats.component_scores(rankstats.join_rows(attribution, patching, "mean"))
    rhos = rankstats.dimension_rhos(scores)
    golden = {
        "study": study,
        "model": model,
        "rank_mode": "mean",
        "components_compared": "attn and mlp components (embed and bias are attributed, not patched)",
        "tolerance": tolerance,
        "counts": {
            "pairs": len(dimensions) * pairs_per_dimension,
            "pairs_per_dimension": pairs_per_dimension,
            "n_effective": len(dimensions) * ((pairs_per_dimension + 1) // 2),
            "dimensions": len(dimensions),
            "components_attributed": len(components),
            "components_patched": 2 * layers,
            "components_ranked_both": 2 * layers,
            "heads_patched": 0,
            "attribution_rows": len(attribution),
            "patching_rows": len(patching),
        },
        "mean_rho": round(rankstats.mean(rhos.values()), 6),
        "per_dimension_rho": {d: round(r, 6) for d, r in rhos.items()},
    }
    (folder / "golden.json").write_text(json.dumps(golden, indent=2) + "\n", encoding="utf-8")
    (folder / "README.md").write_text(README.format(study=study), encoding="utf-8")
    return golden


if __name__ == "__main__":
    write_study(Path(sys.argv[1]))
