"""The bundle's own README.md, generated: what every file and every field means."""
from __future__ import annotations

from bundle_kit import contract as C

PAIR_FIELDS = """\
- `dimension`: the preference dimension the pair probes.
- `pair_id`: the pair; `seed_id`: the seed pair it was mutated from (rows sharing a `seed_id`
  are not independent: `n_effective` counts seeds, and bootstrap intervals resample seeds).
"""
ROW_FIELDS = "- `model`: the model id (`organism`, a local path or a hub id).\n" + PAIR_FIELDS


def reproducibility(mode: dict, device: str = "cpu") -> str:
    """The README's sentence on when its files come back byte for byte: the portable numerics
    mode's claim (any CPU) only for a run made in it (`measure.numerics.claimed`)."""
    from measure import numerics

    if numerics.claimed(mode, device):
        return f"""Every file except `{C.MANIFEST}` is byte-identical when the run is repeated with the same seed
and torch version, whatever vector extensions the CPU has: the numbers are computed in the
portable numerics mode (ATen's portable kernels, MKL's conditional numerical reproducibility,
oneDNN off, one thread), which the manifest records under `numerics` beside the wall time and
the git commit (those two change from run to run)."""
    return f"""This run was made outside the portable numerics mode ({', '.join(numerics.departures(mode, device))}).
Every file except `{C.MANIFEST}` is byte-identical when the run is repeated with the same seed,
torch version and settings on a machine that picks the same kernels; on another CPU, or with
another thread count, the last digits may differ (a run with `--threads 1` on a CPU, the default,
is in the portable mode and repeats on any CPU). The manifest records the mode under `numerics`
beside the wall time and the git commit (those two change from run to run)."""


