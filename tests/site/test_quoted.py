"""The project's fixture of figures quoted from reward-lens, checked with what the repository holds.

The file it quotes is another project's and is never committed. The fixture records, for each
value, the source line it was read from and that line's text, so these tests check every quoted
value against its recorded line, and every mean against its dimensions, with nothing from
outside the repository. `build.py verify-quoted PATH` checks the fixture against a copy of the
source file itself; its test below runs it on a copy laid out from the fixture's own records.
"""
from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from site_src.quoted import check_fixture, verify_against

REPO = Path(__file__).resolve().parents[2]
QUOTED = REPO / "quoted" / "reward-lens-e04.json"


@pytest.fixture(scope="module")
def quoted() -> dict:
    return json.loads(QUOTED.read_text(encoding="utf-8"))


def test_fixture_is_labelled_and_cited(quoted):
    assert "published elsewhere" in quoted["label"].lower()
    assert "not reproduced here" in quoted["label"].lower()
    citation = quoted["citation"]
    assert citation["project"] == "reward-lens"
    assert citation["license"] == "MIT"
    assert citation["block"] == "E04"
    assert set(citation["mean_rho_lines"]) == set(quoted["models"])
    assert set(citation["per_dimension_rho_lines"]) == set(quoted["models"])
    assert not any(".." in str(v) for v in citation.values()), "the fixture points outside the repository"


def test_fixture_is_one_value_a_line(quoted):
    """Pages cite it by line, so it must stay in the small, stable shape the generator reads."""
    text = QUOTED.read_text(encoding="utf-8")
    assert text.endswith("\n") and "\r" not in text
    assert json.dumps(quoted, indent=2) + "\n" == text
    assert set(quoted["mean_rho"]) == set(quoted["models"]) == set(quoted["per_dimension_rho"])
    for model in quoted["models"]:
        dims = quoted["per_dimension_rho"][model]
        assert len(dims) == quoted["dimensions"]
        assert all(-1.0 <= rho <= 1.0 and math.isfinite(rho) for rho in dims.values())


def test_every_quoted_value_is_the_value_on_its_recorded_source_line(quoted):
    assert check_fixture(quoted) == []
    # every value is covered: one line per mean, the dimensions of each block, the tolerance
    recorded = quoted["citation"]["source_lines"]
    assert len(recorded) >= len(quoted["models"]) * (quoted["dimensions"] + 3) + 4


def test_each_mean_is_the_mean_of_its_dimensions(quoted):
    for model in quoted["models"]:
        dims = quoted["per_dimension_rho"][model]
        assert abs(math.fsum(dims.values()) / len(dims) - quoted["mean_rho"][model]) <= 0.5e-6, model


def test_the_lines_the_seed_page_cites(quoted):
    # line 9 (Skywork v0.2 mean), 6 (ArmoRM mean), 54 onward (Skywork v0.2 per dimension)
    citation = quoted["citation"]
    assert citation["mean_rho_lines"]["Skywork-Reward-Llama-3.1-8B-v0.2"] == 9
    assert citation["mean_rho_lines"]["ArmoRM-Llama3-8B-v0.1"] == 6
    assert citation["per_dimension_rho_lines"]["Skywork-Reward-Llama-3.1-8B-v0.2"] == 54
    assert citation["source_lines"]["9"] == '"Skywork-Reward-Llama-3.1-8B-v0.2": -0.170885'


def test_the_check_names_the_line_of_a_value_that_disagrees(quoted):
    model = "ArmoRM-Llama3-8B-v0.1"
    changed = copy.deepcopy(quoted)
    changed["per_dimension_rho"][model]["safety"] = 0.5
    problems = check_fixture(changed)
    line = next(n for n, t in changed["citation"]["source_lines"].items() if t.startswith('"safety"')
                and changed["citation"]["per_dimension_rho_lines"][model] < int(n)
                <= changed["citation"]["per_dimension_rho_lines"][model] + 12)
    assert any(f"reward-lens-golden.json:{line} holds 0.132194 for {model}/safety" in p for p in problems), problems
    assert any(f"the mean of {model}'s 12 dimensions" in p for p in problems), problems
    shifted = copy.deepcopy(quoted)
    shifted["citation"]["mean_rho_lines"][model] = 7
    assert any(":7 holds the key 'Skywork-Reward-Gemma-2-27B-v0.2'" in p for p in check_fixture(shifted))


