"""```findings: what a study found, first: a box of claims, each one sentence holding its number
as a value reference (its receipt), with its claim kind and trust rung. Declared in
schema.FINDINGS_BLOCK (the box) and schema.FINDING (each claim).

    ```findings
    claims:
      - text: >-
          The two rankings agree on average, {{ golden.json#mean_rho | fmt +.3f minus }}.
        claim: observational vs causal
    ```

On a study page the box holds three to five claims and each claim's rung is the page's (never
above it); a claim kind must be one the page's claim allows. On another page (the home page's
strip) each claim names its `study:`, links to it, and takes that study's rung.
"""
from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from ..render import page_context
from ..schema import CLAIMS, FINDING, FINDINGS_BLOCK, TRUST
from ..urls import href

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
    return FindingsBlock(str(values.get("title") or DEFAULT_TITLE), found, lines)


def _rank(trust: str) -> int:
    return TRUST.index(trust)


def render(self, tokens, idx, options, env) -> str:
    """The findings_block render rule: each claim's sentence (its receipts numbered in reading
    order), claim chip and rung chip, and a link to its study where it names one."""
    block: FindingsBlock | None = tokens[idx].meta["block"]
    ctx = page_context(env, tokens[idx])
    if block is None:
        return ""
    at = block.lines.of("claims")
    page_trust, page_claim = ctx.page.meta.get("trust"), ctx.page.meta.get("claim")
    items = []
    for finding in block.claims:
        prefix = f"findings block: claim {finding.number}: "
        before = len(ctx.out.values)
        html = Markup(self.render(finding.text, options, env))
        if len(ctx.out.values) == before:
            ctx.error(prefix + "holds no value reference: a finding states its number with its receipt, "
                      "{{ FILE#KEY }}", at)
        study = ctx.pages.get(finding.study) if finding.study else None
        if finding.study and study is None:
            ctx.error(prefix + f"study {finding.study!r} names no page under content/", at)
        elif study is not None and not study.is_study:
            ctx.error(prefix + f"{finding.study} is not a study page (it has no bundle:)", at)
        ceiling = study.meta.get("trust") if study is not None else page_trust
        trust = finding.trust or ceiling
        if trust is None:
            ctx.error(prefix + "needs a trust rung: name its study:, or give trust:", at)
        elif ceiling is not None and _rank(trust) > _rank(ceiling):
            ctx.error(prefix + f"claims the rung {trust!r}, above its {'study' if study else 'page'}'s "
                      f"{ceiling!r}", at)
        if study is None and page_claim in CLAIMS[:2] and finding.claim != page_claim:
            ctx.error(prefix + f"a {finding.claim} finding on a page whose claim is {page_claim!r}", at)
        items.append({"html": html, "claim": finding.claim, "trust": trust,
                      "study": {"name": study.name, "href": href(ctx.prefix, study.url)} if study is not None else None})
    return str(ctx.partial("findings.html", title=block.title, id=f"findings-{block.lines.fence}", items=items))
