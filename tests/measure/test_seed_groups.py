"""The seed bootstrap's grouped scores (measure/runner/summary.py, SeedGroups) are, bit for bit,
rankstats.component_scores of the joined table a resample draws, built the way the bundle's own
reproduce.py builds it: every row of every drawn seed, a seed drawn twice counting twice."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from bundle_kit import rankstats
from bundle_kit.contract import RANK_MODE
from measure.runner.summary import SeedGroups, rows_by_seed

REPO = Path(__file__).resolve().parents[2]


def joined_table(by_seed: dict, seeds: list[str]) -> dict:
    """The resample's rows as one joined table: each draw's pairs under keys of their own."""
    joined = {}
    for k, seed in enumerate(seeds):
        for (dimension, pair, component), both in by_seed[seed]:
            joined[(dimension, f"{pair}#{k}", component)] = both
    return joined


def committed(study: str) -> dict:
    folder = REPO / "bundles" / study
    attr = rankstats.read_jsonl(folder / "attribution_per_pair.jsonl")
    patch = rankstats.read_jsonl(folder / "patching_per_pair.jsonl")
    return rankstats.join_rows(attr, patch, RANK_MODE)


@pytest.mark.parametrize("patch_score", rankstats.PATCH_SCORES)
@pytest.mark.parametrize("study", ["organism", "minilm-balanced"])
def test_grouped_scores_are_the_joined_tables_scores_bit_for_bit(study, patch_score):
    by_seed = rows_by_seed(committed(study))
    assert len(by_seed) > 10, f"{study}: too few seeds to resample"
    groups = SeedGroups(by_seed, patch_score)
    seeds = sorted(by_seed)
    rng = random.Random(7)
    draws = [seeds, list(reversed(seeds))] + [[rng.choice(seeds) for _ in seeds] for _ in range(20)]
    assert any(len(set(d)) < len(d) for d in draws), "no resample drew a seed twice"
    for drawn in draws:
        assert groups.scores(drawn) == rankstats.component_scores(joined_table(by_seed, drawn), patch_score)


def _row(seed: str, pair: str, component: str, attribution: float, effect: float, margin: float):
    attr = {"dimension": "d", "pair_id": pair, "seed_id": seed, "component": component, "attribution": attribution}
    patch = {"dimension": "d", "pair_id": pair, "seed_id": seed, "component": component, "mode": RANK_MODE,
             "effect": effect, "clean_margin": margin}
    return ("d", pair, component), (attr, patch)


def test_the_order_rows_are_summed_in_cannot_move_a_bit():
    """Magnitudes far apart, where a plain left-to-right sum depends on the order: the groups
    extend seed by seed, the joined table holds them row by row, and both give the same floats."""
    values = [1e16, 1.0, -1e16, 3.0, 1e-8, 2.5e15, -7.0, 1e-300]
    by_seed = {f"s{i}": [_row(f"s{i}", f"p{i}", c, v * (1 + k), v / 3, 1 + abs(v) * (k + 1))
                         for k, c in enumerate(["a", "b"])] for i, v in enumerate(values)}
    seeds = sorted(by_seed)
    for patch_score in rankstats.PATCH_SCORES:
        groups = SeedGroups(by_seed, patch_score)
        for drawn in (seeds, seeds[::-1], ["s0", "s2", "s0", "s1"], ["s1", "s1", "s1", "s0", "s2"]):
            assert groups.scores(drawn) == rankstats.component_scores(joined_table(by_seed, drawn), patch_score)
    assert sum(values) != sum(reversed(values)), "the values no longer depend on the order of a plain sum"


def test_a_seed_drawn_twice_weighs_twice():
    by_seed = {"s0": [_row("s0", "p0", "a", 1.0, 1.0, 1.0)], "s1": [_row("s1", "p1", "a", 4.0, 1.0, 4.0)]}
    groups = SeedGroups(by_seed, "mean_ratio")
    assert groups.scores(["s0", "s1"])["d"]["a"] == (2.5, 0.625)
    assert groups.scores(["s0", "s0", "s1"])["d"]["a"] == (2.0, 0.75)


def test_an_unknown_patch_score_is_refused():
    with pytest.raises(ValueError, match="unknown patch score"):
        SeedGroups({}, "median")
