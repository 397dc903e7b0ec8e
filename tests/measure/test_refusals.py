"""Bad input is refused before any measurement: one line on stderr naming the file and line (or
the option), exit status 2, and no bundle written."""
from __future__ import annotations

import json

import pytest

from measure.__main__ import main

GOOD = {"dimension": "topic", "pair_id": "p1", "seed_id": "s1", "prompt": "tell me about the rain",
        "chosen": "the rain", "rejected": "the bread"}


def _pairs(tmp_path, rows):
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _refused(capsys, tiny_dir, tmp_path, *extra):
    code = main(["run", "--model", str(tiny_dir), "--out", str(tmp_path / "bundle"),
                 "--runs-dir", str(tmp_path / "runs"), "--no-progress", *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert not (tmp_path / "bundle").exists()
    return err


def test_a_duplicate_pair_id_is_refused_naming_both_lines(capsys, tiny_dir, tmp_path):
    other = dict(GOOD, seed_id="s2", chosen="the rain rain")
    path = _pairs(tmp_path, [GOOD, dict(GOOD, pair_id="p2"), other])
    err = _refused(capsys, tiny_dir, tmp_path, "--pairs", str(path))
    assert f"{path}:3: pair_id 'p1' repeats the pair on line 1" in err


@pytest.mark.parametrize("field,value", [("chosen", 42), ("prompt", None), ("pair_id", 7),
                                         ("rejected", ["the", "bread"])])
def test_a_field_of_the_wrong_type_is_refused(capsys, tiny_dir, tmp_path, field, value):
    path = _pairs(tmp_path, [GOOD, {**GOOD, "pair_id": "p2", field: value}])
    err = _refused(capsys, tiny_dir, tmp_path, "--pairs", str(path))
    assert f"{path}:2: field {field!r} must be a string" in err


def test_a_missing_field_and_broken_json_name_their_line(capsys, tiny_dir, tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + '{"dimension": "topic"\n', encoding="utf-8")
    assert f"{path}:3: not valid JSON" in _refused(capsys, tiny_dir, tmp_path, "--pairs", str(path))
    lacking = {k: v for k, v in GOOD.items() if k != "seed_id"}
    path = _pairs(tmp_path, [GOOD, lacking])
    assert f"{path}:2: row lacks field(s): seed_id" in _refused(capsys, tiny_dir, tmp_path, "--pairs", str(path))


@pytest.mark.parametrize("option,value", [("--max-rows", "0"), ("--max-rows", "-3"),
                                          ("--shard-size", "0"), ("--max-pairs", "0"),
                                          ("--threads", "0")])
def test_counts_below_one_are_refused(capsys, tiny_dir, tiny_pairs, tmp_path, option, value):
    err = _refused(capsys, tiny_dir, tmp_path, "--pairs", str(tiny_pairs), option, value)
    assert f"{option} {value}: must be a whole number of at least 1" in err
