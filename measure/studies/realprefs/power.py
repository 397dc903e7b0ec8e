"""What the realprefs study's preregistered accuracy test can detect (issue 30), computed before
the model exists, from the held-out sizes and the baselines' per-pair scores.

**The test** (registered in `registrations/realprefs-accuracy-*.yaml`). Per objective, on the
evaluation side of `data/realprefs/split.json`: each held-out pair's score (1 if its margin is
positive, 0.5 if zero, 0 if negative) for the trained model and for the objective's best baseline
(`data/realprefs/baselines.json`, `best`). The unit is the group (a dialogue's first human turn, a
post or article), as the split's: a group is a win when the sum over its pairs of (model score
minus baseline score) is positive, a loss when negative. One-sided exact sign test,
p = P(Binomial(wins + losses, 1/2) >= wins); Holm's step-down procedure over the three objectives
at family-wise alpha 0.05. With one pair a group (nearly all of HH) this is McNemar's exact test.

**The power.** Let `delta` be the true accuracy difference (model minus baseline, per pair) and
`d` the discordance, the share of pairs on which exactly one of the two is right. Given the
baseline's actual per-pair scores, a model with these two numbers is right on a pair the baseline
gets wrong with probability `(d + delta) / 2 / (1 - a)` and wrong on one the baseline gets right
with probability `(d - delta) / 2 / a` (`a` the baseline's accuracy; a baseline tie is drawn
right or wrong by a fair coin each time). `GroupedPower` resamples the evaluation side's
groups `REPS` times, draws such a model on each resample (independently across pairs) and applies
the test with the real group structure; `exact_power` is
the closed form of the pair-level McNemar test (`n` pairs, no groups), a check on the simulation.
The minimal detectable difference (`mde`) is the smallest `delta` on a grid of step `STEP` at
which the power reaches 0.8, at Holm's first-step level `alpha / 3` (sufficient whatever the other
objectives do) and at `alpha` (when the other two are rejected first).

`d` is not known before the model exists. It is estimated from the baselines' disagreement: the
largest of the three pairwise discordances between baselines on that objective, and the figures
are also given on a grid of `d`. A trained model correlated with the frozen-trunk head it starts
from would disagree with it less, which makes the test more sensitive than the estimate says.

`python -m measure.studies.realprefs.power` writes `data/realprefs/power.json` and prints it.
"""
from __future__ import annotations

import json
import sys
from functools import lru_cache
from math import comb

import numpy as np

from measure.studies.realprefs.data import DATA, OBJECTIVES

ALPHA = 0.05
FAMILY = 3
TARGET = 0.8
STEP = 0.0025
REPS = 4000
SEED = 30
D_GRID = (0.2, 0.3, 0.4, 0.5)
BASELINES = DATA / "realprefs" / "baselines.json"
ROWS = DATA / "realprefs" / "baselines_eval.jsonl"
OUT = DATA / "realprefs" / "power.json"


def sign_test_p(wins, losses):
    """One-sided exact sign test p = P(Binomial(wins + losses, 1/2) >= wins), elementwise; 1 when
    nothing is untied."""
    from scipy.stats import binom
    wins, losses = np.asarray(wins), np.asarray(losses)
    return np.where(wins + losses > 0, binom.sf(wins - 1, wins + losses, 0.5), 1.0)


def critical(m: int, alpha: float) -> int:
    """The fewest wins out of `m` untied pairs that the one-sided sign test rejects at `alpha`
    (m + 1 when none does)."""
    tail, c = 0.0, m + 1
    for k in range(m, -1, -1):
        tail += comb(m, k) / 2**m
        if tail > alpha:
            break
        c = k
    return c


@lru_cache(maxsize=None)
def critical_values(n: int, alpha: float) -> np.ndarray:
    """`critical(m, alpha)` for m = 0..n at once (scipy's quantile, then checked exactly at the
    boundary so a rounding in the quantile cannot move a critical value)."""
    from scipy.stats import binom
    m = np.arange(n + 1)
    c = binom.ppf(1 - alpha, m, 0.5).astype(int) + 1
    for _ in range(2):  # step to the exact boundary: P(X >= c) <= alpha < P(X >= c - 1)
        c = np.where(binom.sf(c - 1, m, 0.5) > alpha, c + 1, c)
        c = np.where((c - 1 >= 0) & (binom.sf(c - 2, m, 0.5) <= alpha), c - 1, c)
    return np.minimum(c, m + 1)


def exact_power(n: int, d: float, delta: float, alpha: float) -> float:
    """Power of the pair-level exact McNemar test: n pairs, discordance d, accuracy gain delta."""
    from scipy.stats import binom
    if not 0 <= delta <= d <= 1:
        raise ValueError("need 0 <= delta <= d <= 1")
    pi = 0.5 + delta / (2 * d) if d > 0 else 0.5
    m = np.arange(n + 1)
    crit = critical_values(n, alpha)
    return float((binom.pmf(m, n, d) * binom.sf(crit - 1, m, pi)).sum())


