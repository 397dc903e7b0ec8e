"""Key recovery of hidden keys (bundle_kit/hiddenkeys.py): the two scores, AUC against a key,
decoys on null twins, and the summary's validity."""
from __future__ import annotations

import math

import pytest

from bundle_kit import hiddenkeys

COMPONENTS = [f"head_L{i}_H{h}" for i in range(2) for h in range(2)] + ["mlp_L0", "mlp_L1"]


def rows(dimension: str, attribution: dict, effect: dict, margin: float = 2.0, pairs: int = 3):
    """Attribution and mean-mode patching rows: every pair gives each component the same values."""
    a, p = [], []
    for k in range(pairs):
        for c in COMPONENTS + ["attn_L0"]:   # a block outside the universe, to be ignored
            base = {"dimension": dimension, "pair_id": f"{dimension}-{k}", "seed_id": f"{dimension}-{k}", "component": c}
            a.append({**base, "attribution": attribution.get(c, 0.0), "margin": margin})
            p.append({**base, "mode": "mean", "clean_margin": margin, "effect": effect.get(c, 0.0)})
            p.append({**base, "mode": "zero", "clean_margin": margin, "effect": 99.0})
    return a, p


def test_scores_are_the_magnitude_of_mean_attribution_and_the_ratio_of_sums_both_in_margins():
    a, p = rows("d", {"mlp_L1": -1.5, "head_L0_H0": 0.5}, {"mlp_L1": -1.0, "head_L1_H1": 0.4})
    s = hiddenkeys.scores(a, p, "d")
    assert set(s["attribution"]) == set(COMPONENTS)
    assert s["attribution"]["mlp_L1"] == pytest.approx(0.75)   # |mean| in units of the mean |margin| (2)
    assert s["patching"]["mlp_L1"] == pytest.approx(0.5)      # |-1| / 2, zero mode ignored
    assert s["patching"]["head_L1_H1"] == pytest.approx(0.2)


def test_a_member_that_writes_nothing_at_the_scoring_token_costs_attribution_only():
    key = ["head_L0_H0", "mlp_L1"]
    # mlp_L1 is necessary (patching moves the margin) but writes nothing at the scoring token
    a, p = rows("s00-rule", {"head_L0_H0": 2.0, "head_L1_H0": 0.3}, {"head_L0_H0": 1.0, "mlp_L1": 0.9})
    na, np_ = rows("s00-null", {}, {"head_L0_H1": 0.1}, margin=0.01)
    result = hiddenkeys.organism(a + na, p + np_, "s00-rule", "s00-null", key, [["head_L0_H1", "mlp_L0"]])
    assert result["patching"] == 1.0
    assert result["attribution"] == pytest.approx((1.0 + 0.375) / 2)   # mlp_L1 ties four zeros below head_L1_H0
    assert result["gap"] == pytest.approx(1.0 - result["attribution"])
    assert result["null"]["patching"] == pytest.approx((1.0 + 0.5) / 2)   # the decoy head beats all, mlp_L0 ties all
    assert result["null"]["attribution"] == 0.5
    assert result["key_on_null"] == {"attribution": 0.5, "patching": 0.375}   # only the decoy head moves a null margin


def test_the_summary_averages_valid_organisms_and_fails_on_voids_or_a_biased_null():
    def org(attribution, patching, null=0.5):
        return {"attribution": attribution, "patching": patching, "gap": patching - attribution,
                "null": {"attribution": null, "patching": null}, "key_on_null": {"attribution": 0.4, "patching": 0.6}}
    organisms = {"s00": org(0.8, 1.0), "s01": org(0.1, 0.1), "s02": org(0.6, 1.0)}
    out = hiddenkeys.summary(organisms, {"s00": True, "s01": False, "s02": True})
    assert out["key_recovery"]["gap"]["value"] == pytest.approx(0.3)
    lo, hi = out["key_recovery"]["gap"]["interval"]
    assert lo == pytest.approx(0.2) and hi == pytest.approx(0.4)   # resamples of two organisms: 0.2, 0.3, 0.4
    assert out["validity"] == {"void_share": pytest.approx(1 / 3), "failed": 0}
    assert out["null"]["worst_distance"]["value"] == 0
    assert out["null"]["key_on_null"] == {"attribution": pytest.approx(0.4), "patching": pytest.approx(0.6)}
    biased = dict(organisms, s00=org(0.8, 1.0, null=0.9))
    assert hiddenkeys.summary(biased, {"s00": True, "s01": False, "s02": True})["validity"]["failed"] == 1
    mostly_void = hiddenkeys.summary(organisms, {"s00": True, "s01": False, "s02": False})
    assert mostly_void["validity"]["failed"] == 1
    nothing = hiddenkeys.summary(organisms, {"s00": False, "s01": False, "s02": False})
    assert math.isnan(nothing["key_recovery"]["gap"]["value"])


def test_a_key_member_without_scores_is_an_error_not_a_silent_zero():
    a, p = rows("d", {}, {})
    with pytest.raises(ValueError, match="head_L3_H0 have no attribution score"):
        hiddenkeys.recovery(hiddenkeys.scores(a, p, "d"), ["head_L3_H0"])


