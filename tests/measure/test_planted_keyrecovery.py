"""bundle_kit/keyrecovery.py on hand-made rows whose answers are known: scores, floors,
aggregations, metrics, key definitions, the specification grid, intervals and the checks that
reproduce.py runs (each able to fail)."""
from __future__ import annotations

import math
import random

import pytest

from bundle_kit import keyrecovery as kr


def _fixture(n_pairs: int = 4, families=("fa", "fb"), organisms=2, noise=0.02, seed=0):
    """Rows and a key: per dimension, 10 heads; head_L0_H0 and head_L0_H1 are the key (circuit);
    only head_L0_H0 writes the reward at the scoring token (direct) and only head_L0_H1 is
    single-necessary. Attribution sees H0 and never H1; patching (every mode) sees both, and an
    off-key head_L0_H2 moves it by 0.8 under mean and zero ablation only."""
    rng = random.Random(seed)
    names = [f"head_L0_H{j}" for j in range(10)]
    attribution, patching, dims = [], [], {}
    for family in families:
        for o in range(organisms):
            organism = f"{family}-s{o}"
            d = f"{organism}-rule"
            dims[d] = {"organism": organism, "family": family, "rule": "rule", "mechanism": "m",
                       "components": names[:2],
                       "keys": {"circuit": names[:2], "direct": names[:1], "single": names[1:2]},
                       "roles": {names[0]: {"role": "carrier", "shapley": 0.7},
                                 names[1]: {"role": "mover", "shapley": 0.3}},
                       "distractors": {names[2]: {"role": "offdist_gate"}}}
            for p in range(n_pairs):
                pid = f"{d}-{p}"
                margin = 1.0
                for j, c in enumerate(names):
                    a = {0: 0.7, 1: 0.0}.get(j, rng.gauss(0, noise))
                    attribution.append({"dimension": d, "seed_id": pid, "pair_id": pid, "component": c,
                                        "attribution": a, "margin": margin})
                    for mode in kr.MODES:
                        e = {0: -0.7, 1: -1.0}.get(j, rng.gauss(0, noise))
                        if j == 2 and mode != "swap":
                            e = -0.8
                        patching.append({"dimension": d, "seed_id": pid, "pair_id": pid, "component": c,
                                         "mode": mode, "clean_margin": margin, "effect": e})
    return attribution, patching, {"dimensions": dims}


def test_scores_follow_the_aggregation_and_the_floor():
    entry = {"components": ["a", "b"], "seeds": {
        "s1": [{"attribution": [0.5, 0.02]}], "s2": [{"attribution": [-0.5, 0.02]}]}}
    assert kr.scores(entry, ["s1", "s2"], "attribution", "site", 0.0) == [0.0, pytest.approx(0.02)]
    assert kr.scores(entry, ["s1", "s2"], "attribution", "magnitude", 0.0) == [0.5, pytest.approx(0.02)]
    assert kr.scores(entry, ["s1", "s2"], "attribution", "magnitude", 0.05) == [0.5, 0.0]
    # a seed drawn twice counts twice
    assert kr.scores(entry, ["s1", "s1", "s2"], "attribution", "signed", 0.0)[0] == pytest.approx(0.5 / 3)


def test_metrics_auc_and_precision_at_k_with_ties():
    names = ["a", "b", "c", "d"]
    assert kr.metric([3, 2, 1, 0], names, ["a", "b"], "auc") == 1.0
    assert kr.metric([0, 1, 2, 3], names, ["a", "b"], "auc") == 0.0
    assert kr.metric([1, 0, 0, 0], names, ["a", "b"], "precision_at_k") == pytest.approx(0.5 + 0.5 / 3)
    assert math.isnan(kr.metric([1, 0, 0, 0], names, [], "auc"))
    assert kr.chance(names, ["a"], "precision_at_k") == 0.25