def _copy_of_source(quoted: dict) -> str:
    """A source file laid out as the fixture records it: blocks and dimensions in line order."""
    citation = quoted["citation"]
    lines = citation["source_lines"]

    def dims_in_line_order(model):
        opener = citation["per_dimension_rho_lines"][model]
        keys = [lines[str(n)].split('"')[1] for n in range(opener + 1, opener + 1 + quoted["dimensions"])]
        return {k: quoted["per_dimension_rho"][model][k] for k in keys}

    by_mean = sorted(quoted["models"], key=lambda m: citation["mean_rho_lines"][m])
    by_block = sorted(quoted["models"], key=lambda m: citation["per_dimension_rho_lines"][m])
    data = {"source": citation["source_run"], "note": "a copy laid out for the test",
            citation["block"]: {"per_model_mean_rho": {m: quoted["mean_rho"][m] for m in by_mean},
                                "per_model_dimension_rho": {m: dims_in_line_order(m) for m in by_block},
                                "tolerance": quoted["tolerance"], "faithful_to": "the test"}}
    return json.dumps(data, indent=2) + "\n"


def _verify(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "build.py"), "verify-quoted", str(path)],
                          capture_output=True, text=True, timeout=60)


def test_verify_quoted_command_accepts_an_agreeing_copy_and_names_the_line_that_differs(quoted, tmp_path):
    source = tmp_path / "reward-lens-golden.json"
    text = _copy_of_source(quoted)
    source.write_text(text)
    assert verify_against(quoted, source) == []
    ok = _verify(source)
    assert ok.returncode == 0 and "verify-quoted ok" in ok.stdout, ok.stdout + ok.stderr

    source.write_text(text.replace('"Skywork-Reward-Llama-3.1-8B-v0.2": -0.170885', '"Skywork-Reward-Llama-3.1-8B-v0.2": -0.17'))
    bad = _verify(source)
    assert bad.returncode == 1
    assert f"{source}:9: the fixture records" in bad.stderr
    assert "mean rho of Skywork-Reward-Llama-3.1-8B-v0.2 is -0.17" in bad.stderr
    # a model of the block the fixture does not quote is reported as left out
    data = json.loads(text)
    data["E04"]["per_model_mean_rho"]["Another-RM"] = 0.1
    source.write_text(json.dumps(data, indent=2) + "\n")
    assert "leaves out: Another-RM" in _verify(source).stderr


# ---------------------------------------------------------------- what verify-quoted will read (issue 28, item 9)

def _refused(path, *extra) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, str(REPO / "build.py"), "verify-quoted", str(path), *extra],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("build.py verify-quoted: error: "), done.stderr
    return done


@pytest.mark.parametrize("what", ["/dev/zero", "pipe", "folder"])
def test_verify_quoted_refuses_what_is_not_a_regular_file_at_once(tmp_path, what):
    """Issue 28, item 9: /dev/zero was read without bound (7 GB in 18 s); a named pipe hung it."""
    import os
    path = {"/dev/zero": Path("/dev/zero"), "pipe": tmp_path / "pipe", "folder": tmp_path}[what]
    if what == "pipe":
        os.mkfifo(path)
    done = _refused(path)
    assert f"{path}: is not a regular file" in done.stderr
    assert f"{path}: is not a regular file" in _refused(QUOTED, "--fixture", str(path)).stderr   # the fixture too


def test_verify_quoted_bounds_every_read(tmp_path):
    big = tmp_path / "big.json"
    with big.open("wb") as handle:
        handle.truncate(17 * 2**20)            # sparse: nothing is written
    assert "is 17,825,792 bytes; a JSON file is read up to 16 MiB" in _refused(big).stderr
    assert "cannot be read: No such file or directory" in _refused(tmp_path / "missing.json").stderr
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    assert "nested too deeply to read" in _refused(deep).stderr
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff{}")
    assert "is not UTF-8 text (byte 0)" in _refused(bad).stderr
    # a fixture of another shape is one line too, never a traceback
    other = tmp_path / "other.json"
    other.write_text('{"citation": {}}')
    assert "is not a fixture of quoted figures" in _refused(QUOTED, "--fixture", str(other)).stderr