def test_the_grid_starts_with_the_primary_and_a_floor_zeroes_small_scores():
    specs = hiddenkeys.specifications()
    assert specs[0] == hiddenkeys.PRIMARY and len(specs) == 36 == len({hiddenkeys.spec_name(s) for s in specs})
    a, p = rows("d", {"mlp_L1": 0.05, "head_L0_H0": -1.0}, {"mlp_L1": 0.05, "head_L0_H0": 1.0})
    floored = hiddenkeys.scores(a, p, "d", dict(hiddenkeys.PRIMARY, floor=0.05))
    assert floored["attribution"]["mlp_L1"] == 0.0 and floored["patching"]["mlp_L1"] == 0.0   # 0.025 of the margin
    assert floored["attribution"]["head_L0_H0"] == pytest.approx(0.5)
    both_ways = hiddenkeys.scores(a, p, "d", dict(hiddenkeys.PRIMARY, attribution="mean_abs", patch_score="mean_ratio"))
    assert both_ways["attribution"]["head_L0_H0"] == pytest.approx(0.5) and both_ways["patching"]["head_L0_H0"] == pytest.approx(0.5)


def test_an_order_needs_an_interval_clear_of_zero_and_nine_specifications_in_ten():
    def org(gap):
        return {"attribution": 0.7, "patching": 0.7 + gap, "gap": gap, "null": {"attribution": 0.5, "patching": 0.5},
                "key_on_null": {"attribution": 0.5, "patching": 0.5}}
    valid = {"a": True, "b": True}
    primary = hiddenkeys.spec_name(hiddenkeys.PRIMARY)
    by_spec = {primary: {"a": org(0.2), "b": org(0.1)}, **{f"s{k}": {"a": org(0.1), "b": org(0.1)} for k in range(8)},
               "against": {"a": org(-0.1), "b": org(-0.2)}}
    curve = hiddenkeys.spec_curve(by_spec, valid)
    assert curve["specifications"] == 10 and curve["share_agreeing"]["gap"] == 0.9
    block = hiddenkeys.summary(by_spec[primary], valid)
    assert hiddenkeys.order_claimed(block, curve)
    by_spec["s0"] = by_spec["against"]
    assert not hiddenkeys.order_claimed(block, hiddenkeys.spec_curve(by_spec, valid))   # 0.8 of specifications


def _three_modes(a, p):
    """Contract rows in all three modes (the bundle's rows need each)."""
    mean = [r for r in p if r["mode"] == "mean"]
    return a, mean + [dict(r, mode="zero", effect=r["effect"] * 2) for r in mean] + \
        [dict(r, mode="swap", effect=-r["effect"]) for r in mean]


def test_the_bundle_rows_hold_every_component_and_mode_and_give_back_the_same_scores():
    a, p = _three_modes(*rows("d", {"mlp_L1": -1.5, "head_L0_H0": 0.5}, {"mlp_L1": -1.0, "head_L1_H1": 0.4}))
    wide = hiddenkeys.wide_rows(a, p)
    assert len(wide) == 3 and wide[0]["components"] == sorted(COMPONENTS)   # attn_L0 is not in the universe
    back_a, back_p = hiddenkeys.long_rows(wide)
    for spec in hiddenkeys.specifications():
        assert hiddenkeys.scores(back_a, back_p, "d", spec) == hiddenkeys.scores(a, p, "d", spec)
    with pytest.raises(ValueError, match="mlp_L1: no swap"):
        hiddenkeys.wide_rows(a, [r for r in p if not (r["mode"] == "swap" and r["component"] == "mlp_L1")])
    with pytest.raises(ValueError, match="clean margin"):
        hiddenkeys.wide_rows(a, [dict(r, clean_margin=3.0) if r["mode"] == "zero" else r for r in p])


def test_recompute_from_rows_and_keys_gives_the_summary_the_curve_and_each_rule():
    key_doc = {"organisms": {}}
    a_all, p_all = [], []
    for k, (rule, member) in enumerate([("politeness", "head_L0_H0"), ("hazard", "head_L1_H0"), ("hazard", "mlp_L0")]):
        a, p = _three_modes(*rows(f"s{k:02d}-{rule}", {member: 2.0}, {member: 1.5}))
        na, np_ = _three_modes(*rows(f"s{k:02d}-null", {}, {"head_L0_H1": 0.1}, margin=0.01))
        a_all += a + na
        p_all += p + np_
        key_doc["organisms"][f"seed-{k:02d}"] = {
            "keyed": rule, "keyed_dimension": f"s{k:02d}-{rule}", "null_dimension": f"s{k:02d}-null",
            "key": [member, "mlp_L1"], "decoys": [["head_L0_H1", "mlp_L1"]], "valid": k != 2}
    result = hiddenkeys.recompute(hiddenkeys.wide_rows(a_all, p_all), key_doc)
    assert result["summary"]["key_recovery"]["valid"] == 2 and result["curve"]["specifications"] == 36
    by_rule = result["by_rule"]["patching"]
    assert set(by_rule["per_family"]) == {"politeness", "hazard"}   # the void organism's rule has no valid one
    assert by_rule["value"] == pytest.approx(result["summary"]["key_recovery"]["patching"]["value"])
    spec = hiddenkeys.spec_rows(result["curve"])
    counts = {h: sum(1 for r in spec if r["headline"] == h) for h in ("gap", "attribution", "patching")}
    assert counts == {"gap": 36, "attribution": 6, "patching": 18}   # only the choices each depends on
    assert [r["primary"] for r in spec if r["headline"] == "attribution"].count(True) == 1
    with pytest.raises(ValueError, match="no rows of dimension"):
        hiddenkeys.recompute(hiddenkeys.wide_rows(a_all, p_all)[:3], key_doc)
