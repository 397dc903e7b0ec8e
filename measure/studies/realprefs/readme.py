"""The README.md of the realprefs study's bundle: every file and every field."""
from __future__ import annotations


def bundle_readme(golden: dict) -> str:
    """The bundle's README.md text: every file and every field, with the run's counts from `golden`."""
    c, s = golden["counts"], golden["structure"]
    per = ", ".join(f"{o} {n}" for o, n in c["instrument_pairs"].items())
    held = ", ".join(f"{o} {n}" for o, n in c["eval_pairs"].items())
    nb, nh = len(s["blocks"]), len(s["heads"])
    return f"""# The realprefs study's bundle (`{golden['study']}`)

Written by `python -m measure run --model realprefs --study {golden['study']}`
(`measure/studies/realprefs/study.py`); do not edit by hand. The model: the MiniLM-L6 trunk with
its top layers fine-tuned here on real human preferences and one linear head per objective over
its mean-pooled last layer (`models/realprefs/`, `measure/studies/realprefs/model.py`). The pairs:
the evaluation side of `data/realprefs/split.json` (HH-RLHF and summarize-from-feedback, never
trained on). Every pair is read along its own objective's head. `seed_id` is the pair's group (a
dialogue's first human turn, a post or article): intervals resample groups, and the
off-distribution cross-fit keeps a group in one fold. Floats are rounded to 8 decimals in the
JSONL files, 6 in golden.json; off-distribution scores in the wide rows to 4.

The instruments measure {c['pairs']} instrument pairs ({per}): per objective, the pairs of the
evaluation side with the smallest sha256("realprefs-instruments:" + pair_id). The accuracy is
scored on {c['heldout_rows']} evaluation pairs ({held}). Blocks are listed in the order
`{s['blocks'][0]}`, `{s['blocks'][1]}`, ... `{s['blocks'][-1]}` ({nb}); heads `{s['heads'][0]}` ...
`{s['heads'][-1]}` ({nh}); a list of values per block or head follows that order.

## `pairs.jsonl`

One row per instrument pair: `dimension` (the objective), `pair_id` (`<source>-<line>`), `seed_id`
(its group), `prompt`, `chosen`, `rejected` (the texts as the data holds them; the model reads
`[CLS] prompt tail [SEP] reply [SEP]`, 128 tokens, `measure/studies/realprefs/budget.py`), `source`,
`line` (the record's line in its source file).

## `attribution_per_pair.jsonl` (observational)

One row per (pair, component): `embed`, each block and `bias` (the LayerNorm biases, the attention
biases no head holds and the head's bias). `attribution` = `attr_chosen - attr_rejected`: the
component's direct path to the pooled read with every LayerNorm's scale frozen at its clean value,
along the pair's head; the components sum to `margin` (largest gap: `attribution_sum_gap`).

## `patching_per_pair.jsonl` (causal)

One row per (pair, block) in `mean` mode (the block's mean output over every real position of
the instrument pairs, at every position): `clean_margin`, `patched_margin`, `effect` = patched
minus clean, `moves_pct` = 100 |effect| / |clean margin|, the off-distribution score `offdist_z`
and `offdist_flag` (above 1; `offdist` in golden.json says what is scored).

## `blocks_per_pair.jsonl` (causal)

One row per pair: `margin`; `resample` and `swap`, each block's effect in that mode (a list in
block order), with `resample_z` and `swap_z`, their off-distribution scores. `resample`: each reply
takes the block's output from a reply of another instrument pair of its objective (the rule:
`identity/resample_rule`), shifted so that its pooled value becomes the source's; `swap`: shifted
so that it becomes the other reply's. `trained_blocks`: the margin with the trained blocks
({', '.join(s['trained_blocks'])}) patched together in `mean` mode.

## `curve_per_pair.jsonl` (causal)

One row per pair: `margin` and `patched`, the margin with the first k blocks of its objective's
order (`where/<objective>/order`) patched together in `mean` mode, k = 1..{nb}.

## `heads_summary.jsonl`

One row per (objective, head), sums over the objective's instrument pairs: `pairs`,
`attribution_sum` (of each pair's head attribution), `abs_effect_sum` (of |effect| in `mean` mode),
`abs_margin_sum` (of |clean margin|), `offdist_scored`, `offdist_flagged`. The heads' per-pair rows
stay in the run's shards (the size budget); their interval in golden.json comes from them.

## `null_directions.jsonl`, `null_curve.jsonl`

The null: {c['null_directions']} random unit directions (`identity/null_seed`), each pair read along
every one through the same clean and patched passes. One row per (objective, `direction`), sums
over the objective's instrument pairs along it: `pairs`, `margin`, `abs_margin`, `embed`, `bias`,
`attribution` (per block, then per head), `mean` (|effect| per block, then per head), `resample`,
`swap` (|effect| per block), `trained_blocks` (|effect| of the trained blocks patched together);
in `null_curve.jsonl`, `curve` (|effect| of the first k blocks of the head's order patched together)
and `patched` (the summed patched margins).

## `heldout_per_pair.jsonl`

One row per evaluation pair scored: `margin` (along its objective's head), `margin_head_<objective>`
(along each head), and each baseline's margin (`margin_length`, `margin_bag_of_words`,
`margin_frozen_trunk`, from `data/realprefs/baselines_eval.jsonl`).

## `heads.json`

The heads: `objectives`, `weight` (a row per objective), `bias`.

## `golden.json`

The keys the registrations read are listed in docs/realprefs-plan.md. `accuracy`, `baselines`,
`test` (the group-level sign test against the best baseline, Holm over the objectives); `where`
(per objective: `order`, `curve` (removed share), `moved_curve`, `k80`, `smallest_set`, `layers`,
`removed`, `moved`, `mean_effect`, `trained_layers_removed`, `trained_layers_moved`,
`trained_layers_share`, `top_blocks`, `top_heads`, `heads_in_set`); `agreement` (`rho` over the
blocks, `auc_heads`); `relation`; `components` (per objective and component: attribution score,
patch score per mode); `null` (per statistic: the head's value, the null's 5th to 95th percentile
`band`, `at_or_above`); `intervals`; `offdist`; `per_dimension_rho`, `mean_rho` (the block rhos);
`definitions` (each in words); `counts`; `identity`.

## Added by the site build to the zip

`rankstats.py`, `localize.py`, `contract.py`, `record.py` and `reproduce.py`: `python reproduce.py`
recomputes every objective's rho from the two contract files, and every point estimate of
`accuracy`, `baselines`, `test`, `where`, `agreement`, `relation`, `components` and `null` from the
files above (`localize.headline`), and checks them against golden.json. Standard library only.
"""
