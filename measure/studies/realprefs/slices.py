"""The pairs the realprefs reward model is trained on, and the dev slice it is checked on.

Only the training side of `data/realprefs/split.json` is read here (`split.load_split`); the
evaluation side is never tokenized, cached or scored by the trainer. Within the training side,
the groups (`data.Pair.group`: an HH dialogue's first human turn, a summary's post or article)
whose seeded draw falls under `DEV_SHARE` form the dev slice: never trained on, scored after the
run so that the report says whether the model learned before any evaluation pair is touched, and
the only pairs any choice of settings was tried on.

    dev(group) = first 8 bytes of sha256("realprefs-dev:<DEV_SEED>:<group>") / 2**64 < DEV_SHARE

Each pair becomes two token-id sequences, chosen then rejected, under the study's token budget
(`budget.py`: `[CLS] prompt tail [SEP] reply head [SEP]`). Prompts are tokenized once per pair,
replies in one batch call each; the ids are those of `budget.encode`.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from measure.studies.realprefs import budget
from measure.studies.realprefs.data import OBJECTIVES, Pair, load_pairs
from measure.studies.realprefs.split import SPLIT_FILE, load_split

DEV_SEED = 0
DEV_SHARE = 0.10


def in_dev(group: str, seed: int = DEV_SEED, share: float = DEV_SHARE) -> bool:
    """Whether a training-side group belongs to the dev slice."""
    digest = hashlib.sha256(f"realprefs-dev:{seed}:{group}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


@dataclass(frozen=True)
class Slice:
    """Pairs, each one's objective index, and their sequences (pair i: `seqs[2i]` chosen, `seqs[2i+1]` rejected)."""
    pairs: list[Pair]
    objective: list[int]
    seqs: list[list[int]]

    def counts(self) -> dict[str, int]:
        """Pairs per objective."""
        return {o: sum(p.objective == o for p in self.pairs) for o in OBJECTIVES}


def _first(pairs: list[Pair], max_pairs: int | None) -> list[Pair]:
    """The first `max_pairs` pairs of each objective, in load order (all without a cap)."""
    if max_pairs is None:
        return pairs
    seen = dict.fromkeys(OBJECTIVES, 0)
    keep = []
    for p in pairs:
        seen[p.objective] += 1
        if seen[p.objective] <= max_pairs:
            keep.append(p)
    return keep


def encode_all(tokenizer, pairs: list[Pair], max_tokens: int) -> list[list[int]]:
    """Chosen and rejected ids of every pair, interleaved, under the token budget."""
    def ids(texts):
        return tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
    prompts, chosen, rejected = (ids([getattr(p, f) for p in pairs]) for f in ("prompt", "chosen", "rejected"))
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    out = []
    for prompt, c, r in zip(prompts, chosen, rejected):
        out.append(budget.assemble(prompt, c, cls, sep, max_tokens))
        out.append(budget.assemble(prompt, r, cls, sep, max_tokens))
    return out


def training_slices(tokenizer, max_pairs: int | None = None,
                    max_tokens: int = budget.MAX_TOKENS) -> tuple[Slice, Slice]:
    """(train, dev): the training side's pairs outside and inside the dev slice, each at most
    `max_pairs` per objective, with their sequences."""
    pairs = load_pairs()
    side = load_split(pairs)
    training = [p for p in pairs if side[p.pair_id] == "train"]
    out = []
    for chosen in (False, True):
        part = _first([p for p in training if in_dev(p.group) == chosen], max_pairs)
        out.append(Slice(part, [OBJECTIVES.index(p.objective) for p in part],
                         encode_all(tokenizer, part, max_tokens)))
    return out[0], out[1]


def split_identity() -> str:
    """The sha256 of the committed split file the slices come from."""
    from safe_io import sha256_file
    return sha256_file(SPLIT_FILE)
