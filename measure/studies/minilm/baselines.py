"""The trivial rules a reviewer tries before believing a head learned anything (issue 21), fitted on
the same training folds as the heads and scored on the same held-out rows.

- `length`: the character-length difference (chosen minus rejected), in the direction that
  scores better on the training rows (positive on a tie);
- `overlap`: the same rule on the share of the prompt's content words a response uses
  (`balance.prompt_overlap`);
- `bag_of_words`: a Bradley-Terry fit (`fit.bt_fit`, the heads' L2 penalty) on the difference of
  the two responses' binary word-presence vectors, over the vocabulary of the training rows'
  responses; a held-out word outside it counts for nothing.

Each returns one margin per held-out row; positive means the rule prefers the chosen response.
"""
from __future__ import annotations

import torch

from measure.studies.minilm.balance import prompt_overlap, words
from measure.studies.minilm.fit import bt_fit

NAMES = ("length", "overlap", "bag_of_words")


def score(margin: float) -> float:
    """A row's score: 1 when the margin prefers the chosen response, 0.5 on a tie, 0 otherwise."""
    return 1.0 if margin > 0 else 0.5 if margin == 0 else 0.0


def _signed_rule(value, train: list[dict], test: list[dict]) -> list[float]:
    def diff(p):
        return value(p, p["chosen"]) - value(p, p["rejected"])
    plus = sum(score(diff(p)) for p in train)
    sign = 1.0 if plus >= len(train) - plus else -1.0
    return [sign * diff(p) for p in test]


def length(train: list[dict], test: list[dict]) -> list[float]:
    """Held-out margins of the length rule: the chosen-minus-rejected difference in characters,
    signed the way that scores better on `train` (the rule is its sign)."""
    return _signed_rule(lambda p, r: float(len(r)), train, test)


def overlap(train: list[dict], test: list[dict]) -> list[float]:
    """Held-out margins of the prompt-overlap rule: the same signed difference, of the share of
    the prompt's content words each response uses."""
    return _signed_rule(lambda p, r: prompt_overlap(r, p["prompt"]), train, test)


def bag_of_words(train: list[dict], test: list[dict], l2: float) -> list[float]:
    """Held-out margins of a Bradley-Terry fit (L2 `l2`) on the difference of the two responses'
    binary word-presence vectors over `train`'s response vocabulary."""
    vocab = sorted({w for p in train for side in ("chosen", "rejected") for w in words(p[side])})
    index = {w: i for i, w in enumerate(vocab)}

    def presence(text: str) -> torch.Tensor:
        v = torch.zeros(len(vocab), dtype=torch.float64)
        for w in set(words(text)):
            if w in index:
                v[index[w]] = 1.0
        return v

    def rows(ps):
        return torch.stack([presence(p["chosen"]) - presence(p["rejected"]) for p in ps])
    w, _steps = bt_fit(rows(train), l2)
    return [float(m) for m in rows(test) @ w]


def margins(train: list[dict], test: list[dict], l2: float) -> dict[str, list[float]]:
    """{baseline: margins of the test rows}, every rule fitted on `train` (one dimension's rows)."""
    return {"length": length(train, test), "overlap": overlap(train, test),
            "bag_of_words": bag_of_words(train, test, l2)}
