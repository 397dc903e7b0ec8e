"""Checks of a fixture of quoted figures (quoted/*.json): figures another project published, which
this site quotes without reproducing them.

Two checks, kept apart on purpose:

- `check_fixture(quoted)` needs nothing but the repository. The fixture records, for every value
  it quotes, the line of the source file it was read from and that line's text
  (`citation.source_lines`); each quoted value must be the value on its recorded line, every
  cited line must hold the cited key, and each model's mean must be the mean of its dimensions
  (to the source's six decimals). The test suite runs this.
- `verify_against(quoted, path)` compares the fixture with a copy of the source file itself
  (`build.py verify-quoted PATH`): every recorded line must be that file's line, and the quoted
  block must equal the file's block, with nothing left out. The source file is never committed.

Both files are read as the rest of the build reads its inputs: only a regular file (never a
device, a pipe or a folder, which could be read for ever or block), at most `parse.MAX_BYTES`,
UTF-8 JSON within the parser's bounds. A file that cannot be read so is a `BuildError` naming it.
"""
from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

from .errors import BuildError
from .parse import MAX_BYTES, ParseProblem, json_value

ROUNDING = 0.5e-6  # the source rounds to six decimals, so a mean of rounded values may differ by this


def read_text(path: Path) -> str:
    """The UTF-8 text of the regular file `path`, read with a bound. Raises BuildError (one line,
    naming the file) for a file that is missing, not a regular file, too large or not UTF-8."""
    where = str(path)
    try:   # O_NONBLOCK: opening a named pipe must not wait for a writer
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise BuildError(f"cannot be read: {exc.strerror or exc}", where) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BuildError("is not a regular file (a device, a pipe or a folder): give a copy of the file itself",
                             where)
        if info.st_size > MAX_BYTES:
            raise BuildError(f"is {info.st_size:,} bytes; a JSON file is read up to {MAX_BYTES // 2**20} MiB", where)
        chunks, size = [], 0
        while size <= MAX_BYTES:   # st_size can be 0 for a file that still yields bytes (/proc)
            chunk = os.read(fd, min(1 << 20, MAX_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_BYTES:
            raise BuildError(f"holds more than {MAX_BYTES // 2**20} MiB; a JSON file is read up to that", where)
    except OSError as exc:
        raise BuildError(f"cannot be read: {exc.strerror or exc}", where) from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BuildError(f"is not UTF-8 text (byte {exc.start})", where) from None


def parse_json(text: str, where: str):
    """The JSON value of `text` (read from `where`), within the parser's bounds; raises BuildError."""
    try:
        return json_value(text)
    except ParseProblem as exc:
        raise BuildError(exc.message, f"{where}:{exc.line}" if exc.line else where) from None


def load(path: Path) -> dict:
    """A quoted fixture's JSON (a mapping). Raises BuildError when it cannot be read as one."""
    data = parse_json(read_text(path), str(path))
    if not isinstance(data, dict) or not isinstance(data.get("citation"), dict):
        raise BuildError("is not a fixture of quoted figures (a JSON object with a citation)", str(path))
    return data


def _key_value(text: str) -> tuple[str, str]:
    """('key', 'rest') of a JSON object line such as `"safety": -0.289653,`."""
    text = text.strip()
    if not text.startswith('"') or '":' not in text:
        raise ValueError(f"holds no key: {text!r}")
    key, rest = text[1:].split('":', 1)
    return key, rest.strip().rstrip(",").strip()


def _value(text: str):
    return json.loads(_key_value(text)[1])


def check_fixture(quoted: dict, name: str = "quoted fixture") -> list[str]:
    """Problems of a quoted fixture judged by what it holds; [] when every value agrees with the
    source line it records and every mean with its dimensions."""
    problems: list[str] = []
    citation = quoted["citation"]
    lines = citation.get("source_lines") or {}
    source = citation.get("file", "the source file")

    def line(number: int) -> str | None:
        text = lines.get(str(number))
        if text is None:
            problems.append(f"{name}: citation.source_lines does not record line {number} of {source}")
        return text

    def expect_key(number: int, key: str, opens: bool = False) -> None:
        text = line(number)
        if text is None:
            return
        try:
            found, rest = _key_value(text)
        except ValueError as exc:
            problems.append(f"{source}:{number} {exc}, expected the key {key!r}")
            return
        if found != key:
            problems.append(f"{source}:{number} holds the key {found!r}, not {key!r}")
        elif opens and rest != "{":
            problems.append(f"{source}:{number} does not open a block: {text!r}")

    expect_key(citation["block_line"], citation["block"], opens=True)
    expect_key(citation["per_model_mean_rho_line"], "per_model_mean_rho", opens=True)
    expect_key(citation["per_model_dimension_rho_line"], "per_model_dimension_rho", opens=True)
    expect_key(citation["tolerance_line"], "tolerance")
    text = line(citation["tolerance_line"])
    if text is not None and _value(text) != quoted["tolerance"]:
        problems.append(f"{source}:{citation['tolerance_line']} holds tolerance {_value(text)}, "
                        f"the fixture quotes {quoted['tolerance']}")
    for model in quoted["models"]:
        number = citation["mean_rho_lines"][model]
        expect_key(number, model)
        text = line(number)
        if text is not None and _value(text) != quoted["mean_rho"][model]:
            problems.append(f"{source}:{number} holds {_value(text)} for {model}, "
                            f"the fixture quotes {quoted['mean_rho'][model]}")
        opener = citation["per_dimension_rho_lines"][model]
        expect_key(opener, model, opens=True)
        dims = quoted["per_dimension_rho"][model]
        if len(dims) != quoted["dimensions"]:
            problems.append(f"{name}: {model} has {len(dims)} dimensions, the fixture says {quoted['dimensions']}")
        seen = {}
        for number in range(opener + 1, opener + 1 + quoted["dimensions"]):
            text = line(number)
            if text is None:
                continue
            try:
                key, _ = _key_value(text)
            except ValueError as exc:
                problems.append(f"{source}:{number} {exc} (inside the block of {model})")
                continue
            seen[key] = _value(text)
            if key not in dims:
                problems.append(f"{source}:{number}: dimension {key!r} of {model} is not quoted")
            elif seen[key] != dims[key]:
                problems.append(f"{source}:{number} holds {seen[key]} for {model}/{key}, the fixture quotes {dims[key]}")
        closing = line(opener + 1 + quoted["dimensions"])
        if closing is not None and not closing.startswith("}"):
            problems.append(f"{source}:{opener + 1 + quoted['dimensions']}: the block of {model} does not close "
                            f"after {quoted['dimensions']} dimensions")
        for key in sorted(set(dims) - set(seen)):
            problems.append(f"{name}: {model}/{key} is quoted but on no recorded line of its block")
        if dims:
            mean = math.fsum(dims.values()) / len(dims)
            if abs(mean - quoted["mean_rho"][model]) > ROUNDING + 1e-12:
                problems.append(f"{name}: the mean of {model}'s {len(dims)} dimensions is {mean:.7f}, "
                                f"the quoted mean is {quoted['mean_rho'][model]}")
    return problems


def verify_against(quoted: dict, source_path: Path) -> list[str]:
    """Problems of the fixture against a copy of the source file; [] when they agree. Raises
    BuildError when the copy cannot be read as JSON (read_text)."""
    source_path = Path(source_path)
    problems: list[str] = []
    text = read_text(source_path)
    data = parse_json(text, str(source_path))
    if not isinstance(data, dict):
        return [f"{source_path}: holds a JSON {type(data).__name__}, not the object the fixture quotes"]
    file_lines = text.splitlines()
    citation = quoted["citation"]
    for number, recorded in sorted(citation.get("source_lines", {}).items(), key=lambda kv: int(kv[0])):
        n = int(number)
        actual = file_lines[n - 1].strip() if n <= len(file_lines) else None
        if actual != recorded:
            problems.append(f"{source_path}:{n}: the fixture records {recorded!r}, the file holds {actual!r}")
    if data.get("source") != citation["source_run"]:
        problems.append(f"{source_path}: run {data.get('source')!r}, the fixture cites {citation['source_run']!r}")
    block = data.get(citation["block"])
    if not isinstance(block, dict):
        return problems + [f"{source_path}: no block {citation['block']!r}"]
    if block.get("tolerance") != quoted["tolerance"]:
        problems.append(f"{source_path}: tolerance {block.get('tolerance')}, the fixture quotes {quoted['tolerance']}")
    means, per_dim = block.get("per_model_mean_rho"), block.get("per_model_dimension_rho")
    if not isinstance(means, dict) or not isinstance(per_dim, dict):
        return problems + [f"{source_path}: block {citation['block']!r} lacks per_model_mean_rho or "
                           "per_model_dimension_rho (each a JSON object)"]
    left_out = sorted(set(means) - set(quoted["models"]))
    if left_out:
        problems.append(f"{source_path}: models of the block the fixture leaves out: {', '.join(left_out)}")
    for model in quoted["models"]:
        if means.get(model) != quoted["mean_rho"][model]:
            problems.append(f"{source_path}: mean rho of {model} is {means.get(model)}, "
                            f"the fixture quotes {quoted['mean_rho'][model]}")
        if per_dim.get(model) != quoted["per_dimension_rho"][model]:
            problems.append(f"{source_path}: the per-dimension rhos of {model} differ from the fixture's")
    return problems + check_fixture(quoted)

