"""```findings: what a study found, first: a box of claims, each one sentence holding its number
as a value reference (its receipt), with its claim kind and trust rung. Declared in
schema.FINDINGS_BLOCK (the box) and schema.FINDING (each claim).

    ```findings
    claims:
      - text: >-
          The two rankings agree on average, {{ golden.json#mean_rho | fmt +.3f minus }}.
        claim: observational vs causal
    ```

A finding's rung and claim kind come from its study and the values it quotes, never from the
finding itself. On a study page the box holds three to five claims and each claim's rung is the
page's; on another page (the home page's strip) each claim must name its `study:`, links to it,
and takes that study's rung. A typed `trust:` that is not that rung is refused; the claim kind
must be one the study's claim allows, and the kind its values support (checked with the page's
rungs and claims, site_src/honesty/rungs.py, from `Rendered.findings`); every bundle value it
quotes must come from its study's bundle.
"""
from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

import re

from .. import robust
from ..render import page_context
from ..schema import CLAIMS, FINDING, FINDINGS_BLOCK
from ..urls import href

_BUNDLE = re.compile(r"^bundles/([^/]+)/")

STUDY_CLAIMS = (3, 5)   # how many claims a study page's box holds
DEFAULT_TITLE = "What this study found"


@dataclass(frozen=True)
class Finding:
    text: list              # inline tokens of the sentence
    claim: str
    trust: str | None
    study: str | None       # content-relative path of the study it links to
    number: int             # 1-based, for messages


@dataclass(frozen=True)
class FindingsBlock:
    title: str
    claims: list            # Finding
    lines: object           # blocks.Lines


def parse(values: dict, lines, ctx, inline) -> FindingsBlock | None:
    """The box, or None when it breaks its schema (every problem reported at its line)."""
    problems = FINDINGS_BLOCK.check(values, lambda k: ctx.page.where(lines.of(k)), ctx.errors,
                                    missing_at=ctx.page.where(lines.fence), prefix="findings block: ")
    claims = values.get("claims") if isinstance(values.get("claims"), list) else []
    at = lines.of("claims")
    low, high = STUDY_CLAIMS
    if ctx.page.is_study and not low <= len(claims) <= high:
        ctx.error(f"findings block: a study page states {low} to {high} findings, not {len(claims)}", at)
        problems += 1
    found = []
    for number, item in enumerate(claims, start=1):
        prefix = f"findings block: claim {number}: "
        if not isinstance(item, dict):
            ctx.error(prefix + "must be a mapping with text and claim", at)
            problems += 1
            continue
        if FINDING.check(item, lambda k: ctx.page.where(at), ctx.errors, missing_at=ctx.page.where(at), prefix=prefix):
            problems += 1
            continue
        found.append(Finding(inline(str(item["text"]), at), item["claim"], item.get("trust"),
                             item.get("study"), number))
    if problems:
        return None
    if values.get("title") is not None:
        robust.check_text(str(values["title"]), ctx.page.where(lines.of("title")), ctx.errors, prefix="findings block: ")
    return FindingsBlock(str(values.get("title") or DEFAULT_TITLE), found, lines)


def render(self, tokens, idx, options, env) -> str:
    """The findings_block render rule: each claim's sentence (its receipts numbered in reading
    order), claim chip and rung chip, and a link to its study where it names one."""
    block: FindingsBlock | None = tokens[idx].meta["block"]
    ctx = page_context(env, tokens[idx])
    if block is None:
        return ""
    at = block.lines.of("claims")
    items = []
    for finding in block.claims:
        prefix = f"findings block: claim {finding.number}: "
        before = len(ctx.out.values)
        html = Markup(self.render(finding.text, options, env))
        values = [resolved for resolved, _text, _rid in ctx.out.values[before:]]
        if not values:
            ctx.error(prefix + "holds no value reference: a finding states its number with its receipt, "
                      "{{ FILE#KEY }}", at)
        study = _study(ctx, finding, prefix, at)
        # the rung and the claim kind a finding may show are its study's (this page, on a study page)
        source = study if study is not None else (ctx.page if ctx.page.is_study else None)
        trust = source.meta.get("trust") if source is not None else None
        if source is not None and finding.trust is not None and finding.trust != trust:
            ctx.error(prefix + f"claims the rung {finding.trust!r}, but its {'study' if study else 'page'}'s is "
                      f"{trust!r}: a finding takes its study's rung (drop trust:)", at)
        study_claim = source.meta.get("claim") if source is not None else None
        if study_claim in CLAIMS[:2] and finding.claim != study_claim:
            ctx.error(prefix + f"a {finding.claim} finding from a study whose claim is {study_claim!r}", at)
        bundle = source.meta.get("bundle") if source is not None else None
        for resolved in values if source is not None else ():
            match = _BUNDLE.match(resolved.source or "")
            if match and match.group(1) != bundle:
                ctx.error(prefix + f"quotes {resolved.source}, which is not its study's bundle "
                          f"({f'bundles/{bundle}/' if bundle else 'none'}): a finding's rung and claim come from "
                          "its study, so it quotes that study's values", at)
                break
        ctx.out.findings.append((finding.number, at, finding.claim, values))
        items.append({"html": html, "claim": finding.claim, "trust": trust,
                      "study": {"name": study.name, "href": href(ctx.prefix, study.url)} if study is not None else None})
    return str(ctx.partial("findings.html", title=block.title, id=f"findings-{block.lines.fence}", items=items))


def _study(ctx, finding: Finding, prefix: str, at: int):
    """The study page a finding names (None, reported, when it names none it can come from)."""
    if not finding.study:
        if not ctx.page.is_study:
            ctx.error(prefix + "names no study: off a study page a finding says which study it comes from "
                      "(study: studies/NAME.md), whose rung and claim kind it takes", at)
        return None
    study = ctx.pages.get(finding.study)
    if study is None:
        ctx.error(prefix + f"study {finding.study!r} names no page under content/", at)
    elif not study.is_study:
        ctx.error(prefix + f"{finding.study} is not a study page (it has no bundle:)", at)
        return None
    return study
