"""Rank statistics shared by the measurement stage, the site build and every study bundle.

Standard library only, Python 3.10+: this file is copied verbatim into each bundle zip, where
`reproduce.py` imports it. Every definition is written out in docs/statistics.md of the
repository this file comes from; in short:

- attribution score of a component = mean signed margin attribution over pairs (rank 1 = largest)
- patch score of a component = mean |effect| / |clean margin| over pairs (`mean_ratio`, the
  default) or sum |effect| / sum |clean margin| (`ratio_of_means`); rank 1 = largest
- Spearman rho = Pearson correlation of average ranks (ties share the mean rank), computed over
  the components both methods cover
"""
from __future__ import annotations

import itertools
import json
import math
import random
from typing import Callable, Iterable, Sequence

ATTRIBUTION_FIELDS = ("dimension", "pair_id", "seed_id", "component", "attribution", "margin")
PATCHING_FIELDS = ("dimension", "pair_id", "seed_id", "component", "mode", "clean_margin", "effect")


class FixtureError(ValueError):
    """A fixture that cannot be read; names the file and the 1-based line."""

    def __init__(self, path: str, line: int | None, message: str):
        self.path, self.line, self.message = str(path), line, message
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {message}")


def read_jsonl(path, required: Sequence[str] = ()) -> list[dict]:
    """Parse a JSONL file; every row must be an object holding the `required` fields."""
    rows = []
    try:
        handle = open(path, encoding="utf-8")
    except OSError as exc:
        raise FixtureError(path, None, f"cannot open: {exc.strerror}") from None
    with handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                row = _DECODER.decode(text)
            except ValueError as exc:
                raise FixtureError(path, number, f"not valid JSON ({exc})") from None
            if not isinstance(row, dict):
                raise FixtureError(path, number, "row is not a JSON object")
            missing = [field for field in required if field not in row]
            if missing:
                raise FixtureError(path, number, f"row lacks field(s): {', '.join(missing)}")
            row["_line"] = number
            rows.append(row)
    return rows


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a number")


# One decoder for every row: json.loads with a keyword builds a new decoder per call (slow at 100k rows).
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def mean(values: Iterable[float]) -> float:
    values = list(values)
    if not values:
        raise ValueError("mean of no values")
    return math.fsum(values) / len(values)


def average_ranks(values: Sequence[float]) -> list[float]:
    """Rank 1 = largest; tied values share the mean of the ranks they span."""
    shared = {}
    start = 0   # the ranks are start + 1 .. end + 1, 0-based start and end
    for value, tied in itertools.groupby(sorted(_numbers(values), reverse=True)):
        end = start + sum(1 for _ in tied) - 1
        shared[value] = (start + end) / 2 + 1
        start = end + 1
    return [shared[v] for v in values]


def _numbers(values: Sequence[float]) -> Sequence[float]:
    if any(v != v for v in values):
        raise ValueError("a NaN has no rank")
    return values


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    if len(x) != len(y) or len(x) < 2:
        raise ValueError("pearson needs two sequences of equal length >= 2")
    mx, my = mean(x), mean(y)
    dx = [a - mx for a in x]
    dy = [b - my for b in y]
    sxx = math.fsum(a * a for a in dx)
    syy = math.fsum(b * b for b in dy)
    if sxx == 0 or syy == 0:
        return float("nan")
    return math.fsum(a * b for a, b in zip(dx, dy)) / math.sqrt(sxx * syy)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    return pearson(average_ranks(x), average_ranks(y))


def join_rows(attribution_rows: Iterable[dict], patching_rows: Iterable[dict], mode: str) -> dict:
    """Inner join per (dimension, pair_id, component) of attribution rows and patching rows of `mode`.

    Returns {(dimension, pair_id, component): (attribution_row, patching_row)}.
    """
    patched = {}
    for row in patching_rows:
        if row["mode"] == mode:
            patched[(row["dimension"], row["pair_id"], row["component"])] = row
    joined = {}
    for row in attribution_rows:
        key = (row["dimension"], row["pair_id"], row["component"])
        if key in patched:
            joined[key] = (row, patched[key])
    return joined


def patch_fraction(patch_row: dict) -> float:
    """|effect| / |clean margin| of one patched pair (the fraction behind "moves X%")."""
    clean = abs(patch_row["clean_margin"])
    if clean == 0:
        return 0.0 if patch_row["effect"] == 0 else float("inf")
    return abs(patch_row["effect"]) / clean


