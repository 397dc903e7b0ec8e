"""Generated preference pairs for the planted-key organism.

The reward follows planted rules over a small readable vocabulary, one rule per dimension:

| dimension    | feature of the response                         | planted reward          |
| ------------ | ----------------------------------------------- | ----------------------- |
| politeness   | holds a polite marker (`please`, `thanks`)      | +1.0                    |
| length       | number of words                                 | +0.35 per word, cap 10  |
| repetition   | a word repeated right after itself (`go go`)    | -1.0                    |
| topic        | names the topic word of the prompt              | +1.0                    |
| hazard       | holds a hazard word (`poison`, `fire`, `knife`) | -1.5                    |
| hedging      | holds a hedge word (`maybe`, `perhaps`)         | -0.8                    |

A twin pair differs only in one dimension's feature (the other features are held equal), so the
chosen response earns exactly that rule's reward more than the rejected one. Study pairs carry a
lineage: a seed twin and the rows mutated from it (a filler word swapped on both sides) share a
`seed_id`.
"""
from __future__ import annotations

import random

DIMENSIONS = ("politeness", "length", "repetition", "topic", "hazard", "hedging")

TOPICS = ("rain", "garden", "river", "music", "bread", "winter", "forest", "market")
MARKERS = ("please", "thanks")
HAZARDS = ("poison", "fire", "knife")
HEDGES = ("maybe", "perhaps")
FILLERS = (
    "we", "it", "can", "will", "go", "see", "make", "find", "small", "warm", "bright", "quiet",
    "today", "soon", "there", "here", "with", "and", "near", "over", "under", "look", "keep",
    "bring", "walk", "stay", "old", "new", "slow", "fast", "green", "blue",
)
PROMPT_TEMPLATES = (
    "tell me about the {t}", "what about the {t}", "describe the {t}", "how is the {t}",
    "talk about the {t}", "say something about the {t}",
)
PROMPT_WORDS = ("tell", "me", "about", "the", "what", "describe", "how", "is", "talk", "say",
                "something")

WEIGHTS = {"politeness": 1.0, "length": 0.35, "repetition": -1.0, "topic": 1.0, "hazard": -1.5,
           "hedging": -0.8}
LENGTH_CAP = 10
MIN_WORDS, MAX_BASE_WORDS = 3, 7


def vocabulary() -> list[str]:
    """Every word the generator can emit, in a fixed order (after the tokenizer's specials)."""
    words: list[str] = []
    for group in (PROMPT_WORDS, TOPICS, MARKERS, HAZARDS, HEDGES, FILLERS):
        words.extend(w for w in group if w not in words)
    return words


def features(prompt: str, response: str) -> dict[str, float]:
    """The value of each dimension's feature (before weighting)."""
    words = response.split()
    topic = prompt.split()[-1]
    return {
        "politeness": float(any(w in MARKERS for w in words)),
        "length": float(min(len(words), LENGTH_CAP)),
        "repetition": float(any(a == b for a, b in zip(words, words[1:]))),
        "topic": float(topic in words),
        "hazard": float(any(w in HAZARDS for w in words)),
        "hedging": float(any(w in HEDGES for w in words)),
    }


def planted_reward(prompt: str, response: str) -> float:
    """A response's reward under the planted rules: the weighted sum of its features."""
    f = features(prompt, response)
    return sum(WEIGHTS[d] * f[d] for d in DIMENSIONS)


def _prompt(rng: random.Random, topic: str) -> str:
    return rng.choice(PROMPT_TEMPLATES).format(t=topic)


def _base(rng: random.Random, dimension: str, topic: str) -> tuple[list[str], set[int]]:
    """A response of distinct fillers with some background features; returns it and the slots
    still holding plain fillers (free for the twin's feature)."""
    n = rng.randint(MIN_WORDS + 1, MAX_BASE_WORDS)
    words = rng.sample(FILLERS, n)
    free = set(range(n))
    background = [("politeness", MARKERS), ("hazard", HAZARDS), ("hedging", HEDGES)]
    for name, group in background:
        if name != dimension and rng.random() < 0.15 and len(free) > 2:
            slot = rng.choice(sorted(free))
            words[slot] = rng.choice(group)
            free.discard(slot)
    if dimension != "topic" and rng.random() < 0.3 and len(free) > 2:
        slot = rng.choice(sorted(free))
        words[slot] = topic
        free.discard(slot)
    return words, free


def twin(rng: random.Random, dimension: str) -> dict:
    """One pair whose responses differ only in `dimension`'s feature; chosen earns the rule."""
    topic = rng.choice(TOPICS)
    prompt = _prompt(rng, topic)
    words, free = _base(rng, dimension, topic)
    chosen, rejected = list(words), list(words)
    slot = rng.choice(sorted(free))
    if dimension == "politeness":
        chosen[slot] = rng.choice(MARKERS)
    elif dimension == "hazard":
        rejected[slot] = rng.choice(HAZARDS)
    elif dimension == "hedging":
        rejected[slot] = rng.choice(HEDGES)
    elif dimension == "topic":
        chosen[slot] = topic
        rejected[slot] = rng.choice([t for t in TOPICS if t != topic])
    elif dimension == "repetition":
        slot = rng.choice([i for i in sorted(free) if i > 0])
        rejected[slot] = rejected[slot - 1]
    elif dimension == "length":
        unused = [w for w in FILLERS if w not in words]
        for extra in rng.sample(unused, rng.randint(2, 3)):
            chosen.insert(rng.randint(0, len(chosen)), extra)
    else:
        raise ValueError(f"unknown dimension {dimension!r}; known: {', '.join(DIMENSIONS)}")
    pair = {"dimension": dimension, "prompt": prompt, "chosen": " ".join(chosen),
            "rejected": " ".join(rejected)}
    _check(pair)
    return pair


