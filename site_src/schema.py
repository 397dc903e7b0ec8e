"""The declared shape of everything an author writes besides prose, in the style of MkDocs'
config_options: page front matter, content/site.yaml, and the table and figure blocks.

Each field is declared once with what it holds; `check` collects every error (unknown fields,
missing ones, wrong types, values outside their choices) with the line of the field, instead of
stopping at the first. The figure kinds' own options are declared with their kinds
(site_src/figures/data.py: size_option, format_option) and checked there.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import BuildError

FIGURE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")   # the one rule for figure ids, [[fig:ID]] and #fig-ID
STUDY_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")        # bundles/<study>/: in URLs and shell commands
TRUST = ("exploratory", "calibrated", "registered")
CLAIMS = ("observational", "causal", "observational vs causal")


@dataclass(frozen=True)
class Field:
    doc: str
    kind: str = "text"           # "text" | "flag" (true/false) | "any" (checked by its reader)
    required: bool = False
    study: bool = False          # required on study pages (those with `bundle:`)
    choices: tuple = ()
    computed: str = ""           # never typed: the build computes it; the reason


@dataclass(frozen=True)
class Schema:
    fields: dict
    unknown: str                 # message for an unknown field: {name!r} and {known}
    kind_name: str               # "front-matter field", "key": for the type messages

    def check(self, data: dict, where, errors, study: bool = False, missing_at=None) -> None:
        """Add an error for every way `data` breaks the schema; `where(name)` is a field's
        location, `missing_at` the location of a missing field."""
        known = ", ".join(self.fields)
        for name in data:
            if name not in self.fields:
                errors.add(BuildError(self.unknown.format(name=name, known=known), where(str(name))))
        for name, spec in self.fields.items():
            if spec.computed and name in data:
                errors.add(BuildError(f"{self.kind_name} {name!r} is not typed: {spec.computed}; remove the field",
                                      where(name)))
        for name, spec in self.fields.items():
            if (spec.required or (study and spec.study)) and data.get(name) in (None, ""):
                why = " (study pages, those with bundle:, need it)" if spec.study else ""
                errors.add(BuildError(f"front matter lacks {name!r}{why}", missing_at))
        for name, spec in self.fields.items():
            if name not in data:
                continue
            value = data[name]
            if spec.kind == "text" and not isinstance(value, str):
                errors.add(BuildError(f"{self.kind_name} {name!r} must be text", where(name)))
            elif spec.kind == "flag" and not isinstance(value, bool):
                errors.add(BuildError(f"{self.kind_name} {name!r} must be true or false", where(name)))
        for name, spec in self.fields.items():
            if spec.choices and name in data and data[name] not in spec.choices:
                errors.add(BuildError(f"unknown {name} {data[name]!r}: use one of {listing(spec.choices)}", where(name)))


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
    "claim": Field("the kind of claim the page makes", study=True, choices=CLAIMS),
    "bundle": Field("the study folder bundles/<study>/ the page's files resolve in first"),
    "reproduction": Field("computed", computed="the reproduction line is computed from the records under "
                                               "reproductions/<study>/"),
    "calibration": Field("the calibration study a calibrated page cites (site_src/honesty)"),
    "raw_html": Field("lets the page's Markdown hold HTML, which is still checked (site_src/rawhtml.py)",
                      kind="flag"),
}, unknown="unknown front-matter field {name!r} (known: {known})", kind_name="front-matter field")

SITE = Schema({
    "title": Field("the site's name (config.py refuses a missing one)", kind="any"),
    "base_url": Field("the absolute URL the site is served from (for the sitemap); empty for none", kind="any"),
    "nav": Field("page paths relative to content/, in navigation order", kind="any"),
    "description": Field("the site's description", kind="any"),
}, unknown="unknown key {name!r} (known: {known})", kind_name="key")

TABLE_BLOCK = ("source", "columns", "fmt", "caption", "sort", "fields")
FIGURE_BLOCK_REQUIRED = ("kind", "id", "caption", "claim")
