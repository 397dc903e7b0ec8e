"""Deterministic file writing: fixed float precision, stable key order, atomic replacement."""
from __future__ import annotations

import json
import math
from pathlib import Path

from bundle_kit import contract
from safe_io import sha256_file  # noqa: F401  (measure.runner.jsonio.sha256_file, as before)

from measure.errors import MeasureError


def fixed(value, places: int):
    """Round floats (recursively) to `places` decimals; -0.0 becomes 0.0; NaN is an error."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise MeasureError(f"refusing to write a non-finite number ({value})")
        out = round(value, places)
        return 0.0 if out == 0 else out
    if isinstance(value, dict):
        return {k: fixed(v, places) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [fixed(v, places) for v in value]
    raise TypeError(f"cannot write {type(value).__name__}")


def jsonl_text(rows: list[dict], places: int = contract.JSONL_PLACES) -> str:
    """Rows as JSONL text: one object a line, floats fixed to `places` decimals."""
    return "".join(json.dumps(fixed(r, places), ensure_ascii=False) + "\n" for r in rows)


def json_text(obj, places: int = contract.GOLDEN_PLACES) -> str:
    """An object as indented JSON text, floats fixed to `places` decimals."""
    return json.dumps(fixed(obj, places), indent=2, ensure_ascii=False) + "\n"


JSON_LIMIT = 64 << 20  # bytes of a JSON input file (a key, a config, a report, a manifest)


def read_json(path: Path, what: str, limit: int = JSON_LIMIT):
    """A JSON input file, parsed with bounds: at most `limit` bytes, UTF-8, nesting that the
    parser can take; every failure one line naming the file (and the line where JSON says)."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise MeasureError(f"{path}: cannot read the {what} ({exc.strerror})") from None
    if len(raw) > limit:
        raise MeasureError(f"{path}: the {what} is over {limit >> 20} MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise MeasureError(f"{path}:{line}: the {what} is not UTF-8 text") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise MeasureError(f"{path}:{exc.lineno}: the {what} is not valid JSON ({exc.msg})") from None
    except ValueError as exc:
        raise MeasureError(f"{path}: the {what} is not valid JSON ({exc})") from None
    except RecursionError:
        raise MeasureError(f"{path}: the {what} is nested too deeply") from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number")


def read_jsonl(path: Path) -> list[dict]:
    """The rows of a JSONL file (its own, read back), without their line numbers."""
    from bundle_kit import rankstats
    try:
        rows = rankstats.read_jsonl(path)
    except rankstats.FixtureError as exc:
        raise MeasureError(str(exc)) from None
    for row in rows:
        row.pop("_line", None)
    return rows
