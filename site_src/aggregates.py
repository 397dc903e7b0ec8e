"""The aggregate stages of a reference, over rows (JSONL rows, or the entries of a block)."""
from __future__ import annotations

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
    if name not in row:
        fields = ", ".join(k for k in row if k != "_line")
        raise FixtureProblem(f"row has no field {name!r} (fields: {fields})", _where(rel, row))
    value = row[name]
    if isinstance(value, float) and not math.isfinite(value):
        raise FixtureProblem(f"field {name!r} is {value!r}, not a finite number", _where(rel, row))
    return value


def matches(rel: str, row: dict, cond: Condition) -> bool:
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


def filter_rows(rel: str, rows: list[dict], conditions) -> list[dict]:
    for cond in conditions:
        rows = [row for row in rows if matches(rel, row, cond)]
    return rows


def aggregate(rel: str, rows: list[dict], agg: Aggregate, context: str):
    """One aggregate over `rows`; `context` says which rows, for the 'no rows' error."""
    if agg.name == "count":
        return len(filter_rows(rel, rows, [agg.condition])) if agg.condition else len(rows)
    values = [field_value(rel, row, agg.field) for row in rows]
    if agg.name == "distinct":
        return len({json_key(v) for v in values})
    if not values:
        raise FixtureProblem(f"{agg.name} {agg.field}: no rows {context}", rel)
    for row, value in zip(rows, values):
        if not _is_number(value):
            raise FixtureProblem(f"{agg.name} {agg.field}: {value!r} is not a number", _where(rel, row))
    if agg.name == "mean":
        return rankstats.mean(values)
    if agg.name == "sum":
        return sum(values) if all(isinstance(v, int) for v in values) else math.fsum(values)
    return min(values) if agg.name == "min" else max(values)


def json_key(value):
    """A hashable stand-in for a JSON value (lists and objects become their JSON text)."""
    if isinstance(value, (list, dict)):
        import json
        return json.dumps(value, sort_keys=True)
    return value


def group_rows(rel: str, rows: list[dict], name: str) -> list[tuple[object, list[dict]]]:
    """Rows grouped by a field, groups in sorted order (numbers before strings)."""
    groups: dict = {}
    for row in rows:
        groups.setdefault(json_key(field_value(rel, row, name)), []).append(row)
    return sorted(groups.items(), key=lambda kv: (isinstance(kv[0], str), str(type(kv[0])), kv[0]))
