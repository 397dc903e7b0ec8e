"""The aggregate stages of a reference, over rows (JSONL rows, or the entries of a block)."""
from __future__ import annotations

import json
import math
import operator

from bundle_kit import rankstats

from .errors import FixtureProblem
from .refgrammar import Aggregate, Condition

_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}


def _where(rel: str, row: dict) -> str:
    return f"{rel}:{row['_line']}" if row.get("_line") else rel


def field_value(rel: str, row: dict, name: str):
    """A row's field, or FixtureProblem naming the row's line and the fields it has."""
    if name not in row:
        fields = ", ".join(k for k in row if k != "_line")
        raise FixtureProblem(f"row has no field {name!r} (fields: {fields})", _where(rel, row))
    value = row[name]
    if isinstance(value, float) and not math.isfinite(value):
        raise FixtureProblem(f"field {name!r} is {value!r}, not a finite number", _where(rel, row))
    return value


def matches(rel: str, row: dict, cond: Condition) -> bool:
    """Whether a row meets a `where` condition (order comparisons need numbers)."""
    value = field_value(rel, row, cond.field)
    if cond.op in ("==", "!="):
        return _OPS[cond.op](value, cond.value)
    if not _is_number(value) or not _is_number(cond.value):
        if not (isinstance(value, str) and isinstance(cond.value, str)):
            raise FixtureProblem(
                f"cannot compare {cond.field}={value!r} with {cond.value!r} using {cond.op}", _where(rel, row))
    return _OPS[cond.op](value, cond.value)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def filter_rows(rel: str, rows, conditions):
    """The rows matching every condition, as a stream (rows may be a JSONL file's stream)."""
    for cond in conditions:
        rows = _matching(rel, rows, cond)
    return rows


def _matching(rel: str, rows, cond: Condition):
    return (row for row in rows if matches(rel, row, cond))


def aggregate(rel: str, rows, agg: Aggregate, context: str):
    """One aggregate over `rows` (any iterable, consumed once); `context` says which rows, for the
    'no rows' error. Only the values the aggregate needs are kept, never the rows."""
    if agg.name == "count":
        return sum(1 for _ in (filter_rows(rel, rows, [agg.condition]) if agg.condition else rows))
    if agg.name == "distinct":
        return len({json_key(field_value(rel, row, agg.field)) for row in rows})
    values = []
    for row in rows:
        value = field_value(rel, row, agg.field)
        if not _is_number(value):
            raise FixtureProblem(f"{agg.name} {agg.field}: {value!r} is not a number", _where(rel, row))
        values.append(value)
    if not values:
        raise FixtureProblem(f"{agg.name} {agg.field}: no rows {context}", rel)
    if agg.name == "mean":
        return rankstats.mean(values)
    if agg.name == "sum":
        return sum(values) if all(isinstance(v, int) for v in values) else math.fsum(values)
    return min(values) if agg.name == "min" else max(values)


def json_key(value):
    """A hashable stand-in for a JSON value (lists and objects become their JSON text)."""
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return value


def group_rows(rel: str, rows, name: str, keep: tuple = ()) -> list[tuple[object, list[dict]]]:
    """Rows grouped by a field, groups in sorted order (numbers before strings). Each kept row
    holds only the fields in `keep` (and its line), so a large stream is not held whole; with no
    `keep` (a plain count) nothing of the row is kept."""
    groups: dict = {}
    for row in rows:
        # a plain count reads nothing of its rows: keep a placeholder, not the row
        slim = {k: row[k] for k in (*keep, "_line") if k in row} if keep else None
        groups.setdefault(json_key(field_value(rel, row, name)), []).append(slim)
    return sorted(groups.items(), key=lambda kv: (isinstance(kv[0], str), str(type(kv[0])), kv[0]))
