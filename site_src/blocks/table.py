"""```table: any block value (an object, an array, a grouped aggregate) as a table, a receipt per
numeric cell. Declared in schema.TABLE_BLOCK; docs/references.md has the grammar.
"""
from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup, escape

from .. import robust
from ..receipt_html import raw_text
from ..receipts import Resolved
from ..refgrammar import RefSyntaxError, parse_ref
from ..render import page_context
from .lines import Lines
from ..schema import TABLE_BLOCK


@dataclass(frozen=True)
class TableBlock:
    """A ```table block, parsed and checked."""

    source: str                  # the reference to a block value
    columns: list | None         # headers, one per column (default: the block's own)
    fmt: tuple | None            # (spec, minus) for numeric cells (default: the source's `fmt`)
    caption: list | None         # the caption's inline tokens
    sort: str | None             # a column; a leading '-' sorts descending
    fields: list | None          # which fields of the block's objects, in order
    lines: Lines


def parse(values: dict, lines, ctx, inline) -> TableBlock | None:
    """The block, or None when it breaks its schema (every problem reported at its line)."""
    where = lambda key: ctx.page.where(lines.of(key))  # noqa: E731
    problems = TABLE_BLOCK.check(values, where, ctx.errors, missing_at=ctx.page.where(lines.fence),
                                 prefix="table block: ")
    fmt = None
    if values.get("fmt") is not None:
        try:
            ref = parse_ref(f"x | fmt {values['fmt']}")
            fmt = (ref.spec, ref.minus)
        except RefSyntaxError as exc:
            ctx.error(f"table fmt: {exc}", lines.of("fmt"))
            problems += 1
    if problems:
        return None
    for column in values.get("columns") or []:   # headers hold no reference: no robustness claim
        robust.check_text(str(column), where("columns"), ctx.errors, prefix="table columns: ")
    caption = values.get("caption")
    return TableBlock(values["source"], values.get("columns"), fmt,
                      inline(str(caption), lines.of("caption")) if caption else None,
                      None if values.get("sort") is None else str(values["sort"]), values.get("fields"), lines)


def render(self, tokens, idx, options, env) -> str:
    """The table_block render rule: the source resolved, its rows as cells with receipts."""
    block: TableBlock | None = tokens[idx].meta["block"]
    ctx = page_context(env, tokens[idx])
    if block is None:
        return ""
    line = block.lines.fence
    src_line = block.lines.of("source")
    resolved = ctx.resolve(block.source, src_line)
    if resolved is None:
        return ""
    if not resolved.is_block:
        ctx.error(f"table source {block.source!r} is a single value, not a block", src_line, resolved.location)
        return ""
    spec_fmt, minus = block.fmt or (resolved.spec, resolved.minus)
    rows = _table_rows(resolved, block.fields)
    if isinstance(rows, str):
        ctx.error(f"table: {rows}", line, resolved.location)
        return ""
    header, records = rows
    columns = block.columns if block.columns is not None else header
    if len(columns) != len(header):
        ctx.error(f"table: 'columns' must list {len(header)} headers ({', '.join(header)})", block.lines.of("columns"))
        return ""
    columns = [str(c) for c in columns]
    if block.sort is not None:
        records = _sort(ctx, records, block.sort, header, columns, block.lines.of("sort"))
    caption = Markup(self.render(block.caption, options, env)) if block.caption is not None else None
    rows_out = [[_cell(ctx, cell, spec_fmt, minus, line) for cell in record] for record in records]
    return str(ctx.partial("table.html", caption=caption, columns=columns, rows=rows_out,
                           link=ctx.prefix + resolved.href if resolved.href else "", location=resolved.location))


def _cell(ctx, cell, spec_fmt: str, minus: bool, line: int) -> dict:
    """One cell: a number with its receipt (in the table's format), text, or `?` and an error."""
    numeric = isinstance(cell, Resolved) and isinstance(cell.value, (int, float)) and not isinstance(cell.value, bool)
    if not isinstance(cell, Resolved):
        return {"html": escape(str(cell)), "numeric": numeric}
    inner = Markup("?")
    if cell.is_block or cell.value is None:
        ctx.error(f"table cell at {cell.location} holds {'a block' if cell.is_block else 'null'}", line, cell.location)
    elif isinstance(cell.value, float) and cell.value != cell.value:
        ctx.error("table cell is NaN", line, cell.location)
    else:
        shown = Resolved(cell.value, cell.source, cell.line, cell.expression, cell.href,
                         spec_fmt, minus, cell.items) if numeric else cell
        try:
            inner = ctx.receipt(shown, shown.display) if numeric else escape(shown.display)
        except ValueError as exc:
            ctx.error(f"table cell: {exc}", line, cell.location)
    return {"html": inner, "numeric": numeric}


def _sort(ctx, records, sort: str, header, columns, line):
    name = sort.lstrip("-")
    if name not in header and name not in columns:
        ctx.error(f"table sort: {name!r} is not a column ({', '.join(columns)})", line)
        return records
    i = columns.index(name) if name in columns else header.index(name)
    keys = []
    for record in records:
        cell = record[i]
        value = cell.value if isinstance(cell, Resolved) else cell
        if isinstance(value, str):
            keys.append((1, 0, value))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
            keys.append((0, value, ""))
        else:
            at = cell.location if isinstance(cell, Resolved) else ""
            ctx.error(f"table sort: column {name!r} holds {raw_text(value)}, which has no order among numbers"
                      " and text", line, at)
            return records
    order = sorted(range(len(records)), key=keys.__getitem__, reverse=sort.startswith("-"))
    return [records[k] for k in order]


def _table_rows(resolved: Resolved, fields):
    """(header, records) of a block; a record is a list of cells (Resolved or plain key text)."""
    items = resolved.items
    if not items:
        return "the block is empty"
    listish = isinstance(resolved.value, list)
    nested = [r for _, r in items if r.items]
    if nested and len(nested) != len(items):
        return "mixes objects and single values; choose a block whose entries are alike"
    if nested:
        names = fields or [k for k, _ in items[0][1].items]
        header = ([] if listish else ["key"]) + [str(n) for n in names]
        records = []
        for key, r in items:
            by_key = {str(k): v for k, v in r.items}
            missing = [n for n in names if str(n) not in by_key]
            if missing:
                return f"entry {key!r} ({r.location}) lacks field(s) {', '.join(map(str, missing))}"
            records.append(([] if listish else [str(key)]) + [by_key[str(n)] for n in names])
        return header, records
    if listish:
        return ["#", "value"], [[str(i + 1), r] for i, (_, r) in enumerate(items)]
    return ["key", "value"], [[str(k), r] for k, r in items]
