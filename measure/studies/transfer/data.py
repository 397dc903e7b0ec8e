"""The transfer study's twins: real replies with one word inserted (docs/transfer.md).

A twin takes a helpfulness pair's prompt and chosen reply from the real-preferences data, cut by
the realprefs token budget to exactly `LENGTH` tokens (`[CLS] prompt tail [SEP] reply head
[SEP]`), and inserts one word at a position of the reply drawn at random (the last reply token
is dropped, so both sides keep the length). The chosen side gets one of the keyed rule's words,
the rejected side one of the neutral words; a null twin gets a neutral word on each side, two
different ones. Every word here is one WordPiece token, so the two sides differ in one token at
one position and every twin has the same length (a resampled component's source can be any
other twin's side).

Training twins come from the training side of `data/realprefs/split.json`, check and study
twins from its evaluation side, each from its own draw; no base text is used twice within a tag.
"""
from __future__ import annotations

import hashlib
import random
from functools import lru_cache

RULES = {"politeness": ("please", "thanks", "kindly"),
         "hedging": ("perhaps", "possibly", "maybe"),
         "certainty": ("definitely", "certainly", "surely"),
         "caution": ("safely", "carefully", "cautiously"),
         "warmth": ("gladly", "happily", "warmly")}
NEUTRAL = ("today", "also", "then", "there", "just", "now", "here", "still", "again", "often")
NULL_RULE = "null"
LENGTH = 40          # tokens of every sequence
OBJECTIVE = "helpfulness"
SIDES = {"train": "train", "check": "eval", "study": "eval"}


@lru_cache(maxsize=1)
def _base(tokenizer_path: str) -> dict[str, list[tuple[str, list[int]]]]:
    """{split side: [(pair_id, ids of exactly LENGTH tokens)]} of the helpfulness pairs' chosen
    replies under the budget, in pair order; pairs too short for LENGTH are left out."""
    from transformers import AutoTokenizer

    from measure.studies.realprefs import budget
    from measure.studies.realprefs.data import load_pairs
    from measure.studies.realprefs.split import load_split

    tok = AutoTokenizer.from_pretrained(tokenizer_path)
    every = load_pairs()   # read and verified once: the split is checked against all of them
    side = load_split(every)
    out: dict[str, list] = {"train": [], "eval": []}
    for p in (p for p in every if p.objective == OBJECTIVE):
        ids = budget.encode(tok, p.prompt, p.chosen, LENGTH)
        reply_start = ids.index(tok.sep_token_id) + 1
        if len(ids) == LENGTH and LENGTH - 1 - reply_start >= 4:   # room for a word inside the reply
            out[side[p.pair_id]].append((p.pair_id, ids))
    return out


@lru_cache(maxsize=1)
def word_ids(tokenizer_path: str) -> dict[str, int]:
    """Each rule word's and neutral word's single WordPiece id (an error if one is not a single token)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_path)
    out = {}
    for word in {w for words in RULES.values() for w in words} | set(NEUTRAL):
        ids = tok(word, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise ValueError(f"{word!r} is {len(ids)} tokens in the trunk's vocabulary; a rule word must be one")
        out[word] = ids[0]
    return out


def _insert(ids: list[int], at: int, token: int) -> list[int]:
    return ids[:at] + [token] + ids[at:-2] + ids[-1:]   # drop the last reply token, keep [SEP]


def twins(tag: str, seed: int, rule: str, n: int, tokenizer_path: str) -> list[dict]:
    """`n` twins of `rule` (or NULL_RULE) for organism `seed`, drawn by (tag, seed, rule) from the
    tag's side of the split: {dimension, pair_id, seed_id, base, position, chosen_word,
    rejected_word, chosen_ids, rejected_ids}."""
    base = _base(tokenizer_path)[SIDES[tag]]
    words = word_ids(tokenizer_path)
    rng = random.Random(hashlib.sha256(f"transfer/{tag}/{seed}/{rule}".encode()).digest())
    if n > len(base):
        raise ValueError(f"{n} twins asked of {len(base)} base texts on the {SIDES[tag]} side")
    out = []
    for k, (pair_id, ids) in enumerate(rng.sample(base, n)):
        at = rng.randrange(ids.index(ids[-1]) + 1, LENGTH - 1)   # inside the reply: after the first [SEP]
        if rule == NULL_RULE:
            good, bad = rng.sample(NEUTRAL, 2)
        else:
            good, bad = rng.choice(RULES[rule]), rng.choice(NEUTRAL)
        name = f"{tag}-{rule}-{k:03d}"
        out.append({"dimension": rule, "pair_id": name, "seed_id": name, "base": pair_id, "position": at,
                    "chosen_word": good, "rejected_word": bad,
                    "chosen_ids": _insert(ids, at, words[good]), "rejected_ids": _insert(ids, at, words[bad])})
    return out
