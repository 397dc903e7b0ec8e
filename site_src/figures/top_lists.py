"""Kind `top_lists`: the top N components by attribution and by patching, side by side.

Every entry gives its rank in both lists, how much patching it moves the margin, and in how many
pairs that patch was flagged off-distribution (`offdist_flag`), each number with a receipt
(computed by rankstats, or counted, from the named JSONL). Under each list, the other list's
top components that rank beyond it, with their rank here. Plain HTML: no chart.
"""
from __future__ import annotations

from html import escape

from bundle_kit import rankstats

from .data import computed, file_receipt, fmt_rank, offdist_counts, ranked_spec, read_rows, size_option
from .types import FigureParts, Table


def build(spec: dict, ctx) -> FigureParts:
    """The top lists' parts: each method's top n, every number a receipt."""
    rs = ranked_spec(spec, ctx)
    opts, mode, attribution, patching, ranked, dimension = (
        rs.opts, rs.mode, rs.attribution, rs.patching, rs.ranked, rs.dimension)
    n = size_option(spec, "n", 10, 1, 200)
    r = ranked[dimension]
    attr_base, patch_base = file_receipt(ctx, attribution), file_receipt(ctx, patching)
    where = f"dimension {dimension}, {mode} patching, over the {len(r.components)} components both files cover"
    _, patch_rows = read_rows(ctx, patching, rankstats.PATCHING_FIELDS)
    flags = offdist_counts(patch_rows, mode, dimension)
    sources = []

    def receipt(base, value, text, expression):
        resolved = computed(base, value, f"{expression} ({where}; rankstats)")
        sources.append(resolved)
        return ctx.receipt_html(resolved, text)

    def numbers(c: str) -> str:
        a = receipt(attr_base, r.attribution_rank[c], fmt_rank(r.attribution_rank[c]),
                    f"attribution rank of {c}: mean attribution over pairs, rank 1 = largest")
        p = receipt(patch_base, r.patch_rank[c], fmt_rank(r.patch_rank[c]),
                    f"patch rank of {c}: mean |effect| / |clean margin| over pairs, rank 1 = largest")
        moves = 100 * r.patch_score[c]
        # shown to the tenth of a percent, the most these few pairs resolve; the receipt and the
        # data table keep the full value
        m = receipt(patch_base, moves, f"{moves:.1f}%", f"moves % of {c}: 100 * mean |effect| / |clean margin|")
        if c not in flags:
            return f"attribution rank {a}, patch rank {p}, moves {m}, off-distribution not scored"
        flagged, scored = flags[c]
        f = receipt(patch_base, flagged, str(flagged),
                    f"pairs whose {c} patch is flagged off-distribution: rows with offdist_flag true")
        return f"attribution rank {a}, patch rank {p}, moves {m}, off-distribution in {f} of {scored} pairs"

    def order(rank: dict) -> list[str]:
        return sorted(r.components, key=lambda c: (rank[c], r.components.index(c)))

    by_attr, by_patch = order(r.attribution_rank)[:n], order(r.patch_rank)[:n]
    html = ['<div class="fig-lists">']
    table_rows = []
    for key, title, mine, other, rank in (
        ("attribution", f"Top {len(by_attr)} by attribution (observational)", by_attr, by_patch, r.attribution_rank),
        ("patching", f"Top {len(by_patch)} by patching (causal, {mode})", by_patch, by_attr, r.patch_rank),
    ):
        list_id = f"fig-{spec['id']}-{key}"
        html.append(f'<div class="fig-list"><p class="fig-list-title" id="{list_id}"><strong>{escape(title)}</strong></p>')
        html.append(f'<ol aria-labelledby="{list_id}">')
        for c in mine:
            html.append(f'<li><span class="fig-component">{escape(c)}</span>: {numbers(c)}</li>')
            table_rows.append([key, c, fmt_rank(r.attribution_rank[c]), fmt_rank(r.patch_rank[c]),
                               f"{100 * r.patch_score[c]:.4f}",
                               f"{flags[c][0]} of {flags[c][1]}" if c in flags else "not scored"])
        html.append("</ol>")
        beyond = [c for c in other if c not in mine]
        if beyond:
            items = ", ".join(f'<span class="fig-component">{escape(c)}</span> ({fmt_rank(rank[c])})' for c in beyond)
            html.append(f'<p class="fig-beyond">Ranked beyond this list (rank here): {items}</p>')
        html.append("</div>")
    html.append("</div>")
    table = Table(["list", "component", "attribution rank", "patch rank", "moves %",
                   "pairs flagged off-distribution"], table_rows)
    alt_text = f"Top {n} components by attribution and by patching, {dimension}."
    return FigureParts(chart=None, table=table, marks=len(by_attr) + len(by_patch), alt=alt_text,
                       sources=sources, html="\n".join(html))
