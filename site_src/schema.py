"""The declared shape of everything an author writes besides prose, in the style of MkDocs'
config_options: page front matter, content/site.yaml, the fenced blocks (```table, ```figure) and
each figure kind's data, options and claim kind.

Each field is declared once with what it holds; `Schema.check` collects every error (unknown
fields with the nearest known one, missing ones, wrong types, values outside their choices), each
at the line of its field, instead of stopping at the first. The figure kinds' option values (a
size in a range, a d3 format) are checked by the kinds when they draw (site_src/figures/data.py).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Callable

from .errors import BuildError

FIGURE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")   # the one rule for figure ids, [[fig:ID]] and #fig-ID
STUDY_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")        # bundles/<study>/: in URLs and shell commands
TRUST = ("exploratory", "calibrated", "registered")
OBSERVATIONAL, CAUSAL, COMPARISON = "observational", "causal", "observational vs causal"
CLAIMS = (OBSERVATIONAL, CAUSAL, COMPARISON)

_TYPES = {   # Field.kind -> (the test a value passes, what the message says it must be)
    "text": (lambda v: isinstance(v, str), "text"),
    "flag": (lambda v: isinstance(v, bool), "true or false"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "mapping": (lambda v: isinstance(v, dict), "a mapping"),
    "any": (lambda v: True, ""),
}


@dataclass(frozen=True)
class Field:
    doc: str
    kind: str = "text"           # a key of _TYPES; "any": checked by its reader
    required: bool = False
    study: bool = False          # required on study pages (those with `bundle:`)
    choices: tuple = ()
    computed: str = ""           # never typed: the build computes it; the reason


@dataclass(frozen=True)
class Schema:
    fields: dict
    unknown: str                 # what an unknown name is called: "unknown key", "unknown option"
    kind_name: str               # "front-matter field", "key": for the type messages
    missing: str = "front matter"   # who lacks a required field: "front matter lacks 'title'" ("" after a prefix)

    def check(self, data: dict, where: Callable[[str], str], errors, study: bool = False, missing_at: str = "",
              prefix: str = "") -> int:
        """Add an error for every way `data` breaks the schema and return how many; `where(name)`
        is a field's location, `missing_at` the location of a missing field, `prefix` starts
        every message (``figure f1: ``)."""
        found = []
        for name in data:
            if name not in self.fields:
                found.append((f"{self.unknown} {name!r}{nearest(str(name), self.fields)}", where(str(name))))
        for name, spec in self.fields.items():
            if spec.computed and name in data:
                found.append((f"{self.kind_name} {name!r} is not typed: {spec.computed}; remove the field", where(name)))
        for name, spec in self.fields.items():
            if (spec.required or (study and spec.study)) and data.get(name) in (None, ""):
                why = " (study pages, those with bundle:, need it)" if spec.study else ""
                found.append((f"{self.missing} lacks {name!r}{why}".lstrip(), missing_at))
        for name, spec in self.fields.items():
            test, expected = _TYPES[spec.kind]
            empty = data.get(name) is None and spec.kind in ("list", "mapping")   # `options:` left empty
            if name in data and not empty and not test(data[name]):
                found.append((f"{self.kind_name} {name!r} must be {expected}", where(name)))
        for name, spec in self.fields.items():
            if spec.choices and name in data and data[name] not in spec.choices:
                found.append((f"unknown {name} {data[name]!r}: use one of {listing(spec.choices)}", where(name)))
        for message, at in found:
            errors.add(BuildError(prefix + message, at))
        return len(found)


def nearest(name: str, known) -> str:
    """`; did you mean 'x'?` for the known name closest to a misspelled one, and the known names."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{hint} (known: {', '.join(known) or 'none'})"


def listing(choices: tuple) -> str:
    """Choices as an error message lists them (quoted when one holds a space)."""
    return ", ".join(repr(c) if any(" " in x for x in choices) else c for c in choices)


FRONT_MATTER = Schema({
    "title": Field("the page's one h1 and its <title>", required=True),
    "nav_title": Field("a short label for the navigation bar, where the title is a whole question"),
    "summary": Field("one sentence under the title, in listings and the description", required=True),
    "subject": Field("what the study looked at (model, data)", study=True),
    "question": Field("the question the study asks", study=True),
    "access": Field("what access to the model the study needed", study=True),
    "trust": Field("the page's trust rung", study=True, choices=TRUST),
    "trust_reason": Field("one line on why the page's trust rung is what it is, shown beside the rung"),
    "claim": Field("the kind of claim the page makes", study=True, choices=CLAIMS),
    "bundle": Field("the study folder bundles/<study>/ the page's files resolve in first"),
    "reproduction": Field("computed", computed="the reproduction line is computed from the records under "
                                               "reproductions/<study>/"),
    "calibration": Field("the calibration study a calibrated page cites (site_src/honesty)"),
    "raw_html": Field("lets the page's Markdown hold HTML, which is still checked (site_src/rawhtml.py)",
                      kind="flag"),
}, unknown="unknown front-matter field", kind_name="front-matter field")