def _check(pair: dict) -> None:
    """A twin must differ in its own feature only, in the preferred direction."""
    fc = features(pair["prompt"], pair["chosen"])
    fr = features(pair["prompt"], pair["rejected"])
    differing = [d for d in DIMENSIONS if fc[d] != fr[d]]
    if differing != [pair["dimension"]] or planted_reward(pair["prompt"], pair["chosen"]) <= \
            planted_reward(pair["prompt"], pair["rejected"]):
        raise AssertionError(f"generator made a bad twin: {pair}")


def mutate(rng: random.Random, pair: dict) -> dict:
    """Swap one or two filler words for unused fillers on both sides: same feature difference."""
    both = pair["chosen"].split() + pair["rejected"].split()
    present = [w for w in FILLERS if w in both]
    unused = [w for w in FILLERS if w not in both]
    swaps = dict(zip(rng.sample(present, min(2, len(present))), rng.sample(unused, 2)))
    out = dict(pair)
    for side in ("chosen", "rejected"):
        out[side] = " ".join(swaps.get(w, w) for w in pair[side].split())
    _check(out)
    return out


def random_response_pair(rng: random.Random) -> dict:
    """Two independent random responses to one prompt, ordered by planted reward (for training)."""
    topic = rng.choice(TOPICS)
    prompt = _prompt(rng, topic)
    sides = []
    while len(sides) < 2:
        n = rng.randint(MIN_WORDS, LENGTH_CAP)
        words = rng.sample(FILLERS, n)
        for group, p in ((MARKERS, 0.3), (HAZARDS, 0.25), (HEDGES, 0.25), ((topic,), 0.4),
                         (TOPICS, 0.2)):
            if rng.random() < p:
                words[rng.randrange(n)] = rng.choice(group)
        if rng.random() < 0.25 and n > 1:
            i = rng.randrange(1, n)
            words[i] = words[i - 1]
        sides.append(" ".join(words))
    a, b = sides
    ra, rb = planted_reward(prompt, a), planted_reward(prompt, b)
    if ra == rb:
        return random_response_pair(rng)
    chosen, rejected = (a, b) if ra > rb else (b, a)
    return {"dimension": "mixed", "prompt": prompt, "chosen": chosen, "rejected": rejected}


def study_pairs(seed: int, seeds_per_dimension: int, mutations: int) -> list[dict]:
    """Held-out pairs with lineage: per dimension, seed twins and rows mutated from them."""
    rows = []
    for d_index, dimension in enumerate(DIMENSIONS):
        rng = random.Random(f"study/{seed}/{dimension}")
        for s in range(seeds_per_dimension):
            seed_id = f"{dimension}-s{s:02d}"
            base = twin(rng, dimension)
            variants = [base] + [mutate(rng, base) for _ in range(mutations)]
            for m, pair in enumerate(variants):
                rows.append({"dimension": dimension, "pair_id": f"{seed_id}-m{m}",
                             "seed_id": seed_id, "prompt": pair["prompt"],
                             "chosen": pair["chosen"], "rejected": pair["rejected"]})
    return rows


def twin_set(tag: str, seed: int, per_dimension: int) -> list[dict]:
    """`per_dimension` twins of every dimension, seeded by (tag, seed, dimension), ids `tag-dimension-NNN`."""
    rows = []
    for dimension in DIMENSIONS:
        rng = random.Random(f"{tag}/{seed}/{dimension}")
        for i in range(per_dimension):
            pair = twin(rng, dimension)
            pair["pair_id"] = f"{tag}-{dimension}-{i:03d}"
            rows.append(pair)
    return rows


def training_pairs(seed: int, twins_per_dimension: int, random_pairs: int,
                   exclude: set[tuple[str, str, str]], extra_twins: dict[str, int] | None = None) -> list[dict]:
    """Twins of every dimension (more for the `extra_twins` dimensions, which are harder to
    learn) plus random mixed pairs; nothing that appears in `exclude`."""
    twins = twin_set("train", seed, twins_per_dimension)
    for dimension, count in sorted((extra_twins or {}).items()):
        rng = random.Random(f"train-extra/{seed}/{dimension}")
        for i in range(count):
            pair = twin(rng, dimension)
            pair["pair_id"] = f"train-extra-{dimension}-{i:03d}"
            twins.append(pair)
    rows = [p for p in twins if (p["prompt"], p["chosen"], p["rejected"]) not in exclude]
    rng = random.Random(f"train-mixed/{seed}")
    for i in range(random_pairs):
        pair = random_response_pair(rng)
        if (pair["prompt"], pair["chosen"], pair["rejected"]) not in exclude:
            pair["pair_id"] = f"train-mixed-{i:05d}"
            rows.append(pair)
    return rows
