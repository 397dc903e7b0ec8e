"""Surface cues of the MiniLM preference pairs, and whether each is balanced within a dimension.

A reviewer's first question about a learned preference is whether a trivial rule solves the
pairs. For each cue below, a pair gets the cue's value on the chosen response minus its value
on the rejected one; the cue's *rule accuracy* in a dimension is the share of seeds where that
difference is positive, ties counting one half. A rule fitted on data may take either sign, so
a cue is balanced when its rule accuracy lies within `BANDS[cue]` of one half, both ways.
`check(seeds)` lists every (dimension, cue) outside its band; the authoring rules in
`data/minilm/README.md` say how the seeds were written to stay inside.

Standard library only: the cues are plain text statistics, computed on the seeds as written
(the prompt framings of the mutations change no response).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# Short function words left out of the prompt-overlap cue, so that overlap counts content.
STOPWORDS = frozenset("""
a an the and or but if of to in on at by for with from as is are was were be been being am do does
did i you he she it we they me him her us them my your his its our their this that these those
what which who whom how why when where there here can will would should shall not no yes so than
then too very just any some all each about into over under up down out off again further once
""".split())
LIST_ITEM = re.compile(r"(?m)^\s*(?:[-*\u2022]|\d+[.)])\s")
CODE_LINE = re.compile(r"(?m)^(?: {4}|\t)\S|^\s*(?:def|return|for|while|if|elif|else|import|print)\b.*$")
BACKTICK = re.compile(r"`")
HEDGES = ("maybe", "might", "perhaps", "possibly", "probably", "likely", "unlikely", "could", "may",
          "seems", "seem", "appears", "appear", "i think", "i believe", "i guess", "not sure",
          "not certain", "uncertain", "roughly", "approximately", "usually", "generally",
          "typically", "often", "sometimes", "tends", "somewhat", "fairly", "arguably", "suggests")
HEDGE = re.compile(r"\b(?:" + "|".join(re.escape(h) for h in HEDGES) + r")\b")


def words(text: str) -> list[str]:
    """Lower-case word tokens (the trunk's tokenizer is uncased too)."""
    return WORD.findall(text.lower())


def prompt_overlap(response: str, prompt: str) -> float:
    """The share of the prompt's distinct content words that the response uses."""
    asked = set(words(prompt)) - STOPWORDS
    if not asked:
        return 0.0
    return len(asked & set(words(response))) / len(asked)


def format_markers(text: str) -> int:
    """List items (a line starting with a bullet or `1.`), code lines and backticks."""
    return len(LIST_ITEM.findall(text)) + len(CODE_LINE.findall(text)) + len(BACKTICK.findall(text))


def hedges(text: str) -> int:
    """Hedging words and phrases (`HEDGES`), counted wherever they occur."""
    return len(HEDGE.findall(text.lower()))


@dataclass(frozen=True)
class Cue:
    name: str
    band: float                  # the largest allowed |rule accuracy - 0.5|
    value: object                # (prompt, response) -> number
    meaning: str


CUES = (
    Cue("length_chars", 0.10, lambda p, r: len(r), "characters of the response"),
    Cue("length_words", 0.15, lambda p, r: len(words(r)), "words of the response"),
    Cue("prompt_overlap", 0.15, lambda p, r: prompt_overlap(r, p), "share of the prompt's content words the response uses"),
    Cue("format_markers", 0.15, lambda p, r: format_markers(r), "list items, code lines and backticks"),
    Cue("hedges", 0.15, lambda p, r: hedges(r), "hedging words (maybe, might, probably, usually, ...)"),
)
BANDS = {c.name: c.band for c in CUES}


def rule_accuracy(seeds: list[dict], cue: Cue) -> float:
    """Share of seeds whose chosen response has the larger cue value (ties: one half)."""
    score = 0.0
    for s in seeds:
        diff = cue.value(s["prompt"], s["chosen"]) - cue.value(s["prompt"], s["rejected"])
        score += 1.0 if diff > 0 else 0.5 if diff == 0 else 0.0
    return score / len(seeds)


def balance(seeds: dict[str, list[dict]]) -> dict[str, dict[str, float]]:
    """{dimension: {cue: rule accuracy}} for every dimension and cue."""
    return {d: {c.name: rule_accuracy(items, c) for c in CUES} for d, items in seeds.items()}


def check(seeds: dict[str, list[dict]]) -> list[str]:
    """One line per (dimension, cue) whose rule accuracy is outside its band; empty when all hold."""
    problems = []
    for d, accs in balance(seeds).items():
        for c in CUES:
            a = accs[c.name]
            if round(abs(a - 0.5), 9) > c.band:  # rounded: 0.35 is inside 0.5 +/- 0.15
                problems.append(f"{d}: {c.name} rule accuracy {a:.3f} is outside 0.5 +/- {c.band} "
                                f"({c.meaning}; chosen larger in {a:.0%} of seeds, ties half)")
    return problems


if __name__ == "__main__":
    import sys
    import yaml
    data = yaml.safe_load(open(sys.argv[1], encoding="utf-8"))
    for d, accs in balance(data).items():
        print(f"{d:22s} n={len(data[d]):2d} " + " ".join(f"{k}={v:.2f}" for k, v in accs.items()))
    for line in check(data):
        print("FAIL", line)
