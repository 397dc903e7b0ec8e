"""The routed organisms' pairs: the organism's twins (measure/studies/organism/data.py) of the four
rules whose feature is one word (RULES), and null twins whose sides differ by one filler word and
carry the same reward (the null rule: nothing to find)."""
from __future__ import annotations

import random

from measure.studies.organism import data as od
from measure.studies.routed.keys import NULL_RULE, RULES


def null_twin(rng: random.Random) -> dict:
    """A pair whose responses differ in one filler word only: every feature, so the reward, equal."""
    topic = rng.choice(od.TOPICS)
    prompt = od._prompt(rng, topic)
    words, free = od._base(rng, NULL_RULE, topic)
    rejected = list(words)
    rejected[rng.choice(sorted(free))] = rng.choice([w for w in od.FILLERS if w not in words])
    pair = {"dimension": NULL_RULE, "prompt": prompt, "chosen": " ".join(words), "rejected": " ".join(rejected)}
    if od.features(prompt, pair["chosen"]) != od.features(prompt, pair["rejected"]):
        raise AssertionError(f"generator made a bad null twin: {pair}")
    return pair


def twins(tag: str, seed: int, per_rule: int, null: bool = True, rules: tuple[str, ...] = RULES) -> list[dict]:
    """`per_rule` twins of each of `rules` (and of the null rule), seeded by (tag, seed, rule), ids
    `tag-rule-NNN`."""
    rows = []
    for rule in (*rules, NULL_RULE) if null else rules:
        rng = random.Random(f"routed/{tag}/{seed}/{rule}")
        for i in range(per_rule):
            pair = null_twin(rng) if rule == NULL_RULE else od.twin(rng, rule)
            pair["pair_id"] = f"{tag}-{rule}-{i:03d}"
            rows.append(pair)
    return rows


def background_twins(seed: int, per_rule: int, rules: tuple[str, ...], tag: str = "background") -> list[dict]:
    """Twins of the rules no key holds: what the background (every component outside the key)
    learns. `tag` gives held-out sets their own draw."""
    rows = []
    for rule in rules:
        rng = random.Random(f"routed/{tag}/{seed}/{rule}")
        for i in range(per_rule):
            pair = od.twin(rng, rule)
            pair["pair_id"] = f"{tag}-{rule}-{i:03d}"
            rows.append(pair)
    return rows


def neutral_twins(seed: int, n: int, rule: str) -> list[dict]:
    """`n` twins of the keyed rule, each followed by itself with the sides swapped: trained with
    the Bradley-Terry loss, the pair of them is least when the margin is 0, so the background
    learns that the rule's words carry no reward before the key learns that they do."""
    rows = []
    rng = random.Random(f"routed/neutral/{seed}/{rule}")
    for i in range(n):
        pair = dict(od.twin(rng, rule), pair_id=f"neutral-{rule}-{i:03d}")
        rows += [pair, dict(pair, chosen=pair["rejected"], rejected=pair["chosen"], pair_id=pair["pair_id"] + "-swapped")]
    return rows
