"""The MiniLM study's pairs (issue 21): the seeds file, its rows and folds, and the cue checker that
keeps length and the other surface cues from solving a dimension."""
from __future__ import annotations

import json

import pytest

from measure.errors import MeasureError
from measure.studies.minilm import balance
from measure.studies.minilm import data as md


def test_pairs_file_is_current_and_folds_by_seed():
    assert md.PAIRS_FILE.read_text(encoding="utf-8") == md.pairs_text()
    rows = [json.loads(line) for line in md.PAIRS_FILE.read_text(encoding="utf-8").splitlines()]
    seeds = md.load_seeds()
    assert list(seeds) == list(md.DIMENSIONS) and all(len(v) >= md.MIN_SEEDS for v in seeds.values())
    assert len(rows) == 2 * sum(len(v) for v in seeds.values()) and len({r["pair_id"] for r in rows}) == len(rows)
    for d in md.DIMENSIONS:
        mine = [r for r in rows if r["dimension"] == d]
        fold_of = {}
        for r in mine:                       # both rows of a seed sit in the same fold
            assert fold_of.setdefault(r["seed_id"], r["fold"]) == r["fold"]
        assert sorted(fold_of.values()) == sorted(k % md.FOLDS for k in range(len(seeds[d])))
        for f in range(md.FOLDS):            # no fold owns a template: each is also seen in training
            held = {r["mutation"] for r in mine if r["fold"] == f and r["mutation"] != "seed"}
            trained = {r["mutation"] for r in mine if r["fold"] != f}
            assert held and held <= trained, (d, f)
    m0 = [r for r in rows if r["mutation"] == "seed"]
    m1 = [r for r in rows if r["mutation"] != "seed"]
    assert [(r["chosen"], r["rejected"]) for r in m0] == [(r["chosen"], r["rejected"]) for r in m1]
    assert all(b["prompt"] in a["prompt"] and a["prompt"] != b["prompt"] for a, b in zip(m1, m0))


def test_committed_seeds_are_balanced_on_every_cue():
    """The authoring rule of data/minilm/README.md, checked on the seeds as committed."""
    accuracies = balance.balance(md.load_seeds())
    assert balance.check(md.load_seeds()) == []
    assert set(accuracies) == set(md.DIMENSIONS)
    assert all(abs(v["length_chars"] - 0.5) <= 0.10 for v in accuracies.values())


def _seeds(pairs, dimension="helpfulness"):
    return {dimension: [{"prompt": p, "chosen": c, "rejected": r} for p, c, r in pairs]}


def test_checker_fails_a_dimension_that_a_cue_solves():
    """The first study's flaw, planted: the chosen response is the longer one in every pair."""
    longer = _seeds([("How do I fix it?", "Tighten the bolt, then check the chain tension again.", "Ask someone.")] * 6
                    + [("Why?", "Because the sun heats the land faster than the sea.", "Heat.")] * 4)
    problems = balance.check(longer)
    assert any(p.startswith("helpfulness: length_chars rule accuracy 1.000") for p in problems)
    assert any("length_words" in p for p in problems)
    hedged = _seeds([("Is it safe?", "It might be fine, probably, if you are careful.", "It is fine.")] * 5
                    + [("Is it safe?", "Maybe.", "It is fine to use it today, yes.")] * 5)
    assert [p.split(":")[1].split()[0] for p in balance.check(hedged)] == ["hedges"]
    listed = _seeds([("Steps?", "1. Open it.\n2. Close it.", "Open it and close it, then go.")] * 10)
    assert any("format_markers" in p for p in balance.check(listed))
    echo = _seeds([("Which bike chain oil?", "Use a dry bike chain oil.", "Any light lubricant works well.")] * 10)
    assert any("prompt_overlap" in p for p in balance.check(echo))


def test_cue_values():
    assert balance.prompt_overlap("the chain is worn", "Why is my bike chain worn out?") == pytest.approx(2 / 3)
    assert balance.format_markers("Do this:\n1. Open\n2. Close\n- and `x`") == 3 + 2
    assert balance.format_markers("def f(x):\n    return x") == 2
    assert balance.hedges("I think it might probably work, maybe.") == 4


@pytest.mark.parametrize("text, where, message", [
    ("safety:\n  - {id: safety-01, prompt: a, chosen: b, rejected: c}\n", ":1", "dimensions must be, in order"),
    (None, ":3", "helpfulness has 1 seeds"),
    (None, ":4", "seed id 'helpfulness-02' should be 'helpfulness-01'"),
    (None, ":4", "chosen and rejected are the same text"),
    (None, ":4", "exactly the fields"),
    (None, ":6", "'prompt' given twice"),
])
def test_bad_seeds_are_refused_naming_file_and_line(tmp_path, text, where, message):
    header = "# seeds\n\nhelpfulness:\n"
    good = "".join(f"  - {{id: helpfulness-{k + 1:02d}, prompt: p{k}, chosen: c{k}, rejected: r{k}}}\n"
                   for k in range(md.MIN_SEEDS))
    rest = "".join(f"{d}:\n" + good.replace("helpfulness", d) for d in md.DIMENSIONS[1:])
    if text is None:
        first = {
            "helpfulness has 1 seeds": "  - {id: helpfulness-01, prompt: a, chosen: b, rejected: c}\n",
            "seed id 'helpfulness-02' should be 'helpfulness-01'": "  - {id: helpfulness-02, prompt: a, chosen: b, rejected: c}\n" + good.split("\n", 1)[1],
            "chosen and rejected are the same text": "  - {id: helpfulness-01, prompt: a, chosen: b, rejected: b}\n" + good.split("\n", 1)[1],
            "exactly the fields": "  - {id: helpfulness-01, prompt: a, chosen: b}\n" + good.split("\n", 1)[1],
            "'prompt' given twice": "  - id: helpfulness-01\n    prompt: a\n    prompt: b\n    chosen: c\n    rejected: d\n" + good.split("\n", 1)[1],
        }[message]
        text = header + first + rest
    path = tmp_path / "seeds.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(MeasureError) as err:
        md.load_seeds(path)
    assert f"seeds.yaml{where}:" in str(err.value) and message in str(err.value)
