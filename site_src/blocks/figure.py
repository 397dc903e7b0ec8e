"""```figure: one of the figure kinds (site_src/figures/), numbered "Fig. N.M" and wrapped with its
caption and claim and trust chips. The block and each kind's data and options are declared in
site_src/schema.py (FIGURE_BLOCK, FIGURE_KINDS); docs/figures.md describes the kinds.
"""
from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from .. import robust
from ..errors import BuildError, FixtureProblem
from ..pages import Page
from ..schema import FIGURE_BLOCK, FIGURE_ID, FIGURE_KINDS, nearest
from ..render import page_context
from .lines import Lines


@dataclass
class FigureInfo:
    """A numbered figure, for [[fig:ID]] links from any page."""

    id: str
    page: Page
    number: str      # "N.M"
    line: int


@dataclass(frozen=True)
class FigureBlock:
    """A ```figure block, parsed and checked: numbered when it has what numbering needs (an id,
    a kind, a caption, a claim); drawn only when it broke nothing of its schema."""

    kind: str
    id: str
    claim: str
    trust: str | None
    data: dict
    options: dict
    caption: list                # the caption's inline tokens
    spec: dict                   # the block as written, for the figure kind (site_src/figures)
    lines: Lines
    drawable: bool


def parse(values: dict, lines, ctx, inline) -> FigureBlock | None:
    """The block, or None when it cannot even be numbered; every problem reported at its line."""
    fig_id = values.get("id")
    named = isinstance(fig_id, str) and FIGURE_ID.fullmatch(fig_id) is not None
    prefix = f"figure {fig_id}: " if named else "figure block: "

    def where(key: str) -> str:
        return ctx.page.where(lines.of(key))

    problems = FIGURE_BLOCK.check(values, where, ctx.errors, missing_at=ctx.page.where(lines.fence), prefix=prefix)
    if fig_id not in (None, "") and not named:
        ctx.error(f"figure id {fig_id!r}: use letters, digits, '-' and '_'", lines.of("id"))
    kind = values.get("kind")
    declared = FIGURE_KINDS.get(kind) if isinstance(kind, str) else None
    if kind not in (None, "") and declared is None:
        ctx.error(f"{prefix}unknown figure kind {kind!r}{nearest(str(kind), FIGURE_KINDS)}", lines.of("kind"))
        problems += 1
    for name, schema in (("data", declared and declared.data_schema()), ("options", declared and declared.options_schema())):
        given = values.get(name) or {}
        if schema is not None and isinstance(given, dict):
            problems += schema.check(given, lambda key, name=name: where(f"{name}/{key}"), ctx.errors,
                                     missing_at=where(name) if name in values else ctx.page.where(lines.fence),
                                     prefix=prefix)
    for text in _texts(values.get("options")):   # titles and labels drawn: no robustness claim there
        robust.check_text(text, where("options"), ctx.errors, prefix=prefix)
    if not named or any(values.get(k) in (None, "") for k in ("kind", "caption", "claim")):
        return None
    return FigureBlock(kind=str(kind), id=fig_id, claim=values["claim"], trust=values.get("trust"),
                       data=values.get("data") or {}, options=values.get("options") or {},
                       caption=inline(str(values["caption"]), lines.of("caption")), spec=values, lines=lines,
                       drawable=problems == 0)


def places(parsed) -> list[tuple[str, int]]:
    """(id, fence line) of each figure block of a parsed page (markdown.Parsed), in order."""
    return [(block.id, block.lines.fence) for block in parsed.figures]


def number(page, places: list, figures: dict, errors) -> None:
    """Give each figure of a page its "Fig. N.M" (N: the page's place in the navigation, M: the
    figure's on the page); an id already used elsewhere is an error."""
    order = 0
    for fig_id, line in places:
        if fig_id in figures:
            used = figures[fig_id]
            errors.add(BuildError(f"figure id {fig_id!r} is already used at {used.page.where(used.line)}",
                                  page.where(line)))
            continue
        order += 1
        figures[fig_id] = FigureInfo(fig_id, page, f"{page.number}.{order}", line)


def render(self, tokens, idx, options, env) -> str:
    """The figure_block render rule: the kind's drawing (finished later on the drawing thread, see
    render.Rendered.complete), numbered, with its caption and chips."""
    block: FigureBlock | None = tokens[idx].meta["block"]
    ctx = page_context(env, tokens[idx])
    if block is None or not block.drawable:
        return ""
    info = ctx.figures.get(block.id)
    line = block.lines.fence
    if info is None or info.page is not ctx.page or info.line != line:
        return ""   # numbering (stage number) reported what is wrong: a clash of ids
    ctx.out.figure_count += 1
    from .. import figures   # imported by the first figure: a prose page needs none of it
    drawing_context = figures.FigureContext(
        resolve_path=ctx.resolver.path_for,
        resolve_ref=ctx.resolver.resolve,
        receipt_html=lambda resolved, text: str(ctx.receipt(resolved, text)),
        cache_dir=ctx.root / ".cache" / "figures",
        asset_prefix=ctx.prefix + "assets/",
        read_rows=ctx.resolver.rows,
    )
    try:
        drawn = figures.render_figure(block.kind, block.spec, drawing_context, deferred=True)
    except FixtureProblem as exc:
        ctx.error(f"figure {block.id}: {exc.message}", line, exc.fixture)
        return ""
    except figures.FigureError as exc:
        ctx.error(f"figure {block.id}: {exc.message}", line)
        return ""
    except Exception as exc:  # a figure kind's own error: report it at the block, keep building
        ctx.error(f"figure {block.id}: {type(exc).__name__}: {exc}", line)
        return ""
    known = {id(v[0]) for v in ctx.out.values}
    for source in getattr(drawn, "sources", []) or []:
        if id(source) not in known:
            ctx.out.values.append((source, _display_or_raw(source), ""))
    ctx.out.files.update(getattr(drawn, "files", {}) or {})
    if getattr(drawn, "drawing", None) is not None:
        ctx.out.drawings.append((drawn.drawing, block.id, line))
    caption = Markup(self.render(block.caption, options, env))
    return str(ctx.partial("figure.html", id=block.id, number=info.number, body=Markup(drawn.body_html),
                           caption=caption, claim=block.claim, trust=block.trust or ctx.page.meta.get("trust")))


def _display_or_raw(resolved) -> str:
    try:
        return resolved.display
    except ValueError:
        return str(resolved.value)


def _texts(value):
    """Every string in an options value (nested mappings and lists included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
