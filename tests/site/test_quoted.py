"""The project's fixture of figures quoted from reward-lens agrees with the file it cites.

The reference file lives outside the repository (../shared/reference/), so the checks against it
skip when it is absent; the fixture's own shape is checked always.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
QUOTED = REPO / "quoted" / "reward-lens-e04.json"
REFERENCE = REPO.parent / "shared" / "reference" / "reward-lens-golden.json"


@pytest.fixture(scope="module")
def quoted() -> dict:
    return json.loads(QUOTED.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def reference() -> tuple[dict, list[str]]:
    if not REFERENCE.is_file():
        pytest.skip(f"{REFERENCE} is not present (it lives outside the repository)")
    text = REFERENCE.read_text(encoding="utf-8")
    return json.loads(text), text.splitlines()


def _key_on_line(lines: list[str], number: int) -> str:
    """The JSON key that opens 1-based line `number`."""
    stripped = lines[number - 1].strip()
    assert stripped.startswith('"'), f"line {number} holds no key: {stripped!r}"
    return stripped[1:].split('"', 1)[0]


def test_fixture_is_labelled_and_cited(quoted):
    assert "published elsewhere" in quoted["label"].lower()
    assert "not reproduced here" in quoted["label"].lower()
    citation = quoted["citation"]
    assert citation["project"] == "reward-lens"
    assert citation["license"] == "MIT"
    assert citation["block"] == "E04"
    assert set(citation["mean_rho_lines"]) == set(quoted["models"])
    assert set(citation["per_dimension_rho_lines"]) == set(quoted["models"])


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


def test_quoted_values_match_reference(quoted, reference):
    data, _ = reference
    block = data[quoted["citation"]["block"]]
    assert data["source"] == quoted["citation"]["source_run"]
    assert quoted["tolerance"] == block["tolerance"]
    for model in quoted["models"]:
        assert quoted["mean_rho"][model] == block["per_model_mean_rho"][model], model
        assert quoted["per_dimension_rho"][model] == block["per_model_dimension_rho"][model], model
    # nothing of the block is left out
    assert set(quoted["models"]) == set(block["per_model_mean_rho"])


def test_cited_lines_hold_the_cited_keys(quoted, reference):
    data, lines = reference
    citation = quoted["citation"]
    assert _key_on_line(lines, citation["block_line"]) == citation["block"]
    assert _key_on_line(lines, citation["per_model_mean_rho_line"]) == "per_model_mean_rho"
    assert _key_on_line(lines, citation["per_model_dimension_rho_line"]) == "per_model_dimension_rho"
    assert _key_on_line(lines, citation["tolerance_line"]) == "tolerance"
    for model in quoted["models"]:
        number = citation["mean_rho_lines"][model]
        assert _key_on_line(lines, number) == model
        value = json.loads(lines[number - 1].split(":", 1)[1].strip().rstrip(","))
        assert value == quoted["mean_rho"][model]
        number = citation["per_dimension_rho_lines"][model]
        assert _key_on_line(lines, number) == model
        assert lines[number - 1].rstrip().endswith("{")
        # the block opened there holds exactly the quoted dimensions, in the lines that follow
        following = lines[number: number + quoted["dimensions"]]
        block = json.loads("{" + ",".join(line.strip().rstrip(",") for line in following) + "}")
        assert block == quoted["per_dimension_rho"][model]
        assert lines[number + quoted["dimensions"]].strip().startswith("}")
    # the lines the seed study page cites: line 9 (Skywork v0.2 mean), 6 (ArmoRM), 54 (per dimension)
    assert citation["mean_rho_lines"]["Skywork-Reward-Llama-3.1-8B-v0.2"] == 9
    assert citation["mean_rho_lines"]["ArmoRM-Llama3-8B-v0.1"] == 6
    assert citation["per_dimension_rho_lines"]["Skywork-Reward-Llama-3.1-8B-v0.2"] == 54
