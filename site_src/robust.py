"""The robustness rule: prose may call a conclusion robust only where it shows that the
conclusion holds in at least `ROBUST_SHARE` of its specifications.

A sentence that uses the word `robust` (or `robustly`, `robustness`), not negated, must hold, in
the same sentence, a value reference to a share of specifications, that is a reference whose key
path ends in a key named `share` or `share_...` (as a specification curve's summary names it),
that resolves to a number of at least `ROBUST_SHARE`. One such share is enough; a sentence with
none, or whose shares are all lower, fails the build at the word's line. Text without references
(front matter, the glossary, a table's headers, raw HTML) cannot show a share, so the word is
refused there.

The rule reads what a reader reads, not the source: the visible text of each sentence
(site_src/visible.py: after markup, literals, code, math, link labels, alt text), `fold`ed so
that invisible characters (a soft hyphen, a zero-width space, any default-ignorable code point)
vanish, compatibility forms (full-width, mathematical letters) and accents fall to plain
letters, and Cyrillic, Greek and other look-alike letters become the Latin ones they resemble;
where a bidirectional control could show letters in reverse, the text is also read backwards.
Negation is read narrowly: `not`, `never`, `nor`, `neither`, `no longer`, `cannot`, `-n't` and
`non-`, directly before the word or across at most two words that keep the negation (`not quite
robust`, `isn't very robust`, `does not seem robust`); `not only`, `not just`, `nothing if not`
and a double negation are claims.

Sentences end at `.`, `!` or `?` followed by a space or the end of the text, and wherever text is
shown apart (an image's alt text, a tooltip, a block of HTML); a decimal point ends nothing. The
rule is generic: it knows no study, only the name of the key and the threshold.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from .errors import BuildError
from .visible import END, Piece

ROBUST_SHARE = 0.9
REF_MARK = "\ue000"     # a value reference's place in a sentence's text

_WORD = re.compile(r"\brobust(?:ly|ness)?\b", re.IGNORECASE)
# words that may stand between a negation and the word without undoing it
_KEEPS = ("a|an|be|been|being|is|are|was|were|seem|seems|seemed|look|looks|appear|appears|prove|proves|"
          "proved|remain|remains|remained|stay|stays|become|becomes|very|quite|entirely|fully|particularly|"
          "especially|sufficiently|necessarily|always|yet|so|as|that|really|completely|wholly|equally|all|at|"
          "terribly|overly|too")
_NEGATION = re.compile(rf"(?:(?<![\w'’])(?:not|never|nor|neither|cannot|no\s+longer)|n['’]t)\s+"
                       rf"(?:(?:{_KEEPS})\s+){{0,2}}$", re.IGNORECASE)
_NON = re.compile(r"\bnon-$", re.IGNORECASE)
_UNDONE = re.compile(r"(?:\bif|\bnot|\bnever|n['’]t)\s+$", re.IGNORECASE)   # 'nothing if not', 'not not'
# Bidirectional controls: an override shows its letters in reverse ("\u202etsubor" reads "robust")
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_END = re.compile(rf"[.!?][\"'”’)]*(?=\s|$|{END})|{END}")

# Default-ignorable code points (Unicode's DerivedCoreProperties), beyond the format characters
# (category Cf) removed by category: a reader sees nothing there.
_IGNORABLE = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0"
                        "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")
# Letters that look like Latin ones: Cyrillic, Greek, Armenian, Latin small capitals (after NFKC).
_CONFUSABLES = str.maketrans(
    "аеорсухѕіјԁһԛԝьвкмнтѵԍ" "АВЕКМНОРСТХЅІЈԌ"
    "αβεικνορτυχγωϲϳ" "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ"
    "օսոհզ"
    "ʀᴏʙᴜꜱᴛᴀᴄᴅᴇɢʜɪᴊᴋʟᴍɴᴘᴠᴡʏᴢ",
    "aeopcyxsijdhqwbbkmhtvg" "ABEKMHOPCTXSIJG"
    "aBeikvoptuxywcj" "ABEZHIKMNOPTYX"
    "ounhq"
    "robustacdeghijklmnpvwyz")


@dataclass
class Claim:
    """One use of the word, the value references of its sentence, and the word's page line."""

    word: str
    refs: list
    line: int = 1


def fold(text: str) -> str:
    """`text` as a reader sees it, spelled plainly: invisible characters removed, compatibility
    forms and accents folded, look-alike letters made Latin."""
    if text.isascii():   # nothing here folds an ASCII character: most of a page's text
        return text
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    text = _IGNORABLE.sub("", unicodedata.normalize("NFKC", text))
    text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
    return unicodedata.normalize("NFC", text).translate(_CONFUSABLES)


def _negated(before: str) -> bool:
    """Whether the text just before the word negates it (read narrowly: see the module's doc)."""
    if _NON.search(before):
        return True
    match = _NEGATION.search(before)
    return match is not None and not _UNDONE.search(before[:match.start()])


def claimed_words(text: str) -> list[str]:
    """The uses of the word in `text` (folded first) that are not negated."""
    folded = fold(text)
    return _claimed(folded) + (_reversed(folded) if _BIDI.search(text) else [])


def _claimed(text: str) -> list[str]:
    return [m.group(0) for m in _WORD.finditer(text) if not _negated(text[:m.start()])]


def _reversed(text: str) -> list[str]:
    """The word as a bidirectional override shows it: spelled backwards in the source (every use
    is a claim: no negation is read backwards)."""
    return [m.group(0) for m in _WORD.finditer(text[::-1])]


def check_text(text: str, where: str, errors, prefix: str = "") -> None:
    """The rule over published text that can hold no reference (front matter, the glossary, a
    block's title or headers, raw HTML, site.yaml): every claim there fails, at `where`."""
    for word in claimed_words(text):
        errors.add(BuildError(prefix + problem(Claim(word, []), []), where))


def claims(pieces: list[Piece]) -> list[Claim]:
    """Every robustness claim in a run of visible text (site_src/visible.py), each with the value
    references of its sentence, before or after the word, and the line the word starts on."""
    text, starts, refs = "", [], []
    bidi = any(_BIDI.search(piece.text) for piece in pieces)
    for piece in pieces:
        starts.append((len(text), piece.line))
        if piece.ref is not None:
            refs.append(piece.ref)
            text += REF_MARK
        else:
            text += fold(piece.text).replace(REF_MARK, "")
    found: list[Claim] = []
    begin, seen_refs = 0, 0
    for end in [m.end() for m in _END.finditer(text)] + [len(text)]:
        sentence = text[begin:end]
        count = sentence.count(REF_MARK)
        sentence_refs = refs[seen_refs:seen_refs + count]
        for match in _WORD.finditer(sentence):
            if not _negated(sentence[:match.start()]):
                found.append(Claim(match.group(0), sentence_refs, _line_at(starts, begin + match.start())))
        for word in _reversed(sentence) if bidi else ():
            found.append(Claim(word, sentence_refs, _line_at(starts, begin)))
        begin, seen_refs = end, seen_refs + count
    return found


def _line_at(starts: list, offset: int) -> int:
    line = starts[0][1] if starts else 1
    for start, piece_line in starts:
        if start > offset:
            break
        line = piece_line
    return line


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
