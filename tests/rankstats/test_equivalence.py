"""The equivalence test of one study's gap against another's (bundle_kit/hiddenkeys.py
`equivalence`, registrations/transfer-equivalence.yaml): two one-sided tests on the interval of
the difference, and the three verdicts."""
from __future__ import annotations

import pytest

from bundle_kit import hiddenkeys


def test_equal_gaps_with_little_spread_transfer():
    out = hiddenkeys.equivalence([0.02, 0.03] * 10, [0.02, 0.03] * 8, 0.06)
    assert out["verdict"] == "transfers" and abs(out["difference"]) < 1e-12
    assert -0.06 < out["interval"][0] <= out["interval"][1] < 0.06


def test_a_difference_past_the_bound_on_both_ends_fails():
    out = hiddenkeys.equivalence([0.20, 0.22] * 10, [0.0, 0.01] * 8, 0.06)
    assert out["verdict"] == "fails" and out["interval"][0] >= 0.06


def test_an_interval_that_straddles_the_bound_is_inconclusive():
    # one organism in five far out: the difference's interval reaches past the bound but not wholly
    out = hiddenkeys.equivalence([0.0, 0.0, 0.0, 0.0, 0.3] * 4, [0.0] * 10, 0.06)
    lo, hi = out["interval"]
    assert out["verdict"] == "inconclusive" and lo < 0.06 < hi


def test_opposite_signs_that_both_exclude_zero_fail_even_inside_the_bound():
    out = hiddenkeys.equivalence([0.02, 0.03] * 10, [-0.02, -0.03] * 10, 0.06)
    assert -0.06 < out["interval"][0] and out["interval"][1] < 0.06   # inside the band...
    assert out["verdict"] == "fails"                                   # ...but the sign flipped


def test_equivalence_needs_organisms_on_both_sides():
    with pytest.raises(ValueError, match="at least one organism"):
        hiddenkeys.equivalence([], [0.1], 0.06)