SITE = Schema({
    "title": Field("the site's name (config.py refuses a missing one)", kind="any"),
    "base_url": Field("the absolute URL the site is served from (for the sitemap); empty for none", kind="any"),
    "nav": Field("page paths relative to content/, in navigation order, or groups of them (a title mapped to a "
                 "list); a group may name a page the build makes by its URL (registrations/)", kind="any"),
    "authors": Field("the names a study's citation gives as its authors", kind="any"),
    "description": Field("the site's description", kind="any"),
}, unknown="unknown key", kind_name="key", missing="content/site.yaml")


# ---------------------------------------------------------------- fenced blocks (site_src/blocks/)

TABLE_BLOCK = Schema({
    "source": Field("a reference to a block value (an object, an array or a grouped aggregate)", required=True),
    "columns": Field("the column headers, one per column the block gives", kind="list"),
    "fmt": Field("a format for the numeric cells, as a reference's `fmt` stage: +.3f minus", kind="any"),
    "caption": Field("Markdown above the table; references allowed", kind="any"),
    "sort": Field("the column to sort by; a leading '-' sorts descending", kind="any"),
    "fields": Field("which fields of the block's objects become columns, in order", kind="list"),
}, unknown="unknown key", kind_name="key", missing="")

FINDINGS_BLOCK = Schema({
    "title": Field("the box's heading (default: What this study found)"),
    "claims": Field("the findings, each {text, claim, trust, study}: three to five on a study page", kind="list",
                    required=True),
}, unknown="unknown key", kind_name="key", missing="")

FINDING = Schema({
    "text": Field("one sentence of Markdown holding its number as a value reference (its receipt)", required=True),
    "claim": Field("the claim kind of the finding: one its study's claim allows and its values support",
                   required=True, choices=CLAIMS),
    "trust": Field("its trust rung, which is its study's (the page's on a study page); typed, it must be that",
                   choices=TRUST),
    "study": Field("the study page the finding comes from, relative to content/ (studies/organism.md): the "
                   "finding links to it and takes its rung; required off a study page"),
}, unknown="unknown key", kind_name="key", missing="")

GLOSSARY_BLOCK = Schema({
    "source": Field("the glossary fixture, content/glossary.yaml: every term, in its order", required=True),
}, unknown="unknown key", kind_name="key", missing="")

GLOSSARY_TERM = Schema({
    "term": Field("the term as a page writes it", required=True),
    "definition": Field("one or two plain sentences; no measured number", required=True),
    "also": Field("other forms of the term a page may use (plural, spelled out)", kind="list"),
}, unknown="unknown key", kind_name="key", missing="")

FIGURE_BLOCK = Schema({
    "kind": Field("the figure kind (FIGURE_KINDS below; docs/figures.md)", required=True),
    "id": Field("letters, digits, '-' and '_': the anchor #fig-ID, the CSV's name, [[fig:ID]]", required=True),
    "caption": Field("Markdown under the figure, after its number; references allowed", kind="any", required=True),
    "claim": Field("the claim kind the figure makes; must be the one its kind and data give", required=True,
                   choices=CLAIMS),
    "trust": Field("the figure's trust rung, when not the page's", choices=TRUST),
    "data": Field("the kind's data: fixture names or value references", kind="mapping"),
    "options": Field("the kind's options", kind="mapping"),
}, unknown="unknown key", kind_name="key", missing="")


@dataclass(frozen=True)
class FigureKind:
    """One figure kind, declared once: what it draws, the data and options it reads, and the
    claim kind its data give (site_src/honesty/claims.py holds a declared claim to it)."""

    doc: str
    claim: str | None            # the claim kind; None: the kind of the value under `claim_from`
    data: dict                   # data key -> Field
    options: dict = field(default_factory=dict)   # option -> Field (COMMON_OPTIONS are added)
    claim_from: str = ""         # data key whose value's claim kind is the figure's (neutral: observational)

    def data_schema(self) -> Schema:
        """The schema of the kind's `data` mapping."""
        return Schema(self.data, unknown="unknown data key", kind_name="data key", missing="`data`")

    def options_schema(self) -> Schema:
        """The schema of the kind's `options` mapping (the common options included)."""
        return Schema({**self.options, **COMMON_OPTIONS}, unknown="unknown option", kind_name="option",
                      missing="`options`")