def test_the_primary_specification_scores_each_method_as_designed():
    attribution, patching, key = _fixture()
    block = kr.summary(attribution, patching, key, {"resamples": 20})
    by = block["by_method"]
    # attribution finds H0 but scores H1 zero: H1 ties with the noise floored to zero
    assert 0.5 < by["attribution"]["value"] < 1.0
    assert by["patching_swap"]["value"] == 1.0
    assert block["headline"]["gap"]["value"] == pytest.approx(by["patching_mean"]["value"] - by["attribution"]["value"])
    # the off-key head that mean and zero ablation credit takes H0's place in their top two
    assert by["patching_mean"]["value"] == pytest.approx(15 / 16)
    assert block["traps"]["offdist_gate"]["patching_mean"] == 1.0
    assert block["traps"]["offdist_gate"]["patching_swap"] == 0.0
    assert block["traps"]["mover"]["attribution"] < 0.2
    low, high = block["headline"]["attribution"]["ci"]
    assert 0 <= low <= high <= 1
    assert block["traps"]["backup"]["attribution"] is None   # no backups rule in this fixture
    assert set(block["by_family"]) == {"fa", "fb"}


def test_the_key_definition_changes_the_verdict():
    attribution, patching, key = _fixture()
    table = kr.pair_table(attribution, patching)
    direct = dict(kr.PRIMARY, key="direct")
    single = dict(kr.PRIMARY, key="single")
    assert kr.headline(table, key, direct, "attribution") == 1.0    # H0 alone: attribution is perfect
    assert kr.headline(table, key, single, "attribution") < 0.6     # H1 alone: attribution is blind
    assert kr.headline(table, key, single, "patching_swap") == 1.0


def test_the_grid_has_every_specification_once_and_one_primary_per_headline():
    attribution, patching, key = _fixture()
    rows = kr.spec_rows(kr.pair_table(attribution, patching), key)
    counts = {h: sum(1 for r in rows if r["headline"] == h) for h in ("attribution", "patching", "gap")}
    assert counts == {"attribution": 90, "patching": 270, "gap": 270}
    assert {h: sum(1 for r in rows if r["headline"] == h and r["primary"]) for h in counts} == \
        {"attribution": 1, "patching": 1, "gap": 1}
    summary = kr.curve_summary(rows)
    assert summary["gap"]["share"] == sum(r["holds"] for r in rows if r["headline"] == "gap") / 270
    assert summary["gap"]["robust"] == (summary["gap"]["share"] >= kr.ROBUST_SHARE)


def test_check_recomputes_every_point_estimate_and_catches_tampering():
    attribution, patching, key = _fixture()
    block = kr.summary(attribution, patching, key, {"resamples": 10})
    _lines, comparisons, ok = kr.check(attribution, patching, key, block, 1e-9)
    assert ok and len(comparisons) > 50
    block["headline"]["gap"]["value"] += 0.01
    _lines, comparisons, ok = kr.check(attribution, patching, key, block, 1e-9)
    assert not ok
    assert any(label == "key_recovery/headline/gap/value" and d > 1e-9 for d, label in comparisons)


def test_check_spec_rows_catches_a_changed_row():
    attribution, patching, key = _fixture()
    rows = kr.spec_rows(kr.pair_table(attribution, patching), key)
    comparisons, ok = kr.check_spec_rows(attribution, patching, key, [dict(r) for r in rows], 1e-9)
    assert ok and len(comparisons) == len(rows)
    tampered = [dict(r) for r in rows]
    tampered[5]["value"] += 0.001
    comparisons, ok = kr.check_spec_rows(attribution, patching, key, tampered, 1e-9)
    assert not ok and max(comparisons)[1] == "spec_curve.jsonl:6"
    flipped = [dict(r) for r in rows]
    flipped[0]["holds"] = not flipped[0]["holds"]
    assert not kr.check_spec_rows(attribution, patching, key, flipped, 1e-9)[1]


def test_a_pair_missing_a_component_is_refused():
    attribution, patching, key = _fixture()
    with pytest.raises(ValueError, match="lacks some components"):
        kr.pair_table(attribution, [r for r in patching if not (r["component"] == "head_L0_H3" and r["mode"] == "zero")])
