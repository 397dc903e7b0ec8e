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


def test_an_aggregate_is_computed_once_per_build_and_so_is_its_refusal(tmp_path, monkeypatch):
    """Pages of one build asking the same aggregate share one pass over the rows (the resolvers
    share the build's FixtureCache); a refused aggregate is refused for every page that asks."""
    import pytest

    from site_src.errors import FixtureProblem
    from site_src.resolve import Resolver

    root = tmp_path / "repo"
    root.mkdir()
    (root / "rows.jsonl").write_text("".join(json.dumps({"i": i, "x": "text" if i == 2 else i}) + "\n"
                                             for i in range(5)))
    import subprocess
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "rows.jsonl"], check=True)
    passes = []
    plain_iter = Rows.__iter__
    monkeypatch.setattr(Rows, "__iter__", lambda self: (passes.append(1), plain_iter(self))[1])
    cache = fixtures.FixtureCache()
    first, second = Resolver(root, None, cache), Resolver(root, None, cache)
    assert first.resolve("rows.jsonl | mean i").value == 2
    assert second.resolve("rows.jsonl | mean i | fmt .2f").value == 2
    assert len(passes) == 1
    assert second.resolve("rows.jsonl | where i > 0 | mean i").value == 2.5 and len(passes) == 2
    assert Resolver(root, None, fixtures.FixtureCache()).resolve("rows.jsonl | mean i").value == 2 and len(passes) == 3
    with pytest.raises(FixtureProblem, match="is not a number") as one:
        first.resolve("rows.jsonl | where i < 3 | mean x")
    with pytest.raises(FixtureProblem, match="is not a number") as two:
        second.resolve("rows.jsonl | where i < 3 | mean x")
    assert one.value.fixture == two.value.fixture


def test_an_aggregate_is_kept_between_builds_by_the_files_sha256(tmp_path, monkeypatch):
    """A build's aggregates are kept in .cache/aggregates/ (fixtures.KeptAggregates): the next build
    of the same bytes reads them without a pass over the rows, with the same value and type; an
    edit of the file computes them again. A refusal is never kept, nor a value JSON would change."""
    import subprocess

    import pytest

    from site_src.errors import FixtureProblem
    from site_src.resolve import Resolver

    root = tmp_path / "repo"
    root.mkdir()
    path = root / "rows.jsonl"
    path.write_text("".join(json.dumps({"i": i, "g": i % 2, "x": "text" if i == 2 else i}) + "\n" for i in range(5)))
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "rows.jsonl"], check=True)
    passes = []
    plain_iter = Rows.__iter__
    monkeypatch.setattr(Rows, "__iter__", lambda self: (passes.append(1), plain_iter(self))[1])

    def build(*refs):
        cache = fixtures.FixtureCache(root)
        resolver = Resolver(root, None, cache)
        try:
            return [resolver.resolve(ref).value for ref in refs]
        finally:
            cache.save()

    refs = ("rows.jsonl | mean i", "rows.jsonl | sum i", "rows.jsonl | group g | count")
    first = build(*refs)
    assert first == [2, 10, {"0": 3, "1": 2}] and len(passes) == 3
    again = build(*refs)
    assert again == first and [type(v) for v in again] == [type(v) for v in first] and len(passes) == 3
    for _ in range(2):   # refused each time, never kept
        with pytest.raises(FixtureProblem):
            build("rows.jsonl | mean x")
    assert len(passes) == 5
    path.write_text(path.read_text() + json.dumps({"i": 5, "g": 1, "x": 5}) + "\n")
    assert build("rows.jsonl | sum i") == [15] and len(passes) == 6
    assert len(list((root / fixtures.KEPT_AGGREGATES).glob("*.json"))) == 2