def _rows(what: str) -> Field:
    return Field(f"{what}: a JSONL fixture", required=True)


COMMON_OPTIONS = {"table_rows": Field("rows shown in the data table (the CSV has all); default 100", kind="any")}
_DIMENSION = Field("the dimension the static view shows (default: the first)")
_RANKED_DATA = {"attribution": _rows("attribution rows"), "patching": _rows("patching rows")}
_RANKED_OPTIONS = {   # the ranking kinds' options, read by figures/data.py ranked_spec
    "mode": Field("the patching mode the rankings use: mean (default), zero or swap"),
    "dimension": _DIMENSION,
    "patch_score": Field("how a component's patching rows make its score: ratio_of_means (default, the one "
                         "patch score every study ranks by, docs/statistics.md) or mean_ratio (a labelled "
                         "sensitivity check only; bundle_kit/rankstats.py PATCH_SCORES)"),
}

FIGURE_KINDS = {
    "rank_scatter": FigureKind("attribution rank against patch rank, one dot per component", COMPARISON,
                               _RANKED_DATA, _RANKED_OPTIONS),
    "rho_bars": FigureKind("rank correlation of the two methods per dimension, one panel per series",
                           COMPARISON, {"series": Field("a list of {label, ref, ci}; ref a {dimension: rho} block, "
                                                        "ci (optional) its {dimension: [low, high]} intervals",
                                                        kind="list", required=True)},
                           {"width": Field("each panel's plot width in pixels (80 to 280)", kind="any")}),
    "patch_picker": FigureKind("clean against patched margin of every pair, for a chosen component", CAUSAL,
                               _RANKED_DATA, {**_RANKED_OPTIONS,
                                              "component": Field("the component shown first (default: patch rank 1)")}),
    "top_lists": FigureKind("each method's top list, with the other's rank", COMPARISON, _RANKED_DATA,
                            {**_RANKED_OPTIONS, "n": Field("entries per list (default 10)", kind="any")}),
    "lens_curve": FigureKind("the running margin read layer by layer, and the crystallization depth", OBSERVATIONAL,
                             {"lens": _rows("lens rows")},
                             {"dimension": Field("the dimension drawn first, the others grey (default: the first)")}),
    "removal_curve": FigureKind("the share of the margin removed as the top k blocks are patched together, "
                                "beside random directions", CAUSAL,
                                {"where": Field("a reference to {objective: {order, curve, moved_curve}} "
                                                "(golden.json#where)", required=True),
                                 "target": Field("a reference to the share a smallest set must remove", required=True),
                                 "null_curve": _rows("the null's per-direction curve rows (null_curve.jsonl)"),
                                 "null_sums": _rows("the null's per-direction sums (null_directions.jsonl)")},
                                {"dimension": Field("the objective drawn first (default: the first)")}),
    "margin_distribution": FigureKind("the model's own margins, nothing replaced", OBSERVATIONAL,
                                      {"pairs": _rows("rows with dimension, pair_id and a margin")},
                                      {"field": Field("the margin field (default: margin, else clean_margin)")}),
    "heatmap": FigureKind("a labelled matrix, each cell with its value", None,
                          {"matrix": Field("a reference to {labels, values} or {row: {column: value}}", required=True)},
                          {"domain": Field("the colour scale's [low, high] (default [-1, 1])", kind="list"),
                           "format": Field("the cells' d3 number format (default .2f)"),
                           "value_title": Field("what a value is called (default: value)"),
                           "cell": Field("a cell's size in pixels (default 44)", kind="any")},
                          claim_from="matrix"),
    "key_recovery": FigureKind("each method's key recovery with its interval, over all families and per family",
                               COMPARISON,
                               {"methods": Field("a reference to {method: {value, ci, per_family, ci_per_family}} "
                                                 "(golden.json#key_recovery/by_method)", required=True)},
                               {"chance": Field("where the dashed chance line sits (default 0.5)", kind="any"),
                                "groups": Field("what the series after the first are (default families)", kind="any")}),
    "spec_curve": FigureKind("one headline's value under every analysis choice, sorted, with the choices beneath",
                             None,
                             {"rows": _rows("specification rows (spec_curve.jsonl)"),
                              "summary": Field("a reference to the headline's summary "
                                               "(golden.json#key_recovery/spec_curve/<headline>)", required=True)},
                             {"height": Field("the curve's height in pixels, 80 to 600 (default 200)", kind="any")},
                             claim_from="summary"),
}
