"""What a reviewer found in the MiniLM study's bundle (issue 30 item 7), recomputed from its rows
into `bundles/minilm-balanced/review.json`, which the study page and its correction cite.

    python -m measure.studies.minilm.review          # writes review.json beside the rows
    python -m measure.studies.minilm.review --check  # exits 1 when the committed file differs

Standard library and `bundle_kit/rankstats.py` only; no model is run. What it holds:

- `learned_test`: what the preregistered learned-dimension test could find. A head wins a seed
  when it ranks more of the seed's rows right than the dimension's best baseline, so on a seed the
  baseline already ranks right a head can at best tie: `max_wins` counts the other seeds, and
  `best_p` is the sign test's p with all of them won and none lost. `could_pass` runs Holm's
  procedure on every dimension's best p at once (lowering any p never undoes a rejection, so this
  is the most any outcome could give). `wins_needed` is the fewest untied wins with no loss that
  pass at Holm's first step (alpha over the number of dimensions) and at its last (alpha), and
  `power` the chance of passing there when the head truly wins each of `seeds` untied seeds with
  probability `true_win_rate`.
- `words_differing`: per dimension, the median over seeds of how many words the chosen and the
  rejected response differ in (difflib's opcodes over the two word lists, the longer side of each
  change), and the share of seeds that differ in at most two.
- `random_comparison`: the rho along the heads minus the rho along the random directions, paired
  by dimension: how many are below zero, their mean, and the one-sided sign test of "below".
- `offdist`: per patching mode along the heads, how many blocks are flagged on every pair and on
  none (a per-block constant in mean mode), and which.
- `crystallization`: how many pairs end with a negative margin (the head prefers the rejected
  response, so the depth dates the wrong preference) and the mean depth with and without them.
- `rho_ci_along_heads`: golden.json's seed-bootstrap interval of each dimension's rho along the
  heads, as the `{dimension: [low, high]}` block a `rho_bars` figure reads.
"""
from __future__ import annotations

import argparse
import difflib
import json
import statistics
import sys
from collections import defaultdict
from math import comb
from pathlib import Path

from bundle_kit import rankstats
from safe_io import write_atomic

REPO = Path(__file__).resolve().parents[3]
BUNDLE = REPO / "bundles" / "minilm-balanced"
OUT = "review.json"
TRUE_WIN_RATE = 0.8      # the power is given at this win rate (issue 30's reviewer used it)
FEW_WORDS = 2            # "differ in at most two words"


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (BUNDLE / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def _score(margin: float) -> float:
    return 1.0 if margin > 0 else 0.5 if margin == 0 else 0.0


def _fewest_wins(threshold: float, seeds: int) -> int | None:
    """The fewest wins, with no loss, whose sign test p is at or under `threshold`."""
    return next((k for k in range(1, seeds + 1) if rankstats.sign_test(k, 0) <= threshold), None)


def _power(threshold: float, seeds: int, rate: float) -> float:
    """P(the sign test over `seeds` untied seeds passes at `threshold`) when each is a win with
    probability `rate`."""
    passing = [k for k in range(seeds + 1) if rankstats.sign_test(k, seeds - k) <= threshold]
    return sum(comb(seeds, k) * rate ** k * (1 - rate) ** (seeds - k) for k in passing)


def learned_test(golden: dict, held: list[dict]) -> dict:
    """The `learned_test` block: the most each dimension's test could give, and the test's power."""
    learned = golden["learned"]
    alpha, per = learned["alpha"], learned["per_dimension"]
    seeds = {d: v["seeds"] for d, v in per.items()}
    n_seeds = max(seeds.values())
    out, best_p = {}, {}
    for d, v in per.items():
        base = v["best_baseline"]
        by_seed = defaultdict(list)
        for r in held:
            if r["dimension"] == d:
                by_seed[r["seed_id"]].append(0.5 if base == "chance" else _score(r[f"{base}_margin"]))
        perfect = sum(1 for scores in by_seed.values() if statistics.mean(scores) == 1.0)
        max_wins = len(by_seed) - perfect
        best_p[d] = rankstats.sign_test(max_wins, 0)
        out[d] = {"best_baseline": base, "best_baseline_accuracy": v["best_baseline_accuracy"],
                  "seeds": len(by_seed), "seeds_baseline_right": perfect, "max_wins": max_wins,
                  "best_p": round(best_p[d], 6)}
    holm = rankstats.holm(best_p, alpha)
    for d in out:
        out[d]["could_pass"] = holm[d][1]
    first, last = alpha / len(per), alpha
    return {
        "alpha": alpha, "dimensions": len(per), "seeds": n_seeds,
        "wins_needed": {"first_step": _fewest_wins(first, n_seeds), "last_step": _fewest_wins(last, n_seeds)},
        "power": {"true_win_rate": TRUE_WIN_RATE, "untied_seeds": n_seeds,
                  "first_step": round(_power(first, n_seeds, TRUE_WIN_RATE), 6),
                  "last_step": round(_power(last, n_seeds, TRUE_WIN_RATE), 6)},
        "could_not_pass": sum(1 for d in out if not out[d]["could_pass"]),
        "dimensions_could_not_pass": [d for d in out if not out[d]["could_pass"]],
        "max_wins_where_it_could_not": {
            "min": min(out[d]["max_wins"] for d in out if not out[d]["could_pass"]),
            "max": max(out[d]["max_wins"] for d in out if not out[d]["could_pass"])},
        "per_dimension": out,
    }


def _words_differing(a: str, b: str) -> int:
    x, y = a.split(), b.split()
    ops = difflib.SequenceMatcher(a=x, b=y, autojunk=False).get_opcodes()
    return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in ops if tag != "equal")


