"""The glossary: every term the site's pages lean on, declared once in content/glossary.yaml.

    terms:
      n_effective:                      # the id: [[term:n_effective]] links to it
        term: n_effective               # how it is written
        also: [effective sample size]   # other forms a page may use (optional)
        definition: The number of distinct hand-written seed pairs behind a result, ...

A page links a term's first use with `[[term:ID]]` (or `[[term:ID|the words shown]]`): the words
link to the term on the glossary page (content/glossary.md, whose ```glossary block lists every
term) and show its definition on hover and keyboard focus (templates/static/site.js). The build
warns about a term a page uses in its prose before it links it, or without linking it at all
(`Usage`): the reader meets the word before its definition. The glossary page itself is exempt.

Definitions are prose: the number rule applies to them (a measured number has no place in one),
and so does the robustness rule, to them and to every form of a term (site_src/robust.py): they
are published on the glossary page and in every tooltip, where no share can stand beside them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

from . import robust
from .errors import BuildError
from .numbers import unbound_numbers
from .config import read_yaml_file
from .schema import GLOSSARY_TERM, nearest

REL = "content/glossary.yaml"
PAGE = "glossary.md"            # the page holding the ```glossary block (its URL: glossary/)
TERM_ID = re.compile(r"[a-z0-9][a-z0-9_-]*")


@dataclass(frozen=True)
class Term:
    id: str
    term: str
    definition: str
    also: tuple
    line: int                   # the term's line in the fixture

    @property
    def anchor(self) -> str:
        """The term's id on the glossary page, which [[term:ID]] links to."""
        return f"term-{self.id}"


@dataclass
class Glossary:
    terms: dict = field(default_factory=dict)     # id -> Term, in the fixture's order
    pattern: re.Pattern | None = None             # every form of every term, whole words

    def term_of(self, words: str) -> Term | None:
        """The term a matched form belongs to."""
        return self._forms.get(words.lower())

    def uses(self, text: str):
        """(Term, offset) of every form of a term in `text`, in order."""
        if self.pattern is None:
            return
        for match in self.pattern.finditer(text):
            yield self._forms[match.group(0).lower()], match.start()

    def __post_init__(self):
        self._forms: dict = {}


def load_glossary(files, errors, rel: str = REL) -> Glossary:
    """The glossary fixture, checked (every problem an error at its line); an empty glossary when
    there is no fixture."""
    glossary = Glossary()
    why = files.refusal(rel)
    if why == "file not found":
        return glossary
    if why:
        errors.add(BuildError(f"glossary {why}", rel))
        return glossary
    loaded = read_yaml_file(files, rel, errors)
    if loaded is None:
        return glossary
    data, node = loaded
    terms_node = _value_node(node, "terms")
    if not isinstance(data, dict) or set(data) != {"terms"} or not isinstance(data["terms"], dict):
        errors.add(BuildError("the glossary is one mapping, `terms:`, of term ids to {term, definition, also}",
                              f"{rel}:1"))
        return glossary
    lines = {k.value: (k.start_mark.line + 1, v) for k, v in terms_node.value} if terms_node is not None else {}
    forms: dict = {}
    for term_id, entry in data["terms"].items():
        line, entry_node = lines.get(term_id, (1, None))
        where = f"{rel}:{line}"
        if not isinstance(term_id, str) or not TERM_ID.fullmatch(term_id):
            errors.add(BuildError(f"term id {term_id!r}: use lower-case letters, digits, '-' and '_'", where))
            continue
        if not isinstance(entry, dict):
            errors.add(BuildError(f"term {term_id}: must be a mapping with term and definition", where))
            continue
        key_lines = {k.value: k.start_mark.line + 1 for k, _ in entry_node.value} \
            if isinstance(entry_node, yaml.MappingNode) else {}
        if GLOSSARY_TERM.check(entry, lambda k: f"{rel}:{key_lines.get(k, line)}", errors, missing_at=where,
                               prefix=f"term {term_id}: "):
            continue
        also = entry.get("also") or []
        if not all(isinstance(a, str) and a.strip() for a in also):
            errors.add(BuildError(f"term {term_id}: `also` must list the other forms as text", f"{rel}:{key_lines.get('also', line)}"))
            continue
        definition_at = f"{rel}:{key_lines.get('definition', line)}"
        for number in unbound_numbers(entry["definition"]):
            errors.add(BuildError(f"term {term_id}: the definition holds the number {number.text!r}: a definition "
                                  "is prose and states no measured value", definition_at))
        # published on the glossary page and in every tooltip: the rules of prose hold here too
        for text, key in ((entry["term"], "term"), *((a, "also") for a in also), (entry["definition"], "definition")):
            robust.check_text(text, f"{rel}:{key_lines.get(key, line)}", errors, prefix=f"term {term_id}: ")
        term = Term(term_id, entry["term"], " ".join(entry["definition"].split()), tuple(also), line)
        clash = [f for f in (term.term, *term.also) if f.lower() in forms]
        if clash:
            errors.add(BuildError(f"term {term_id}: {clash[0]!r} is already a form of term "
                                  f"{forms[clash[0].lower()].id}", where))
            continue
        for form in (term.term, *term.also):
            forms[form.lower()] = term
        glossary.terms[term_id] = term
    glossary._forms = forms
    if forms:
        alternatives = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))
        glossary.pattern = re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])", re.IGNORECASE)
    return glossary


def _value_node(node, key: str):
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if k.value == key and isinstance(v, yaml.MappingNode):
                return v
    return None


def unknown_term(term_id: str, glossary: Glossary) -> str:
    """The message for a [[term:ID]] the glossary lacks, naming the nearest id."""
    return f"[[term:{term_id}]]: no such term in {REL}{nearest(term_id, glossary.terms)}"


@dataclass
class Usage:
    """Where a page first uses each term in its prose and first links it: a term read before
    its definition is a warning (the glossary page itself defines every term)."""

    first_use: dict = field(default_factory=dict)     # term id -> (line, the words used)
    first_link: dict = field(default_factory=dict)    # term id -> line

    def prose(self, glossary: Glossary, text: str, line: int) -> None:
        """Note the terms `text` (prose on page line `line`) uses before the page links them."""
        for term, _ in glossary.uses(text):
            if term.id not in self.first_use and term.id not in self.first_link:
                self.first_use[term.id] = (line, term)

    def link(self, term_id: str, line: int) -> None:
        """Note a [[term:ID]] on page line `line`."""
        self.first_link.setdefault(term_id, line)

    def warnings(self, page) -> list[BuildError]:
        """One warning per term the page used before it linked it (or never linked)."""
        out = []
        for term_id, (line, term) in sorted(self.first_use.items(), key=lambda kv: kv[1][0]):
            linked = self.first_link.get(term_id)
            later = f" (it is linked only later, at line {linked})" if linked else ""
            out.append(BuildError(f"glossary term {term.term!r} is used before it is defined on this page{later}: "
                                  f"link its first use, [[term:{term_id}]] (definition at {REL}:{term.line})",
                                  page.where(line)))
        return out