PATCH_SCORES = ("mean_ratio", "ratio_of_means")


def ratio_of_means(patch_rows: Sequence[dict]) -> float:
    """sum |effect| / sum |clean margin| over the rows: a pair weighs by its margin's size, so a
    margin near zero cannot dominate the score (0 when nothing moves, inf when only zero margins do)."""
    moved = math.fsum(abs(r["effect"]) for r in patch_rows)
    clean = math.fsum(abs(r["clean_margin"]) for r in patch_rows)
    if clean == 0:
        return 0.0 if moved == 0 else float("inf")
    return moved / clean


def component_scores(joined: dict, patch_score: str = "mean_ratio") -> dict[str, dict[str, tuple[float, float]]]:
    """{dimension: {component: (attribution score, patch score)}} over the joined rows; the patch
    score is the mean of per-pair ratios (`mean_ratio`) or the ratio of sums (`ratio_of_means`)."""
    if patch_score not in PATCH_SCORES:
        raise ValueError(f"unknown patch score {patch_score!r} (known: {', '.join(PATCH_SCORES)})")
    buckets: dict[str, dict[str, tuple[list, list]]] = {}
    for (dimension, _pair, component), (attr_row, patch_row) in joined.items():
        attr, patch = buckets.setdefault(dimension, {}).setdefault(component, ([], []))
        attr.append(attr_row["attribution"])
        patch.append(patch_row)

    def patch_value(rows):
        return mean(patch_fraction(r) for r in rows) if patch_score == "mean_ratio" else ratio_of_means(rows)
    return {
        dimension: {c: (mean(a), patch_value(p)) for c, (a, p) in sorted(comps.items())}
        for dimension, comps in sorted(buckets.items())
    }


