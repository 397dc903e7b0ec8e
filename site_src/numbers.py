"""Finding numbers in prose: the number-in-prose rule, and reading a number out of a prose fixture line.

Prose is split into words at whitespace and at `= < > ≤ ≥ ≈ ~ ( ) [ ] { } ; " “ ”`; trailing
`. , : ! ?` and quotes are stripped. A word that contains a letter is an identifier
(`Llama-3.1-8B`, `v0.2`, `mlp_L31`, `1e-6`) and never holds a number. In any other word, each
number is found; a number *needs a reference* when it is

- a decimal (`0.17`, `.5`, `1,024.5`; but not a dotted version such as `1.2.3`), whatever its
  decimal sign: a comma that is not a thousands separator (`0,55`), a middle dot (`0·55`) or the
  Arabic decimal separator (`0٫55`),
- a fraction: a vulgar fraction character (`⅓`, `1½`) or a word that is `A/B` (`3/4`),
- a percentage (`12%`), or
- signed (`-3`, `+0.5`, `−2`, `±0.1`): a sign at the start of the word or after `/`.

Whole numbers (`12`, `2026-11-29`, `5-10`, `1,024`) are allowed: counting words is not measuring.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_SPLIT = re.compile(r"[\s=<>≤≥≈~()\[\]{};\"“”]+")
_STRIP = ".,:!?'‘’…"
_POINTS = ".·٫"   # decimal signs: full stop, middle dot, Arabic decimal separator
_NUMBER = re.compile(r"(?P<sign>[+\-−±])?(?P<body>\d[\d,]*(?:[.·٫]\d+)*|[.·٫]\d+)(?P<pct>%)?")
_THOUSANDS = re.compile(r"[1-9]\d{0,2}(?:,\d{3})+|\d+")
_FRACTION = re.compile(r"(?P<sign>[+\-−±])?(?P<a>\d+)/(?P<b>\d+)(?P<pct>%)?")
_VULGAR = re.compile(r"(?P<whole>\d*)(?P<frac>[\u00BC-\u00BE\u2150-\u215E\u2189])")
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
        """Whether the number rule applies: a decimal, a percentage or a signed number."""
        return self.decimal or self.percent or self.signed


def _words(text: str):
    for raw in _SPLIT.split(text):
        word = raw.lstrip("'‘’…").rstrip(_STRIP)
        if word and not any(ch.isalpha() for ch in word):
            yield word


def _negative(sign: str, value):
    return -value if sign in ("-", "−") else value


def find_numbers(text: str) -> list[Number]:
    """Every number in a prose string, identifiers excluded, in order."""
    found = []
    for word in _words(text):
        fraction = _FRACTION.fullmatch(word)
        if fraction and int(fraction["b"]):
            value = _negative(fraction["sign"] or "", int(fraction["a"]) / int(fraction["b"]))
            found.append(Number(word, value, True, bool(fraction["pct"]), bool(fraction["sign"])))
            continue
        vulgar = list(_VULGAR.finditer(word))
        if vulgar:
            for m in vulgar:
                value = int(m["whole"] or 0) + unicodedata.numeric(m["frac"])
                found.append(Number(m.group(0), value, True, False, False))
            continue
        for m in _NUMBER.finditer(word):
            body = m["body"]
            if sum(body.count(p) for p in _POINTS) > 1:  # 1.2.3: a version or an address, not a measurement
                continue
            sign = m["sign"] or ""
            # a sign counts only at the start of the word (or after '/'): 5-10 is a range
            signed = bool(sign) and (m.start() == 0 or word[m.start() - 1] == "/")
            if sign and not signed and m.start() > 0 and word[m.start() - 1].isdigit():
                sign = ""
            plain = body.translate({ord("·"): ".", ord("٫"): "."})
            whole, _, decimals = plain.partition(".")
            if whole and "," in whole and not _THOUSANDS.fullmatch(whole):
                # 0,55 or 1,5: a decimal comma, unless that is all the number has; 1,,2 is no number
                if "." in plain or not re.fullmatch(r"\d+,\d+", whole):
                    continue
                plain = whole.replace(",", ".")
            else:
                plain = plain.replace(",", "")
            if not re.fullmatch(r"\d+(\.\d+)?|\.\d+", plain):
                continue  # a stray comma: not a number
            value: float | int = float(plain) if "." in plain else int(plain)
            found.append(Number((sign if signed else "") + body + (m["pct"] or ""), _negative(sign, value),
                                "." in plain, bool(m["pct"]), signed))
    return found


def unbound_numbers(text: str) -> list[Number]:
    """The numbers in `text` that the rule refuses unless they are references or `{{! }}` literals."""
    return [n for n in find_numbers(text) if n.needs_reference]
