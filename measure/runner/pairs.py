"""Reading a pairs file, refusing what would turn into a wrong measurement (file:line errors).

The file is read with bounds, so no input can exhaust memory or the parser: at most
`MAX_BYTES` in all and `MAX_LINE` a line (read a line at a time, never more than that), UTF-8,
and rows that nest at most `MAX_DEPTH` levels (deeper is refused before the JSON parser sees it).
"""
from __future__ import annotations

import json
from pathlib import Path

from bundle_kit import contract

from measure.errors import MeasureError

MAX_BYTES = 1 << 30   # a whole pairs file
MAX_LINE = 1 << 20    # one pair: a prompt and two responses
MAX_DEPTH = 2         # an object, and at most a flat array inside it (refused later as not a string)


def _constant(name: str):
    raise ValueError(f"{name} is not a number")


_DECODER = json.JSONDecoder(parse_constant=_constant)


def _too_deep(text: str) -> bool:
    """Whether a line nests arrays or objects more than `MAX_DEPTH` deep (outside strings)."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif char in "]}":
            depth -= 1
    return False


def _rows(path: Path):
    """(line number, object) for every non-blank line, each read and checked within the bounds."""
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise MeasureError(f"{path}: cannot open: {exc.strerror}") from None
    total = 0
    with handle:
        number = 0
        while True:
            raw = handle.readline(MAX_LINE + 1)
            if not raw:
                return
            number += 1
            total += len(raw)
            if len(raw) > MAX_LINE:
                raise MeasureError(f"{path}:{number}: line over {MAX_LINE >> 20} MiB")
            if total > MAX_BYTES:
                raise MeasureError(f"{path}:{number}: the file is over {MAX_BYTES >> 30} GiB")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise MeasureError(f"{path}:{number}: not UTF-8 text (byte {exc.start + 1} of the line)") from None
            if not text.strip():
                continue
            if _too_deep(text):
                raise MeasureError(f"{path}:{number}: nested more than {MAX_DEPTH} levels deep (a row is "
                                   f"a flat object of strings)")
            try:
                row = _DECODER.decode(text)
            except ValueError as exc:
                raise MeasureError(f"{path}:{number}: not valid JSON ({exc})") from None
            if not isinstance(row, dict):
                raise MeasureError(f"{path}:{number}: row is not a JSON object")
            yield number, row


def read_pairs(path: Path) -> list[dict]:
    """Every pair of the file, its fields checked: the contract's present, strings, `pair_id`
    unique; a study's own fields (a fold, a split) kept if they are plain values. Fields keep
    the file's order."""
    first_line: dict[str, int] = {}
    rows = []
    for line, row in _rows(path):
        missing = [name for name in contract.PAIR_ROW if name not in row]
        if missing:
            raise MeasureError(f"{path}:{line}: row lacks field(s): {', '.join(missing)}")
        for name, value in row.items():
            if name in contract.PAIR_ROW and not isinstance(value, str):
                raise MeasureError(f"{path}:{line}: field {name!r} must be a string, "
                                   f"not {type(value).__name__} ({value!r})")
            if not isinstance(value, (str, int, float, bool)) and value is not None:
                raise MeasureError(f"{path}:{line}: field {name!r} must be a plain value, not "
                                   f"{type(value).__name__}")
        if row["pair_id"] in first_line:
            raise MeasureError(f"{path}:{line}: pair_id {row['pair_id']!r} repeats the pair on "
                               f"line {first_line[row['pair_id']]}")
        first_line[row["pair_id"]] = line
        rows.append(row)
    return rows


def restrict(rows: list[dict], dimensions: list[str] | tuple[str, ...] | None, max_pairs: int | None,
             where: str | Path = "pairs") -> list[dict]:
    """The pairs restricted to `dimensions` and to at most `max_pairs` pairs per dimension, in
    order (`where` names the file in the error for an unknown dimension)."""
    known = list(dict.fromkeys(r["dimension"] for r in rows))
    if dimensions:
        unknown = [d for d in dimensions if d not in known]
        if unknown:
            raise MeasureError(f"--dimensions: {', '.join(unknown)} not in {where} "
                               f"(it has {', '.join(known)})")
        rows = [r for r in rows if r["dimension"] in dimensions]
    if max_pairs is not None:
        kept, seen = [], {}
        for r in rows:
            seen[r["dimension"]] = seen.get(r["dimension"], 0) + 1
            if seen[r["dimension"]] <= max_pairs:
                kept.append(r)
        rows = kept
    return rows
