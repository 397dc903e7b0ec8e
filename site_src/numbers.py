"""Finding numbers in prose: the number-in-prose rule, and reading a number out of a prose fixture line.

Prose is split into words at whitespace and at `= < > ≤ ≥ ≈ ~ ( ) [ ] { } ; " “ ”`; trailing
`. , : ! ?` and quotes are stripped. A word that contains a letter is an identifier
(`Llama-3.1-8B`, `v0.2`, `mlp_L31`, `1e-6`) and never holds a number. In any other word, each
number is found; a number *needs a reference* when it is

- a decimal (`0.17`, `.5`, `1,024.5`; but not a dotted version such as `1.2.3`),
- a percentage (`12%`), or
- signed (`-3`, `+0.5`, `−2`, `±0.1`): a sign at the start of the word or after `/`.

Whole numbers (`12`, `2026-11-29`, `5-10`, `1,024`) are allowed: counting words is not measuring.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_SPLIT = re.compile(r"[\s=<>≤≥≈~()\[\]{};\"“”]+")
_STRIP = ".,:!?'‘’…"
_NUMBER = re.compile(r"(?P<sign>[+\-−±])?(?P<body>\d[\d,]*(?:\.\d+)*|\.\d+)(?P<pct>%)?")
SIGNS = "+-−±"


@dataclass(frozen=True)
class Number:
    text: str          # as written
    value: float | int
    decimal: bool
    percent: bool
    signed: bool

    @property
    def needs_reference(self) -> bool:
        return self.decimal or self.percent or self.signed


def _words(text: str):
    for raw in _SPLIT.split(text):
        word = raw.lstrip("'‘’…").rstrip(_STRIP)
        if word and not any(ch.isalpha() for ch in word):
            yield word


def find_numbers(text: str) -> list[Number]:
    """Every number in a prose string, identifiers excluded, in order."""
    found = []
    for word in _words(text):
        for m in _NUMBER.finditer(word):
            body = m["body"]
            if body.count(".") > 1:  # 1.2.3: a version or an address, not a measurement
                continue
            sign = m["sign"] or ""
            # a sign counts only at the start of the word (or after '/'): 5-10 is a range
            signed = bool(sign) and (m.start() == 0 or word[m.start() - 1] == "/")
            if sign and not signed and m.start() > 0 and word[m.start() - 1].isdigit():
                sign = ""
            plain = body.replace(",", "")
            if not re.fullmatch(r"\d+(\.\d+)?|\.\d+", plain):
                continue  # 1,,2 or a stray comma: not a number
            value: float | int = float(plain) if "." in plain else int(plain)
            if sign in ("-", "−"):
                value = -value
            found.append(Number((sign if signed else "") + body + (m["pct"] or ""), value,
                                "." in body, bool(m["pct"]), signed))
    return found


def unbound_numbers(text: str) -> list[Number]:
    """The numbers in `text` that the rule refuses unless they are references or `{{! }}` literals."""
    return [n for n in find_numbers(text) if n.needs_reference]