def rankings(scores: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """{component: (attribution rank, patch rank)} for one dimension's component scores."""
    names = list(scores)
    attr_ranks = average_ranks([scores[c][0] for c in names])
    patch_ranks = average_ranks([scores[c][1] for c in names])
    return {c: (a, p) for c, a, p in zip(names, attr_ranks, patch_ranks)}


def dimension_rhos(scores: dict[str, dict[str, tuple[float, float]]]) -> dict[str, float]:
    """Spearman rho of attribution score against patch score, per dimension."""
    rhos = {}
    for dimension, comps in scores.items():
        names = list(comps)
        rhos[dimension] = spearman([comps[c][0] for c in names], [comps[c][1] for c in names])
    return rhos


def roc_auc(scores: Sequence[float], positive: Sequence[bool]) -> float:
    """Area under the ROC curve of `scores` ranking the `positive` items first (ties count half)."""
    n_pos = sum(1 for p in positive if p)
    n_neg = len(positive) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ascending = [len(scores) + 1 - r for r in average_ranks(scores)]  # rank 1 = smallest
    rank_sum = math.fsum(r for r, p in zip(ascending, positive) if p)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def seed_bootstrap(
    seed_ids: Sequence[str],
    statistic: Callable[[list[str]], float],
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile interval of `statistic` over resamples of distinct seeds, with replacement.

    Rows mutated from one seed pair share a seed id, so resampling seeds (not rows) keeps clones
    from posing as independent evidence.
    """
    distinct = sorted(set(seed_ids))
    rng = random.Random(seed)
    return percentile_interval(
        [statistic([rng.choice(distinct) for _ in distinct]) for _ in range(resamples)], level)


def crystallization_depth(running_margins: Sequence[float]) -> float:
    """First layer l (1-based) where m_l >= m_L / 2, as a fraction of depth L.

    For a negative final margin the comparison is mirrored (m_l <= m_L / 2).
    """
    final = running_margins[-1]
    depth = len(running_margins)
    for layer, value in enumerate(running_margins, start=1):
        if (value >= final / 2) if final >= 0 else (value <= final / 2):
            return layer / depth
    return 1.0


# ---------------------------------------------------------------- key recovery (planted keys)
# Used by keyrecovery.py, whose docstring defines the key-recovery scores.

def percentile_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The percentile interval of a list of resampled values (NaN values dropped): the values at
    the (1 - level) / 2 and (1 + level) / 2 quantiles, nearest rank."""
    values = sorted(v for v in values if not math.isnan(v))
    if not values:
        return (float("nan"), float("nan"))
    tail = (1 - level) / 2
    low = values[min(len(values) - 1, int(math.floor(tail * len(values))))]
    high = values[min(len(values) - 1, int(math.ceil((1 - tail) * len(values))) - 1)]
    return (low, high)


def topk_inclusion(scores: Sequence[float], k: int) -> list[float]:
    """For each item, the probability that it is among the k largest scores when ties are broken
    at random: 1 above the cut, 0 below it, and the cut's tied block shares the slots left."""
    shared = {}
    above = 0
    for value, tied in itertools.groupby(sorted(_numbers(scores), reverse=True)):
        count = sum(1 for _ in tied)
        shared[value] = min(1.0, max(0.0, (k - above) / count))
        above += count
    return [shared[v] for v in scores]


def hierarchical_bootstrap(
    groups: dict,
    statistic: Callable[[list[tuple[str, dict]]], dict],
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    resample_groups: bool = True,
) -> dict[str, tuple[float, float]]:
    """Percentile intervals of every value `statistic` returns, over two-level resamples.

    `groups` is {group: {stratum: [seed ids]}} (here: organism -> rule -> seed pairs). Each
    resample draws groups with replacement (all groups, once each, when `resample_groups` is
    false), then, inside each drawn group, the seeds of every stratum with replacement.
    `statistic` gets [(group, {stratum: [seeds]}), ...] and returns {name: value}."""
    rng = random.Random(seed)
    names = sorted(groups)
    collected: dict[str, list[float]] = {}
    for _ in range(resamples):
        drawn = [rng.choice(names) for _ in names] if resample_groups else list(names)
        sample = [(g, {s: [rng.choice(seeds) for _ in seeds] for s, seeds in sorted(groups[g].items())})
                  for g in drawn]
        for name, value in statistic(sample).items():
            collected.setdefault(name, []).append(value)
    return {name: percentile_interval(values, level) for name, values in sorted(collected.items())}


# ---------------------------------------------------------------- tests across seeds

def sign_test(wins: int, losses: int) -> float:
    """One-sided exact sign test: P(Binomial(wins + losses, 1/2) >= wins); 1.0 when both are 0.
    Tied seeds are left out by the caller before the test."""
    if wins < 0 or losses < 0:
        raise ValueError("wins and losses are counts")
    n = wins + losses
    if n == 0:
        return 1.0
    return math.fsum(math.comb(n, k) for k in range(wins, n + 1)) / 2 ** n


def holm(pvalues: dict, alpha: float) -> dict:
    """Holm's step-down procedure: {name: (threshold, rejected)}. The p-values are sorted ascending
    (ties by name); the i-th smallest (from 0) is compared with alpha / (m - i), and hypotheses are
    rejected up to the first that is not, which keeps the family-wise error rate at most alpha
    whatever the dependence between the tests."""
    order = sorted(pvalues, key=lambda name: (pvalues[name], str(name)))
    out, going = {}, True
    for i, name in enumerate(order):
        threshold = alpha / (len(order) - i)
        going = going and pvalues[name] <= threshold
        out[name] = (threshold, going)
    return out


def compare(published, recomputed, path: tuple = ()) -> list[tuple[float, str]]:
    """(disagreement, key path) for every leaf of `recomputed` against `published` (a number's
    absolute difference; 0 or inf for other values); a key `published` lacks counts as inf."""
    if isinstance(recomputed, dict):
        if not isinstance(published, dict):
            return [(math.inf, "/".join(path))]
        out = []
        for key, value in recomputed.items():
            out += compare(published.get(key, _MISSING), value, path + (str(key),))
        return out
    label = "/".join(path)
    if published is _MISSING:
        return [(math.inf, label)]
    if isinstance(recomputed, list) and any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in recomputed):
        if not isinstance(published, list) or len(published) != len(recomputed):
            return [(math.inf, label)]
        return [d for i, v in enumerate(recomputed) for d in compare(published[i], v, path + (str(i),))]
    if isinstance(recomputed, float) and math.isnan(recomputed):
        return [(0.0 if published is None else math.inf, label)]
    if isinstance(recomputed, (int, float)) and not isinstance(recomputed, bool):
        ok = isinstance(published, (int, float)) and not isinstance(published, bool)
        return [(abs(recomputed - published) if ok else math.inf, label)]
    return [(0.0 if recomputed == published else math.inf, label)]


_MISSING = object()