def words_differing(pairs: list[dict], per_dimension: dict) -> dict:
    """The `words_differing` block, over each seed's own row (its prompt is framed in the other)."""
    by_dim = defaultdict(list)
    for p in pairs:
        if p["pair_id"].endswith("-m0"):
            by_dim[p["dimension"]].append(_words_differing(p["chosen"], p["rejected"]))
    return {d: {"median": statistics.median(by_dim[d]),
                "share_at_most_two": round(sum(1 for n in by_dim[d] if n <= FEW_WORDS) / len(by_dim[d]), 6),
                "head_accuracy": per_dimension[d]["head_accuracy"],
                "train_accuracy": per_dimension[d]["train_accuracy"]}
            for d in per_dimension}


def random_comparison(golden: dict) -> dict:
    """The `random_comparison` block: heads' rho minus the random directions' rho, per dimension."""
    heads, random = golden["per_dimension_rho"], golden["random_rho"]["per_dimension_rho"]
    diffs = {d: round(heads[d] - random[d], 6) for d in sorted(heads)}
    below = sum(1 for v in diffs.values() if v < 0)
    above = sum(1 for v in diffs.values() if v > 0)
    return {"dimensions": len(diffs), "heads_below_random": below, "heads_above_random": above,
            "mean_difference": round(statistics.mean(diffs.values()), 6),
            "sign_test_p_below": round(rankstats.sign_test(below, above), 6), "per_dimension": diffs}


def offdist(patching: list[dict]) -> dict:
    """The `offdist` block: blocks flagged on every pair and on none, per mode."""
    out = {}
    for mode in sorted({r["mode"] for r in patching}):
        flags = defaultdict(list)
        for r in patching:
            if r["mode"] == mode:
                flags[r["component"]].append(bool(r["offdist_flag"]))
        every = sorted(c for c, f in flags.items() if all(f))
        none = sorted(c for c, f in flags.items() if not any(f))
        out[mode] = {"blocks": len(flags), "pairs": len(next(iter(flags.values()))),
                     "flagged_on_every_pair": len(every), "flagged_on_no_pair": len(none),
                     "blocks_flagged_on_no_pair": none,
                     "flagged_on_some_pairs": len(flags) - len(every) - len(none)}
    return out


def crystallization(lens: list[dict]) -> dict:
    """The `crystallization` block: the mean depth over every pair and over those ending positive."""
    by_pair = defaultdict(list)
    for r in lens:
        by_pair[(r["dimension"], r["pair_id"])].append((r["layer"], r["running_margin"]))
    depth, positive = [], []
    for values in by_pair.values():
        margins = [m for _, m in sorted(values)]
        depth.append(rankstats.crystallization_depth(margins))
        if margins[-1] > 0:
            positive.append(depth[-1])
    return {"pairs": len(depth), "pairs_final_margin_negative": len(depth) - len(positive),
            "mean_depth_every_pair": round(rankstats.mean(depth), 6),
            "mean_depth_final_margin_positive": round(rankstats.mean(positive), 6)}


def rho_ci(golden: dict) -> dict:
    """The `rho_ci_along_heads` block: each dimension's interval, copied from rank_agreement."""
    per = golden["rank_agreement"]["per_dimension"]
    return {d: per[d]["ci"] for d in sorted(per)}


def review() -> dict:
    """The whole review, from the committed bundle."""
    golden = json.loads((BUNDLE / "golden.json").read_text(encoding="utf-8"))
    return {
        "about": "recomputed from this bundle's rows by measure/studies/minilm/review.py (issue 30 item 7)",
        "learned_test": learned_test(golden, _rows("heldout_per_pair.jsonl")),
        "words_differing": words_differing(_rows("pairs.jsonl"), golden["learned"]["per_dimension"]),
        "random_comparison": random_comparison(golden),
        "offdist": offdist(_rows("patching_per_pair.jsonl")),
        "crystallization": crystallization(_rows("lens_per_pair.jsonl")),
        "rho_ci_along_heads": rho_ci(golden),
    }


def text() -> str:
    """review.json as written: indented, keys in the order above, a final newline."""
    return json.dumps(review(), indent=2) + "\n"


def main(argv=None) -> int:
    """Write review.json (atomically), or with --check compare it with the committed one."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed review.json differs")
    args = parser.parse_args(argv)
    path = BUNDLE / OUT
    if args.check:
        same = path.is_file() and path.read_text(encoding="utf-8") == text()
        print(f"{path.relative_to(REPO)}: {'up to date' if same else 'differs from what the rows give'}")
        return 0 if same else 1
    write_atomic(path, text().encode("utf-8"))
    print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
