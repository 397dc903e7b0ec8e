"""Off-distribution scores (measure/instruments/offdist.py): the statistic against its definition, the
cross-fit, and on the committed organism: the flag fires on patches that are off-distribution
at the scoring token and stays near its calibrated rate on clean activations it never saw."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from measure.instruments import offdist

ORGANISM = Path(__file__).resolve().parents[2] / "models" / "organism"


def _direct_ledoit_wolf(x: torch.Tensor) -> torch.Tensor:
    """The shrunk covariance from Ledoit and Wolf's definition, with p x p matrices."""
    x = x.double()
    n, p = x.shape
    xc = x - x.mean(0)
    s = xc.T @ xc / n
    mu = torch.trace(s) / p
    d2 = (s - mu * torch.eye(p, dtype=x.dtype)).pow(2).sum()
    b2 = sum(float((torch.outer(row, row) - s).pow(2).sum()) for row in xc) / n ** 2
    delta = min(b2, float(d2)) / float(d2)
    return (1 - delta) * s + delta * mu * torch.eye(p, dtype=x.dtype)


@pytest.mark.parametrize("n,p", [(60, 6), (12, 40)])
def test_mahalanobis_under_ledoit_wolf_matches_the_definition(n, p):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, p, generator=g) @ torch.randn(p, p, generator=g)
    v = torch.randn(7, p, generator=g, dtype=torch.float64)
    fit = offdist.ledoit_wolf(x)
    cov = _direct_ledoit_wolf(x)
    diff = v - x.double().mean(0)
    expected = torch.einsum("ij,jk,ik->i", diff, torch.linalg.inv(cov), diff).sqrt()
    assert 0 < fit.shrinkage < 1
    assert torch.allclose(offdist.distance(fit, v), expected, rtol=1e-9)


def test_conformal_quantile_is_the_ceil_q_n_plus_1_th_score():
    scores = torch.arange(1, 201, dtype=torch.float64).flip(0)  # 200 .. 1
    assert offdist.conformal_quantile(scores, 0.99) == 199.0  # ceil(0.99 * 201) = 199
    assert offdist.conformal_quantile(scores[:50], 0.99) == 200.0  # too few: the largest


def test_each_fold_is_fitted_without_its_own_seeds():
    g = torch.Generator().manual_seed(3)
    seeds = [f"s{k // 4:02d}" for k in range(40)]           # 10 seeds, 4 effects each
    folds = offdist.seed_folds(seeds, 5)
    effect_fold = torch.tensor([folds[s] for s in seeds])
    owner = torch.arange(80) // 2                           # two activations per effect
    x = torch.randn(80, 3, generator=g, dtype=torch.float64)
    ref = offdist.calibrate(x, owner, effect_fold, folds=5)
    for k, fit in enumerate(ref.fits):
        outside = effect_fold[owner] != k
        assert torch.allclose(fit.mean, x[outside].mean(0))
    assert len({folds[s] for s in seeds[:4]}) == 1         # a seed's effects share one fold


def test_flag_rate_on_gaussian_data():
    g = torch.Generator().manual_seed(11)
    mix = torch.randn(8, 8, generator=g, dtype=torch.float64)
    draw = lambda m: torch.randn(m, 8, generator=g, dtype=torch.float64) @ mix  # noqa: E731
    n_effects = 1000
    effect_fold = torch.arange(n_effects) % 5
    owner = torch.arange(2 * n_effects) // 2
    ref = offdist.calibrate(draw(2 * n_effects), owner, effect_fold)
    fresh = offdist.flagged(offdist.score(ref, draw(2 * n_effects), owner, effect_fold)).double().mean()
    scaled = offdist.flagged(offdist.score(ref, 3 * draw(2 * n_effects), owner, effect_fold)).double().mean()
    assert fresh <= 0.02
    assert scaled >= 0.99


def test_read_at_takes_a_scoring_token_or_a_pooled_mask():
    t = torch.arange(2 * 3 * 1, dtype=torch.float64).reshape(2, 3, 1)
    values, rows = offdist.read_at(t, torch.tensor([2, 0]))
    assert values.flatten().tolist() == [2.0, 3.0] and rows.tolist() == [0, 1]
    values, rows = offdist.read_at(t, torch.tensor([[True, True, False], [False, True, True]]))
    assert values.flatten().tolist() == [0.0, 1.0, 4.0, 5.0] and rows.tolist() == [0, 0, 1, 1]
    assert offdist.effect_max(values.flatten(), rows, 2).tolist() == [1.0, 5.0]


# ----- the committed organism ---------------------------------------------------------------
@pytest.fixture(scope="module")
def organism():
    from measure.models.adapter import load
    from measure.instruments.patching import StatsAccumulator
    from measure.runner.jsonio import read_jsonl

    torch.set_num_threads(1)
    adapter = load("organism")

    def clean(pairs):
        seqs = [s for p in pairs for s in (adapter.encode(p["prompt"], p["chosen"]),
                                          adapter.encode(p["prompt"], p["rejected"]))]
        batch = adapter.batch(seqs)
        with torch.no_grad():
            return batch, adapter.clean_run(batch)

    study = read_jsonl(ORGANISM / "pairs.jsonl")
    heldout = read_jsonl(ORGANISM / "heldout.jsonl")   # twins the study never measured
    batch, run = clean(study)
    acc = StatsAccumulator()
    acc.add(adapter, batch, run)
    folds = offdist.seed_folds([p["seed_id"] for p in study])
    fold = torch.tensor([folds[p["seed_id"]] for p in study])
    return adapter, (batch, run, fold), clean(heldout), acc.finish(seeds=[p["seed_id"] for p in study])


