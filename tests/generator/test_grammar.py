import pytest

from site_src.refgrammar import RefSyntaxError, parse_ref


def test_sources():
    assert parse_ref("golden.json:9").line == 9
    ref = parse_ref("golden.json#per_dimension_rho/helpfulness")
    assert ref.key == ("per_dimension_rho", "helpfulness") and ref.line is None
    ref = parse_ref("golden.json:9#E04/x/0")
    assert (ref.line, ref.key) == (9, ("E04", "x", 0))
    assert parse_ref("sub/rows.jsonl | count").file == "sub/rows.jsonl"


def test_stages():
    ref = parse_ref('rows.jsonl | where margin<0 | where dimension == "code correctness" | group layer | mean effect | fmt +.3f minus')
    assert [c.op for c in ref.where] == ["<", "=="]
    assert ref.where[0].value == 0 and ref.where[1].value == "code correctness"
    assert ref.group == "layer" and ref.aggregate.name == "mean" and ref.aggregate.field == "effect"
    assert (ref.spec, ref.minus) == ("+.3f", True)
    ref = parse_ref("rows.jsonl | count mode == mean")
    assert ref.aggregate.condition.value == "mean"
    ref = parse_ref("rows.jsonl | count ok == true")
    assert ref.aggregate.condition.value is True
    assert parse_ref("g.json:3 | fmt minus").minus and parse_ref("g.json:3 | fmt minus").spec == ""


@pytest.mark.parametrize("text, fragment", [
    ("", "empty reference"),
    ("golden.json:x", "is not a source"),
    ("golden.json:0", "start at 1"),
    ("rows.jsonl | frobnicate x", "unknown stage"),
    ("rows.jsonl | where margin ~ 0", "expected FIELD OP VALUE"),
    ("rows.jsonl | group dimension", "needs an aggregate"),
    ("rows.jsonl | count | mean x", "only fmt may follow"),
    ("rows.jsonl | fmt .2f | count", "fmt must be the last"),
    ("g.json:3 | fmt .2q", "bad format spec"),
    ("rows.jsonl | mean", "expected `mean FIELD`"),
    ("g.json#a//b", "empty segment"),
    ("rows.jsonl | group a | where b == 1 | count", "where must come before group"),
])
def test_syntax_errors(text, fragment):
    with pytest.raises(RefSyntaxError, match=fragment):
        parse_ref(text)
