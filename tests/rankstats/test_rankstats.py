"""The shared rank statistics agree with scipy and with their definitions in docs/statistics.md."""
import math
import random

import pytest
from scipy import stats

from bundle_kit import rankstats


def test_average_ranks_rank_one_is_largest_and_ties_share():
    assert rankstats.average_ranks([0.5, 2.0, 2.0, -1.0]) == [3.0, 1.5, 1.5, 4.0]


@pytest.mark.parametrize("seed", range(5))
def test_spearman_matches_scipy_with_ties(seed):
    rng = random.Random(seed)
    x = [rng.choice([0.1, 0.2, 0.3, rng.random()]) for _ in range(40)]
    y = [rng.random() if i % 3 else x[i] for i in range(40)]
    assert rankstats.spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)


def test_spearman_of_constant_is_nan():
    assert math.isnan(rankstats.spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))


def test_roc_auc_matches_mann_whitney():
    rng = random.Random(3)
    scores = [rng.choice([0.0, 0.5, 1.0, rng.random()]) for _ in range(30)]
    positive = [rng.random() < 0.3 for _ in range(30)]
    pos = [s for s, p in zip(scores, positive) if p]
    neg = [s for s, p in zip(scores, positive) if not p]
    u = stats.mannwhitneyu(pos, neg).statistic
    assert rankstats.roc_auc(scores, positive) == pytest.approx(u / (len(pos) * len(neg)))


def test_join_and_scores_follow_the_definitions():
    attribution = [
        {"dimension": "d", "pair_id": p, "component": c, "attribution": a}
        for p, c, a in [("p1", "a", 1.0), ("p1", "b", 3.0), ("p2", "a", 2.0), ("p2", "b", 1.0),
                        ("p1", "embed", 9.0)]
    ]
    patching = [
        {"dimension": "d", "pair_id": p, "component": c, "mode": m, "clean_margin": cm, "effect": e}
        for p, c, m, cm, e in [("p1", "a", "mean", 2.0, -1.0), ("p1", "b", "mean", 2.0, 0.5),
                               ("p2", "a", "mean", -4.0, 1.0), ("p2", "b", "mean", -4.0, -4.0),
                               ("p1", "a", "zero", 2.0, 9.0)]
    ]
    joined = rankstats.join_rows(attribution, patching, "mean")
    assert sorted(joined) == [("d", "p1", "a"), ("d", "p1", "b"), ("d", "p2", "a"), ("d", "p2", "b")]
    scores = rankstats.component_scores(joined)["d"]
    assert scores["a"] == pytest.approx((1.5, (0.5 + 0.25) / 2))
    assert scores["b"] == pytest.approx((2.0, (0.25 + 1.0) / 2))
    assert rankstats.rankings(scores) == {"a": (2.0, 2.0), "b": (1.0, 1.0)}


def test_seed_bootstrap_is_deterministic_and_brackets_the_estimate():
    values = {f"s{i}": float(i) for i in range(10)}
    stat = lambda seeds: rankstats.mean(values[s] for s in seeds)
    low, high = rankstats.seed_bootstrap(list(values), stat, resamples=500, seed=1)
    assert (low, high) == rankstats.seed_bootstrap(list(values), stat, resamples=500, seed=1)
    assert low < 4.5 < high


def test_crystallization_depth():
    assert rankstats.crystallization_depth([0.0, 0.1, 0.6, 1.0]) == 0.75
    assert rankstats.crystallization_depth([0.0, -0.6, -1.0]) == pytest.approx(2 / 3)


def test_ratio_of_means_patch_score_weighs_pairs_by_their_margin():
    """The second patch-score definition (docs/statistics.md): sum |effect| / sum |clean margin|.
    A pair with a near-zero margin dominates the mean of ratios but not the ratio of sums."""
    attribution = [{"dimension": "d", "pair_id": p, "component": c, "attribution": 1.0}
                   for p in ("p1", "p2") for c in ("a", "b")]
    patching = [
        {"dimension": "d", "pair_id": p, "component": c, "mode": "mean", "clean_margin": cm, "effect": e}
        for p, c, cm, e in [("p1", "a", 0.001, 0.01), ("p2", "a", 2.0, 0.0),      # a: moves a tiny margin
                            ("p1", "b", 0.001, 0.0), ("p2", "b", 2.0, 1.0)]]     # b: moves a large one
    joined = rankstats.join_rows(attribution, patching, "mean")
    ratio = rankstats.component_scores(joined)["d"]
    sums = rankstats.component_scores(joined, "ratio_of_means")["d"]
    assert ratio["a"][1] == pytest.approx(5.0) and ratio["b"][1] == pytest.approx(0.25)
    assert sums["a"][1] == pytest.approx(0.01 / 2.001) and sums["b"][1] == pytest.approx(1.0 / 2.001)
    assert rankstats.ratio_of_means([{"effect": 0.0, "clean_margin": 0.0}]) == 0.0
    assert math.isinf(rankstats.ratio_of_means([{"effect": 1.0, "clean_margin": 0.0}]))
    with pytest.raises(ValueError, match="unknown patch score"):
        rankstats.component_scores(joined, "median")


@pytest.mark.parametrize("wins,losses", [(0, 0), (8, 0), (7, 0), (9, 1), (3, 5), (12, 3)])
def test_sign_test_matches_scipy(wins, losses):
    expected = 1.0 if wins + losses == 0 else stats.binomtest(wins, wins + losses, 0.5, alternative="greater").pvalue
    assert rankstats.sign_test(wins, losses) == pytest.approx(expected, rel=1e-12)


def test_holm_steps_down_and_stops_at_the_first_failure():
    p = {"a": 0.003, "b": 0.02, "c": 0.012, "d": 0.2}
    out = rankstats.holm(p, 0.05)
    assert out["a"] == (pytest.approx(0.05 / 4), True)
    assert out["c"] == (pytest.approx(0.05 / 3), True)      # 0.012 <= 0.0167
    assert out["b"] == (pytest.approx(0.05 / 2), True)      # 0.02 <= 0.025
    assert out["d"] == (pytest.approx(0.05), False)
    stop = rankstats.holm({"a": 0.001, "b": 0.03, "c": 0.04}, 0.05)
    assert [stop[k][1] for k in "abc"] == [True, False, False]   # 0.03 > 0.025: c is not tested past it
    assert rankstats.holm({"x": 0.04, "y": 0.04}, 0.05)["x"][0] == pytest.approx(0.025)  # ties by name


def test_ranks_and_topk_inclusion_equal_their_pairwise_definitions_on_ties():
    """average_ranks and topk_inclusion count by sorting (the spec curve asks them some 40,000
    times); on random lists with many ties (and -0.0 beside 0.0) they equal the definitions
    counted pair by pair."""
    rng = random.Random(5)
    for _ in range(200):
        values = [rng.choice([0.0, -0.0, 0.25, 1.0, 2.5, rng.random()]) for _ in range(rng.randint(1, 30))]
        above = [sum(1 for w in values if w > v) for v in values]
        tied = [sum(1 for w in values if w == v) for v in values]
        assert rankstats.average_ranks(values) == [a + (t + 1) / 2 for a, t in zip(above, tied)]
        for k in range(len(values) + 1):
            assert rankstats.topk_inclusion(values, k) == [min(1.0, max(0.0, (k - a) / t)) for a, t in zip(above, tied)]


def test_a_nan_has_no_rank():
    with pytest.raises(ValueError, match="NaN"):
        rankstats.average_ranks([1.0, float("nan")])
    with pytest.raises(ValueError, match="NaN"):
        rankstats.topk_inclusion([float("nan"), 2.0], 1)