class GroupedPower:
    """Power of the group-level sign test on `groups` against a baseline with per-pair scores
    `base`, by simulation: each replication resamples the evaluation side's groups with
    replacement (so the baseline's outcomes vary as they would over another sample of groups),
    then draws the model's outcome on every drawn pair given the baseline's (see the module
    docstring). The random numbers are drawn once and shared by every (d, delta), so the power is
    monotone in delta and `mde` can bisect."""

    def __init__(self, base: np.ndarray, groups: list[str], reps: int = REPS, seed: int = SEED):
        order = sorted(range(len(groups)), key=lambda i: (groups[i], i))
        keys = [groups[i] for i in order]
        starts = np.array([i for i in range(len(keys)) if i == 0 or keys[i] != keys[i - 1]])
        sizes = np.diff(np.append(starts, len(keys)))
        rng = np.random.default_rng(seed)
        draw = rng.integers(0, len(starts), size=reps * len(starts))
        size_d = sizes[draw]
        offsets = np.cumsum(size_d) - size_d
        pair = np.repeat(starts[draw] - offsets, size_d) + np.arange(size_d.sum())
        self.base = np.asarray(base, dtype=float)[np.array(order)][pair]
        self.right = np.where(self.base == 0.5, rng.random(len(pair)) < 0.5, self.base == 1.0)
        self.u = rng.random(len(pair))
        self.offsets, self.reps, self.n_groups = offsets, reps, len(starts)
        self.a = float(np.mean(base))  # the baseline's accuracy on the evaluation side itself

    def __call__(self, d: float, delta: float, alpha: float) -> float:
        """The share of replications in which the test rejects at `alpha`."""
        up = (d + delta) / 2 / (1 - self.a)      # P(model right | baseline wrong)
        down = (d - delta) / 2 / self.a          # P(model wrong | baseline right)
        if not (0 <= up <= 1 and 0 <= down <= 1):
            return float("nan")
        model = np.where(self.right, self.u >= down, self.u < up).astype(float)
        sums = np.add.reduceat(model - self.base, self.offsets).reshape(self.reps, self.n_groups)
        wins, losses = (sums > 1e-9).sum(1), (sums < -1e-9).sum(1)
        return float((sign_test_p(wins, losses) <= alpha).mean())


def largest_delta(a: float, d: float) -> float:
    """The largest gain a model can have over a baseline of accuracy `a` at discordance `d`: it
    cannot win more pairs than the baseline loses (d + delta <= 2 (1 - a)) nor lose fewer than
    none (delta <= d)."""
    return max(0.0, min(d, 2 * (1 - a) - d))


def mde(power_of, limit: float) -> float | None:
    """The smallest delta on the grid (step STEP, up to `limit`) whose power reaches TARGET, by
    bisection (power_of must be monotone in delta); None when even `limit` does not."""
    grid = np.round(np.arange(0.0, limit - 1e-9, STEP), 6)  # the limit itself can be degenerate
    lo, hi = -1, len(grid) - 1
    if not power_of(float(grid[hi])) >= TARGET:
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if power_of(float(grid[mid])) >= TARGET:
            hi = mid
        else:
            lo = mid
    return float(grid[hi])


def analyse() -> dict:
    """The power document: per objective, sizes, discordance estimate and the MDEs."""
    baselines = json.loads(BASELINES.read_text(encoding="utf-8"))
    rows = [json.loads(line) for line in ROWS.read_text(encoding="utf-8").splitlines()]
    out = {"study": "realprefs", "test": (
        "per objective: group-level one-sided exact sign test of the trained model's pair scores "
        "against the best baseline's on the evaluation side, Holm over the three objectives at "
        "family-wise alpha 0.05"), "alpha": ALPHA, "family": FAMILY, "target_power": TARGET,
        "grid_step": STEP, "reps": REPS, "seed": SEED, "objectives": {}}
    for objective in OBJECTIVES:
        block = baselines["objectives"][objective]
        best = block["best"]
        mine = [r for r in rows if r["objective"] == objective]
        base = np.array([r[f"score_{best}"] for r in mine])
        groups = [r["group"] for r in mine]
        d_hat = round(max(block["discordance"].values()), 3)
        a = float(base.mean())
        res = {"best_baseline": best, "best_accuracy": a, "n_pairs": len(mine),
               "n_groups": len(set(groups)), "discordance_estimate": d_hat,
               "discordance_rule": "largest pairwise discordance among the three baselines"}
        sim = GroupedPower(base, groups)
        limit = largest_delta(a, d_hat)
        res["largest_possible_gain"] = limit
        for label, alpha in (("holm_first_step", ALPHA / FAMILY), ("alpha", ALPHA)):
            res[f"mde_{label}"] = mde(lambda x: sim(d_hat, x, alpha), limit)
            res[f"mde_{label}_exact_pairs"] = mde(lambda x: exact_power(len(mine), d_hat, x, alpha), limit)
        res["mde_holm_first_step_by_discordance"] = {
            str(d): mde(lambda x: sim(d, x, ALPHA / FAMILY), largest_delta(a, d)) for d in D_GRID}
        res["power_holm_first_step_at"] = {str(x): sim(d_hat, x, ALPHA / FAMILY) for x in (0.02, 0.03, 0.05)}
        out["objectives"][objective] = res
    return out


def main(argv: list[str] | None = None) -> int:
    """Write data/realprefs/power.json and print its figures."""
    from measure.runner.jsonio import json_text

    if argv:
        print("usage: python -m measure.studies.realprefs.power (no arguments)", file=sys.stderr)
        return 2
    for path in (BASELINES, ROWS):
        if not path.exists():
            print(f"error: {path}: missing; run python -m measure.studies.realprefs.baselines first", file=sys.stderr)
            return 2
    doc = analyse()
    tmp = OUT.with_name(f".{OUT.name}.tmp")
    tmp.write_text(json_text(doc), encoding="utf-8")
    tmp.replace(OUT)
    for objective, r in doc["objectives"].items():
        print(f"{objective}: n {r['n_pairs']} pairs / {r['n_groups']} groups, best {r['best_baseline']} "
              f"{r['best_accuracy']:.3f}, d {r['discordance_estimate']}: MDE {r['mde_holm_first_step']} "
              f"at alpha/3 ({r['mde_holm_first_step_exact_pairs']} pair-level exact), {r['mde_alpha']} at alpha")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
