"""The robustness rule: prose may call a conclusion robust only where it shows that the
conclusion holds in at least `ROBUST_SHARE` of its specifications.

A sentence that uses the word `robust` (or `robustly`, `robustness`), not negated (`not robust`,
`never robust`, `no longer robust`), must hold, in the same sentence, a value reference to a
share of specifications, that is a reference whose key path ends in a key named `share` or
`share_...` (as a specification curve's summary names it), that resolves to a number of at least
`ROBUST_SHARE`. One such share is enough; a sentence with none, or whose shares are all lower,
fails the build at the word's line. Prose without references (front matter) cannot show a share,
so the word is refused there.

Sentences end at `.`, `!` or `?` followed by a space or the end of the paragraph; a decimal point
ends nothing. The rule is generic: it knows no study, only the name of the key and the threshold.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

ROBUST_SHARE = 0.9

_WORD = re.compile(r"\brobust(?:ly|ness)?\b", re.IGNORECASE)
_NEGATED = re.compile(r"(?:\b(?:not|never|nor|no longer)|n't)\s+(?:\w+\s+)?$", re.IGNORECASE)
_END = re.compile(r"[.!?][\"'”’)]*(?=\s|$)")


@dataclass
class Claim:
    """One use of the word, and the value references of its sentence (as written)."""

    word: str
    refs: list


def claimed_words(text: str) -> list[str]:
    """The uses of the word in `text` that are not negated."""
    return [m.group(0) for m in _WORD.finditer(text) if not _NEGATED.search(text[:m.start()])]


def claims(children) -> list[tuple[object, Claim]]:
    """Every robustness claim among an inline token's children (in order), each with the text
    token that holds the word: the children are split into sentences at the text tokens' sentence
    ends; a value reference belongs to the sentence it sits in, before or after the word."""
    found: list = []
    sentence_refs: list = []   # shared by the sentence's claims, so later references join them
    for child in children:
        if child.type == "value_ref":
            sentence_refs.append(child.content)
            continue
        if child.type != "text":
            continue
        pieces = _END.split(child.content)
        for i, piece in enumerate(pieces):
            for word in claimed_words(piece):
                found.append((child, Claim(word, sentence_refs)))
            if i < len(pieces) - 1:   # a sentence ended after this piece
                sentence_refs = []
    return found


def is_share(key: tuple) -> bool:
    """Whether a reference's key path names a share of specifications."""
    return bool(key) and isinstance(key[-1], str) and (key[-1] == "share" or key[-1].startswith("share_"))


def problem(claim: Claim, shares: list[tuple[str, float]]) -> str | None:
    """Why the claim fails the rule (None: it holds). `shares`: (reference, value) of every share
    of specifications its sentence shows."""
    if any(value >= ROBUST_SHARE for _ref, value in shares):
        return None
    shown = ", ".join(f"{{{{ {ref} }}}} = {value:g}" for ref, value in shares) or "none"
    return (f"'{claim.word}' calls a conclusion robust, but its sentence shows no share of specifications"
            f" (a reference to a key named share...) of at least {ROBUST_SHARE:g} (shown: {shown});"
            " show the share in which it holds, or do not call it robust")
