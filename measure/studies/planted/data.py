"""Preference pairs for the hand-built planted organisms (`measure/studies/planted/`).

Five rules, each the presence of a word class in the response; the planted reward of a response
is the sum of the weights of the classes it contains:

| rule       | words                      | weight |
| ---------- | -------------------------- | ------ |
| politeness | please, thanks             | +1.0   |
| hazard     | poison, fire, knife        | -1.5   |
| hedging    | maybe, perhaps             | -0.8   |
| certainty  | surely, clearly            | +1.0   |
| detail     | because, specifically      | +0.7   |

A twin pair differs in one slot only, where one side holds a word of the pair's rule and the
other a plain filler, so the chosen side earns exactly that rule's weight more. Background words
of the other rules appear on both sides alike. Both sides of a twin have the same token length,
which the resample-ablation check relies on (a source of the same length aligns position by
position).
"""
from __future__ import annotations

import random

RULES = ("politeness", "hazard", "hedging", "certainty", "detail")
WORDS = {"politeness": ("please", "thanks"), "hazard": ("poison", "fire", "knife"),
         "hedging": ("maybe", "perhaps"), "certainty": ("surely", "clearly"),
         "detail": ("because", "specifically")}
WEIGHTS = {"politeness": 1.0, "hazard": -1.5, "hedging": -0.8, "certainty": 1.0, "detail": 0.7}
TOPICS = ("rain", "garden", "river", "music", "bread", "winter", "forest", "market")
FILLERS = (
    "we", "it", "can", "will", "go", "see", "make", "find", "small", "warm", "bright", "quiet",
    "today", "soon", "there", "here", "with", "and", "near", "over", "under", "look", "keep",
    "bring", "walk", "stay", "old", "new", "slow", "fast", "green", "blue",
)
PROMPTS = ("tell me about the {t}", "what about the {t}", "describe the {t}", "how is the {t}")
PROMPT_WORDS = ("tell", "me", "about", "the", "what", "describe", "how", "is")
SPECIALS = ("<pad>", "<bos>", "<sep>", "<eos>", "<unk>")
# the embedding channels that mark each rule's words (hazard's three words are three channels,
# so no single direction of the embedding means "hazard")
LEX = {"politeness": ("lex:polite",), "hazard": ("lex:poison", "lex:fire", "lex:knife"),
       "hedging": ("lex:hedge",), "certainty": ("lex:certain",), "detail": ("lex:detail",)}
BACKGROUND = 0.15
MIN_WORDS, MAX_WORDS = 4, 7


def vocabulary() -> list[str]:
    """Every token, specials first, in a fixed order."""
    words = list(SPECIALS)
    for group in (PROMPT_WORDS, TOPICS, *(WORDS[r] for r in RULES), FILLERS):
        words.extend(w for w in group if w not in words)
    return words


def features(response: str) -> dict[str, float]:
    """{rule: 1.0 if the response holds one of the rule's words, else 0.0}."""
    words = set(response.split())
    return {r: float(any(w in words for w in WORDS[r])) for r in RULES}


def planted_reward(response: str) -> float:
    """The reward the rules pay a response: the sum of the weights of the classes it holds."""
    f = features(response)
    return sum(WEIGHTS[r] * f[r] for r in RULES)


def twin(rng: random.Random, rule: str) -> dict:
    """One twin pair of `rule`: the sides differ in one slot, the rule's word against a filler."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; known: {', '.join(RULES)}")
    prompt = rng.choice(PROMPTS).format(t=rng.choice(TOPICS))
    n = rng.randint(MIN_WORDS, MAX_WORDS)
    words = rng.sample(FILLERS, n)
    free = list(range(n))
    for other in RULES:
        if other != rule and rng.random() < BACKGROUND and len(free) > 2:
            slot = free.pop(rng.randrange(len(free)))
            words[slot] = rng.choice(WORDS[other])
    slot = rng.choice(free)
    with_word = list(words)
    with_word[slot] = rng.choice(WORDS[rule])
    plain = " ".join(words)
    marked = " ".join(with_word)
    chosen, rejected = (marked, plain) if WEIGHTS[rule] > 0 else (plain, marked)
    pair = {"dimension": rule, "prompt": prompt, "chosen": chosen, "rejected": rejected}
    check(pair)
    return pair


def check(pair: dict) -> None:
    """A twin differs in its own rule's feature only, in the preferred direction."""
    fc, fr = features(pair["chosen"]), features(pair["rejected"])
    differing = [r for r in RULES if fc[r] != fr[r]]
    if differing != [pair["dimension"]] or planted_reward(pair["chosen"]) <= planted_reward(pair["rejected"]) \
            or len(pair["chosen"].split()) != len(pair["rejected"].split()):
        raise AssertionError(f"generator made a bad twin: {pair}")


def twins(tag: str, seed: int, per_rule: int, prefix: str) -> list[dict]:
    """`per_rule` twins of every rule; pair ids `{prefix}-{rule}-{i}`; each twin is its own seed."""
    rows = []
    for rule in RULES:
        rng = random.Random(f"planted/v2/{tag}/{seed}/{rule}")
        for i in range(per_rule):
            pair = twin(rng, rule)
            pair_id = f"{prefix}-{rule}-{i:02d}"
            rows.append({"dimension": rule, "pair_id": pair_id, "seed_id": pair_id,
                         "prompt": pair["prompt"], "chosen": pair["chosen"],
                         "rejected": pair["rejected"]})
    return rows