def _outputs(adapter, run):
    """{component: (B, T, p)} for every attn/mlp block and head."""
    out = {}
    for i in range(adapter.n_layers):
        out[f"attn_L{i}"], out[f"mlp_L{i}"] = run.attn[i], run.mlp[i]
        for j in range(adapter.n_heads):
            out[f"head_L{i}_H{j}"] = run[f"head_L{i}_H{j}"]
    return out


def test_the_pooled_mean_of_mlp_L3_at_the_scoring_token_is_flagged(organism):
    adapter, (batch, run, fold), _heldout, stats = organism
    clean, rows = offdist.read_at(run.mlp[3], batch.score_idx)
    ref = offdist.calibrate(clean, rows // 2, fold)
    pooled = stats.mean["mlp_L3"].expand_as(clean)      # what `mean` mode writes at every position
    scores = offdist.score(ref, pooled, rows // 2, fold)
    assert bool(offdist.flagged(scores).all()), float(scores.min())
    # and the old statistic could not see it: against the pooled-position spread it scores 0
    old = ((pooled.double() - stats.mean["mlp_L3"]) / (stats.std["mlp_L3"] + 1e-8)).pow(2).mean(-1).sqrt()
    assert float(old.max()) < 1e-6


def test_scaled_activations_are_flagged_and_unseen_clean_ones_are_not(organism):
    adapter, (batch, run, fold), (h_batch, h_run), _stats = organism
    fresh_outputs = _outputs(adapter, h_run)
    h_fold = torch.arange(h_batch.ids.shape[0] // 2) % offdist.FOLDS
    fresh_flags, scaled_flags = [], []
    for name, tensor in _outputs(adapter, run).items():
        clean, rows = offdist.read_at(tensor, batch.score_idx)
        ref = offdist.calibrate(clean, rows // 2, fold)
        assert ref.n_calibration == 240 and math.isfinite(ref.threshold)
        scaled_flags.append(offdist.flagged(offdist.score(ref, 5 * clean, rows // 2, fold)))
        fresh, h_rows = offdist.read_at(fresh_outputs[name], h_batch.score_idx)
        fresh_flags.append(offdist.flagged(offdist.score(ref, fresh, h_rows // 2, h_fold)))
    assert len(fresh_flags) == 24
    scaled_rate = float(torch.cat(scaled_flags).double().mean())
    fresh_rate = float(torch.cat(fresh_flags).double().mean())
    assert scaled_rate >= 0.99, scaled_rate
    assert fresh_rate <= 0.02, fresh_rate           # calibrated at 1% on the study's own pairs


def test_the_sweep_scores_patches_against_the_scoring_token_reference(organism):
    from measure.instruments.patching import patch_sweep

    adapter, (batch, run, fold), _heldout, stats = organism
    assert stats.folds is not None and set(stats.offdist) >= {"mlp_L3", "head_L3_H0"}
    got = patch_sweep(adapter, batch, run, stats, ["mlp_L3", "head_L3_H0"],
                      modes=("mean", "swap", "clean"), folds=fold)
    assert bool(offdist.flagged(got[("mlp_L3", "mean")][1]).all())
    for name in ("mlp_L3", "head_L3_H0"):
        clean = got[(name, "clean")][1]
        # the clean patch is the calibration set itself: at most 1% above the threshold
        assert int(offdist.flagged(clean).sum()) <= 0.01 * len(clean)
        # a swap only exchanges the two responses' clean values: the pair's score is unchanged
        assert torch.allclose(got[(name, "swap")][1], clean)


def test_rows_carry_the_score_and_its_flag(organism):
    from measure.runner.jsonio import read_jsonl
    from measure.runner.reads import Read
    from measure.runner.rows import shard_rows

    adapter, _study, _heldout, stats = organism
    pairs = read_jsonl(ORGANISM / "pairs.jsonl")[:4]
    seqs = [s for p in pairs for s in (adapter.encode(p["prompt"], p["chosen"]),
                                      adapter.encode(p["prompt"], p["rejected"]))]
    with torch.no_grad():
        rows = shard_rows(adapter, pairs, seqs, stats, 512, [Read(patch_heads=False)],
                          torch.arange(len(pairs)).repeat_interleave(2))["patching"]
    assert all(r["offdist_flag"] is (r["offdist_z"] > offdist.THRESHOLD) for r in rows)
    assert all(r["offdist_flag"] for r in rows if r["component"] == "mlp_L3" and r["mode"] == "mean")


def test_a_study_run_scores_every_patch_and_counts_the_flags(tiny_dir, tiny_pairs, tmp_path):
    """End to end through the staged runner: every row scored, golden's block counts the rows."""
    from measure.runner.config import StudyConfig
    from measure.runner.run import run_study

    out = run_study(StudyConfig(model=str(tiny_dir), study="tiny", out=tmp_path / "b", pairs_file=tiny_pairs,
                                runs_dir=tmp_path / "runs", shard_size=4, progress=False))["out"]
    golden = json.loads((out / "golden.json").read_text())["offdist"]
    for name, scored, flagged in (("patching_per_pair.jsonl", "scored", "flagged"),
                                  ("heads_patching_per_pair.jsonl", "heads_scored", "heads_flagged")):
        rows = [json.loads(line) for line in (out / name).read_text().splitlines()]
        assert all(isinstance(r["offdist_z"], float) and r["offdist_flag"] is (r["offdist_z"] > 1) for r in rows)
        for mode in ("mean", "zero", "swap"):
            of_mode = [r for r in rows if r["mode"] == mode]
            assert golden[scored][mode] == len(of_mode) > 0
            assert golden[flagged][mode] == sum(r["offdist_flag"] for r in of_mode)
    assert golden["threshold"] == offdist.THRESHOLD and golden["quantile"] == offdist.QUANTILE
