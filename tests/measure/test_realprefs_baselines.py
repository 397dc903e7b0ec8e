"""The realprefs baselines and the power of the preregistered test (issue 30): the fit, the
interval over groups, the committed outputs, and the power figures against their closed form."""
from __future__ import annotations

import json

import numpy as np
import pytest

from measure.studies.realprefs import baselines as bl
from measure.studies.realprefs import power
from measure.studies.realprefs.data import OBJECTIVES, Pair


def test_bt_fit_matches_the_exact_newton_fit_of_the_minilm_study():
    import torch

    from measure.studies.minilm.fit import bt_fit as newton
    rng = np.random.default_rng(3)
    x = rng.normal(size=(120, 30)) + 0.3 * rng.normal(size=30)
    for l2 in (1e-3, 0.1):
        w = bl.bt_fit(x, l2)
        ref, _ = newton(torch.tensor(x), l2)
        assert np.abs(w - ref.numpy()).max() < 1e-7


def test_the_interval_resamples_groups_not_pairs():
    """Copying every pair ten times inside its own group adds no evidence: the interval over
    groups stays the same, where one over pairs would shrink by about sqrt(10)."""
    rng = np.random.default_rng(0)
    values = (rng.random(200) < 0.6).astype(float)
    groups = [f"g{i}" for i in range(200)]
    once = bl.group_bootstrap(values, groups)
    tenfold = bl.group_bootstrap(np.repeat(values, 10), [g for g in groups for _ in range(10)])
    assert once == pytest.approx(tenfold, abs=1e-12)
    pairwise = bl.group_bootstrap(np.repeat(values, 10), [str(i) for i in range(2000)])
    assert (pairwise[1] - pairwise[0]) < 0.5 * (once[1] - once[0])


def test_the_length_rule_takes_the_direction_the_training_pairs_favour():
    def pair(c, r):
        return Pair("x", "summary", "s", "g", "p", "a" * c, "a" * r)
    train = [pair(3, 9), pair(2, 8), pair(9, 4)]          # shorter wins twice in three
    margins, fit = bl.length_rule(train, [pair(1, 5), pair(5, 5)])
    assert fit["sign"] == -1.0 and list(margins) == [4.0, 0.0]
    assert list(bl.scores(margins)) == [1.0, 0.5]


def test_committed_baselines_are_consistent_with_their_rows_and_the_split():
    from measure.studies.realprefs.split import SPLIT_FILE
    doc = json.loads(bl.OUT_JSON.read_text(encoding="utf-8"))
    rows = [json.loads(line) for line in bl.OUT_ROWS.read_text(encoding="utf-8").splitlines()]
    split = json.loads(SPLIT_FILE.read_text(encoding="utf-8"))
    for objective in OBJECTIVES:
        mine = [r for r in rows if r["objective"] == objective]
        assert [r["pair_id"] for r in mine] == split["eval"][objective]
        block = doc["objectives"][objective]
        for name in bl.NAMES:
            s = np.array([r[f"score_{name}"] for r in mine])
            m = np.array([r[f"margin_{name}"] for r in mine])
            assert list(s) == list(bl.scores(m))
            assert block[name]["accuracy"] == pytest.approx(s.mean(), abs=1e-6)
            lo, hi = block[name]["ci95"]
            assert lo < block[name]["accuracy"] < hi
            assert block[name].get("l2", bl.L2_GRID[0]) in bl.L2_GRID
        assert block["best"] == max(bl.NAMES, key=lambda n: block[n]["accuracy"])


def test_critical_values_are_the_exact_ones():
    for alpha in (0.05, 0.05 / 3):
        values = power.critical_values(120, alpha)
        assert [int(v) for v in values] == [power.critical(m, alpha) for m in range(121)]


def test_simulated_power_agrees_with_the_closed_form_when_every_group_is_one_pair():
    base = np.array([1.0] * 390 + [0.0] * 210)
    sim = power.GroupedPower(base, [str(i) for i in range(600)], reps=3000)
    for delta in (0.0, 0.04, 0.08):
        exact = power.exact_power(600, 0.35, delta, 0.05 / 3)
        assert abs(sim(0.35, delta, 0.05 / 3) - exact) < 0.03, (delta, sim(0.35, delta, 0.05 / 3), exact)
    assert power.exact_power(600, 0.35, 0.0, 0.05 / 3) <= 0.05 / 3


def test_groups_of_correlated_pairs_cost_power():
    """Ten copies of each pair inside its group: as many pairs, a tenth of the evidence."""
    base = np.array([1.0] * 39 + [0.0] * 21)
    singles = power.GroupedPower(np.repeat(base, 10), [str(i) for i in range(600)], reps=2000)
    clumped = power.GroupedPower(np.repeat(base, 10), [str(i // 10) for i in range(600)], reps=2000)
    assert clumped(0.35, 0.08, 0.05) < singles(0.35, 0.08, 0.05) - 0.2


def test_the_committed_power_figures_follow_from_the_committed_baselines():
    doc = json.loads(power.OUT.read_text(encoding="utf-8"))
    base = json.loads(bl.OUT_JSON.read_text(encoding="utf-8"))
    for objective in OBJECTIVES:
        r, b = doc["objectives"][objective], base["objectives"][objective]
        assert r["best_baseline"] == b["best"] and r["n_pairs"] == b["n_eval"]
        assert r["discordance_estimate"] == round(max(b["discordance"].values()), 3)
        mde = r["mde_holm_first_step_exact_pairs"]   # the closed form, recomputed here
        d = r["discordance_estimate"]
        assert power.exact_power(r["n_pairs"], d, mde, power.ALPHA / 3) >= power.TARGET
        assert power.exact_power(r["n_pairs"], d, mde - power.STEP, power.ALPHA / 3) < power.TARGET
        assert r["mde_alpha"] <= r["mde_holm_first_step"]