def bundle_readme(study: str, golden: dict, has_key: bool, *, mode: dict, device: str = "cpu") -> str:
    """The bundle's README.md: what every file and every field means, and (`reproducibility`)
    when its files come back byte for byte, for the numerics `mode` the run was made in."""
    counts = golden["counts"]
    key_files = ""
    if has_key:
        key_files = f"""
## `{C.KEY}` — the organism's answer key

- `rule`, `threshold_fraction`: how membership is decided. For each component, its output at
  the scoring token is compared between the two sides of twin inputs that differ only in the
  dimension's feature; the relative twin delta is the mean L2 norm of that difference divided by
  the component's typical output norm. A component is in the key when its delta is at least
  `threshold_fraction` of the largest delta in the key universe for that dimension.
- `universe`: the components scored against the key (MLP blocks and attention heads, which
  together partition every write to the residual stream but the embedding).
- `twins_per_dimension`: how many twins the deltas average over (separate from the study pairs).
- `planted_rules`: the planted reward of each dimension's feature (per word for `length`).
- `dimensions.<d>.components`: the key; `threshold`: the delta cut; `twin_delta`: every
  component's relative twin delta (attn blocks included for reference).
"""
    return f"""# Study bundle: {study}

Written by the measurement stage (`python -m measure run --study {study}`); do not edit by hand.
{reproducibility(mode, device)}
Floats are rounded to {C.JSONL_PLACES} decimals in JSONL files and {C.GOLDEN_PLACES} in `{C.GOLDEN}`; keys keep a fixed order.

Definitions: the margin of a pair is `r(chosen) - r(rejected)`, read at the scoring token (the
last token of each response). `w_r` is row {golden['identity']['objective']} of the score head.

## `{C.PAIRS}` — the preference pairs, readable

{PAIR_FIELDS}- `prompt`, `chosen`, `rejected`: the texts; the model prefers `chosen` when the margin is positive.

## `{C.ATTRIBUTION}` — component attribution (observational)

One row per (pair, component), components in model order: `embed`, then per layer `attn_L{{i}}`
and `mlp_L{{i}}`, then `bias`. {counts['attribution_rows']} rows.

{ROW_FIELDS}- `component`, `kind` (`embed | attn | mlp | bias`), `layer` (`-1` for embed and bias).
- `attr_chosen`, `attr_rejected`: the component's write to the residual stream at the scoring
  token, through the final norm with its scale frozen at the clean run's value, projected on
  `w_r`, for each response. `attribution` = `attr_chosen - attr_rejected`.
- `margin`: the clean margin. Over embed, attn, mlp and bias the attributions sum back to the
  margin; the largest gap over pairs is `{C.GOLDEN}` `attribution_sum_gap`.

## `{C.HEADS_ATTRIBUTION}` — the same, per attention head

Same fields, `kind` = `head`, component `head_L{{i}}_H{{j}}`: the head's slice of the o_proj
input through its o_proj columns. The heads of a layer sum to its `attn` row (less any o_proj
bias). Kept in its own file so the rank comparison over attn and mlp stays as defined.
{counts['heads_attribution_rows']} rows.

## `{C.PATCHING}` — activation patching (causal)

One row per (pair, component, mode) for every `attn_L{{i}}` and `mlp_L{{i}}`. {counts['patching_rows']} rows.

{ROW_FIELDS}- `component`, `kind`, `layer`: as above.
- `mode`: `mean` (the component's output replaced at every position by its mean output over
  the clean data set, every real position of every response), `zero` (replaced by zero at every
  position), `swap` (at the scoring token only, replaced by its output on the other response of
  the pair). Both responses are re-run with the patch.
- `clean_margin`, `patched_margin`; `effect` = `patched_margin - clean_margin`;
  `moves_pct` = `100 * |effect| / |clean_margin|` (null if the clean margin is exactly 0).
- `offdist_z`: how far the patched activation sits from the clean activations *at the scoring
  token*, where the patch is read: the Mahalanobis distance under a Ledoit-Wolf shrinkage
  covariance of that component, fitted on clean activations of the other seed folds only (so a
  pair is never scored against a distribution that contains it), the larger of the two
  responses, divided by the component's threshold (the conformal 99% quantile of the held-out
  clean pairs' distances). null when the study has fewer than two seeds.
- `offdist_flag`: `offdist_z > 1`: the patch put the component outside what clean inputs
  produce there (a clean pair is flagged at most about 1% of the time).

## `{C.HEADS_PATCHING}` — the same, per attention head

Same fields; a head is patched on its slice of the o_proj input. {counts['heads_patching_rows']} rows.

## `{C.LENS}` — the reward lens (observational)

One row per (pair, layer).

{ROW_FIELDS}- `layer`, `depth` = `(layer + 1) / L`.
- `running_margin`: the residual stream after that layer, through the real final norm, projected
  on `w_r`, chosen minus rejected. The last layer's value is the margin.
{key_files}
## `{C.GOLDEN}` — the summary pages quote, computed from the rows above as written

- `study`, `model`; `rank_mode`: the patching mode the rankings use; `patch_score`: how a
  component's patching rows make its patch score (`reproduce.py` reads it); `components_compared`,
  `kinds_compared`: the components ranked both ways; `tolerance`: how far `reproduce.py` may
  differ from the published rhos.
- `counts`: `pairs`; `pairs_per_dimension` (a number when every dimension has the same count);
  `n_effective` (distinct seeds); `dimensions`; `components_attributed` (embed, attn, mlp);
  `components_patched` (attn, mlp); `components_ranked_both`; `heads_patched`; and the row count
  of every file: `attribution_rows`, `patching_rows`, `heads_attribution_rows`,
  `heads_patching_rows`, `lens_rows`.
- `mean_rho`, `per_dimension_rho`: Spearman rho (Pearson correlation of average ranks) between
  the attribution ranking (mean signed attribution over pairs, rank 1 = largest) and the patch
  ranking (patch score, rank 1 = largest: `ratio_of_means` is sum `|effect|` / sum `|clean margin|`
  over pairs, `mean_ratio` the mean of `|effect| / |clean margin|`), per dimension, over
  `kinds_compared`; the mean over dimensions. `rho_by_mode`: the same for each patching mode.
- `identity`: the model id, weights sha256, data sha256 (of `{C.PAIRS}`), seed, dtype, device
  type and score objective: what makes the numbers.
- `per_dimension_n`: `n` (pairs) and `n_effective` (distinct seeds) per dimension.
- `top_components`: per dimension, the top three attn/mlp components by attribution rank and by
  patch rank, and the top three heads of each.
- `clean_accuracy`: per dimension, the fraction of pairs with a positive margin.
- `crystallization`: the depth (fraction of layers) at which the running margin first reaches half
  the final margin, mean over pairs, overall and per dimension.
- `key_recovery` (null without a key): ROC AUC of the attribution ranking (by the absolute
  attribution score: the key marks membership, not a sign) and of the patching ranking
  (`rank_mode`, `patch_score`) against the key, over the key `universe`; `chance` is 0.5; `interval`
  says how the intervals are made. `attribution_auc`, `patching_auc`, and `attribution_ci`,
  `patching_ci`: seed-level bootstrap intervals; `gap_patching_minus_attribution` and `gap_ci`: their difference; `n`,
  `n_effective`, `key_size` per dimension; `overall` averages the dimensions' AUCs.
  `patching_auc_by_mode`: point estimates of the patching AUC for each patching mode.
- `attribution_sum_gap`: the largest |sum of attributions - margin| over pairs.
- `organism_heldout_accuracy` (organism only): the trained organism's accuracy on held-out twins.
- `offdist`: how the off-distribution flag is made (`statistic`, `quantile`, `folds`, and the
  `threshold` on `offdist_z`), and per mode the effects `scored` and `flagged` in
  `{C.PATCHING}`, and `heads_scored`, `heads_flagged` in the heads file.
- `per_dimension_rho_ci`: per dimension, the 95% seed-bootstrap interval `[low, high]` of the
  `per_dimension_rho` (`rank_mode`): 1000 resamples of the dimension's seeds with replacement
  (`rankstats.seed_bootstrap`, seed 0); null where no resample gives a rho.

## `{C.MANIFEST}` — the run

Model id, weights sha256 and how it was taken, the model config, seeds, data file and sha256,
package versions, device, dtype, threads, shard layout and how many shards a resumed run reused,
the run fingerprint, git commit (and whether the tree was dirty), wall time and command line.

## Added by the site build to the zip

- `rankstats.py`: the one implementation of the rank statistics (average ranks, Spearman, the
  join, component scores, ROC AUC, seed bootstrap, crystallization depth), standard library only.
- `reproduce.py`: recomputes the per-dimension and mean rhos from the JSONL files with
  `rankstats.py` and checks them against `{C.GOLDEN}` within `tolerance`. Run
  `python reproduce.py` in the unzipped folder; no third-party packages needed.
"""
