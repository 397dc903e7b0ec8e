"""```glossary: every term of content/glossary.yaml as a list of definitions, each with the anchor
`#term-ID` that a page's `[[term:ID]]` links to (site_src/glossary.py). Declared in
schema.GLOSSARY_BLOCK; the glossary page (content/glossary.md) holds it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..glossary import REL
from ..render import page_context
from ..schema import GLOSSARY_BLOCK


@dataclass(frozen=True)
class GlossaryBlock:
    lines: object           # blocks.Lines


def parse(values: dict, lines, ctx, inline) -> GlossaryBlock | None:
    """The block, or None when it breaks its schema."""
    if GLOSSARY_BLOCK.check(values, lambda k: ctx.page.where(lines.of(k)), ctx.errors,
                            missing_at=ctx.page.where(lines.fence), prefix="glossary block: "):
        return None
    if values["source"] != REL:
        ctx.error(f"glossary block: the glossary is {REL}, not {values['source']!r}", lines.of("source"))
        return None
    return GlossaryBlock(lines)


def render(self, tokens, idx, options, env) -> str:
    """The glossary_block render rule: each term, its other forms and its definition."""
    block: GlossaryBlock | None = tokens[idx].meta["block"]
    ctx = page_context(env, tokens[idx])
    if block is None:
        return ""
    if not ctx.glossary.terms:
        ctx.error(f"glossary block: {REL} holds no term", block.lines.fence)
        return ""
    for term in ctx.glossary.terms.values():
        ctx.words(term.term)
    terms = sorted(ctx.glossary.terms.values(), key=lambda t: t.term.lower())
    return str(ctx.partial("glossary.html", terms=terms))
