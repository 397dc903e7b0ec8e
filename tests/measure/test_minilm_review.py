"""The reviewer's figures of the MiniLM study (issue 30 item 7), which its page and its correction
cite: `bundles/minilm-balanced/review.json` is what `measure/studies/minilm/review.py` computes
from the committed rows, and its test arithmetic agrees with scipy's."""
from __future__ import annotations

import json

from scipy import stats

from measure.studies.minilm import review


def test_the_committed_review_is_what_the_rows_give():
    assert (review.BUNDLE / review.OUT).read_text(encoding="utf-8") == review.text()


def test_the_learned_test_could_not_pass_where_the_baseline_is_already_right():
    found = json.loads((review.BUNDLE / review.OUT).read_text(encoding="utf-8"))["learned_test"]
    golden = json.loads((review.BUNDLE / "golden.json").read_text(encoding="utf-8"))["learned"]
    alpha, m, n = golden["alpha"], len(golden["per_dimension"]), found["seeds"]
    # the fewest untied wins (no loss) that pass Holm's first step, and the power there at 0.8
    first = next(k for k in range(1, n + 1) if stats.binomtest(k, k, 0.5, alternative="greater").pvalue <= alpha / m)
    assert found["wins_needed"]["first_step"] == first
    critical = next(k for k in range(n + 1) if stats.binom.sf(k - 1, n, 0.5) <= alpha / m)
    assert abs(found["power"]["first_step"] - stats.binom.sf(critical - 1, n, review.TRUE_WIN_RATE)) < 1e-6
    for d, v in found["per_dimension"].items():
        # a head cannot beat a baseline on a seed the baseline already ranks right, nor on more
        # seeds than the dimension has; where it already loses a seed it cannot reach max_wins
        g = golden["per_dimension"][d]
        assert v["max_wins"] == v["seeds"] - v["seeds_baseline_right"] >= g["wins"]
        if not v["could_pass"]:
            assert v["max_wins"] < first
    assert found["could_not_pass"] == 7 and golden["count"] == 0


def test_a_seed_the_baseline_ranks_right_cannot_be_won():
    held = [{"dimension": "d", "seed_id": f"s{i}", "bag_of_words_margin": 1.0 if i < 3 else -1.0} for i in range(5)]
    golden = {"learned": {"alpha": 0.05, "per_dimension": {
        "d": {"best_baseline": "bag_of_words", "best_baseline_accuracy": 0.6, "seeds": 5}}}}
    out = review.learned_test(golden, held)["per_dimension"]["d"]
    assert (out["seeds_baseline_right"], out["max_wins"], out["best_p"]) == (3, 2, 0.25)
