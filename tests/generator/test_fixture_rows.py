"""JSONL fixtures: small files are parsed once per build and shared safely; large ones stream."""
from __future__ import annotations

import json

from site_src import fixtures
from site_src.fixtures import Rows


def _write(path, n):
    path.write_text("".join(json.dumps({"i": i, "tags": ["a"]}) + "\n" for i in range(n)))


def test_small_file_is_parsed_once_and_readers_cannot_change_it(tmp_path):
    path = tmp_path / "rows.jsonl"
    _write(path, 5)
    rows = Rows(path, "rows.jsonl")
    first = list(rows)
    first[0]["i"] = 99  # a careless reader
    path.write_text("not json\n")  # a second parse would fail on this
    again = list(rows)
    assert [r["i"] for r in again] == [0, 1, 2, 3, 4]
    assert [r["_line"] for r in again] == [1, 2, 3, 4, 5]


def test_large_file_streams_every_time(tmp_path, monkeypatch):
    monkeypatch.setattr(fixtures, "KEEP_BYTES", 10)
    path = tmp_path / "rows.jsonl"
    _write(path, 5)
    rows = Rows(path, "rows.jsonl")
    assert len(list(rows)) == 5
    _write(path, 3)  # nothing kept: the next pass reads the file again
    assert len(list(rows)) == 3
