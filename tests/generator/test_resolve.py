"""Every reference kind and format, resolved against the hand-made fixture repository."""
import pytest

from site_src.errors import FixtureProblem
from site_src.resolve import Resolver

from generator_helpers import FIXTURE, commit_all


@pytest.fixture
def resolver():
    return Resolver(FIXTURE)


def test_json_line(resolver):
    r = resolver.resolve("data/golden.json:5")
    assert (r.value, r.source, r.line, r.href) == (-0.170885, "data/golden.json", 5, "source/data/golden.json.html#L5")
    assert r.receipt == "Recorded at data/golden.json:5"


def test_key_path_finds_its_line(resolver):
    r = resolver.resolve("data/golden.json#counts/pairs")
    assert (r.value, r.line) == (6, 7)


def test_line_and_key(resolver):
    assert resolver.resolve("data/golden.json:11#per_dimension_rho/helpfulness").value == -0.305981


def test_list_index_and_yaml(resolver):
    assert resolver.resolve("data/golden.json#list/1").line == 21
    r = resolver.resolve("data/config.yaml#run/learning_rate")
    assert (r.value, r.line) == (0.003, 4)
    assert resolver.resolve("data/config.yaml:6").value == 0.25   # a YAML list item


def test_block(resolver):
    r = resolver.resolve("data/golden.json:10")
    assert r.is_block and [k for k, _ in r.items] == ["helpfulness", "safety", "verbosity"]
    assert [i.line for _, i in r.items] == [11, 12, 13]


def test_one_line_object_is_a_block_and_its_keys_are_reachable(resolver):
    assert resolver.resolve("data/golden.json:18").value == {"a": 1, "b": 2}
    assert resolver.resolve("data/golden.json:18#inline/b").value == 2


def test_prose_lines(resolver):
    assert resolver.resolve("data/notes.md:4").value == 0.625
    assert resolver.resolve("data/notes.md:3#0").value == 1.2
    assert resolver.resolve("data/notes.txt:1").value == -3.5


def test_jsonl_line(resolver):
    r = resolver.resolve("data/rows.jsonl:2#margin")
    assert (r.value, r.line) == (-0.5, 2)
    assert resolver.resolve("data/rows.jsonl:3").value["pair_id"] == "h3"


@pytest.mark.parametrize("ref, value", [
    ("data/rows.jsonl | count", 6),
    ("data/rows.jsonl | distinct seed_id", 4),
    ("data/rows.jsonl | mean margin", 0.7916666666666666),
    ("data/rows.jsonl | min margin", -1.5),
    ("data/rows.jsonl | max attribution", 1.0),
    ("data/rows.jsonl | sum attribution", 1.625),
    ("data/rows.jsonl | count margin < 0", 2),
    ("data/rows.jsonl | count margin >= 2", 2),
    ("data/rows.jsonl | count dimension != safety", 3),
    ("data/rows.jsonl | where dimension == safety | count margin < 0", 1),
    ("data/rows.jsonl | where dimension == safety | where margin > 0 | mean margin", 1.75),
    ("data/golden.json:10 | count value < 0", 2),
    ("data/golden.json#per_dimension_rho | count", 3),
])
def test_aggregates(resolver, ref, value):
    r = resolver.resolve(ref)
    assert r.value == pytest.approx(value) and r.line is None
    assert r.receipt.startswith("Computed from data/")


def test_group(resolver):
    r = resolver.resolve("data/rows.jsonl | group dimension | count margin < 0")
    assert r.value == {"helpfulness": 1, "safety": 1}
    assert "where dimension == safety" in r.items[1][1].expression


@pytest.mark.parametrize("ref, shown", [
    ("data/golden.json:5 | fmt .3f", "-0.171"),
    ("data/golden.json:5 | fmt .2f minus", "\u22120.17"),
    ("data/golden.json:15 | fmt +.2f", "+0.13"),
    ("data/golden.json:15 | fmt .1%", "12.5%"),
    ("data/golden.json:16 | fmt ,d", "1,234,567"),
    ("data/golden.json:4 | fmt .0e", "1e-06"),
    ("data/golden.json:5", "-0.170885"),
])
def test_formats(resolver, ref, shown):
    assert resolver.resolve(ref).display == shown


def test_bundle_first(resolver):
    bundled = Resolver(FIXTURE, bundle="demo")
    r = bundled.resolve("golden.json:3")
    assert (r.value, r.source) == (0.25, "bundles/demo/golden.json")
    # not in the bundle: falls back to the repository
    assert bundled.resolve("data/golden.json:5").source == "data/golden.json"


@pytest.mark.parametrize("ref, fixture, fragment", [
    ("data/nope.json:3", "data/nope.json", "not found"),
    ("data/golden.json:99", "data/golden.json", "out of range"),
    ("data/golden.json:14", "data/golden.json:14", "holds no value"),
    ("data/golden.json#counts/nope", "data/golden.json:6", "no key path 'counts/nope'"),
    ("data/golden.json:8#counts/pairs", "data/golden.json:8", "now at line 7"),
    ("data/golden.json:17", "data/golden.json:17", "null"),
    ("data/notes.md:3", "data/notes.md:3", "holds 2 numbers"),
    ("data/notes.md:6", "data/notes.md:6", "no number"),
    ("data/rows.jsonl", "data/rows.jsonl", "needs an aggregate"),
    ("data/rows.jsonl | mean dimension", "data/rows.jsonl:1", "not a number"),
    ("data/rows.jsonl | mean nope", "data/rows.jsonl:1", "no field 'nope'"),
    ("data/rows.jsonl | where margin > 99 | mean margin", "data/rows.jsonl", "no rows"),
    ("data/golden.json:5 | count", "data/golden.json:5", "need rows"),
    ("../outside.json:1", "../outside.json", "outside the repository"),
])
def test_errors_name_the_fixture_line(resolver, ref, fixture, fragment):
    with pytest.raises(FixtureProblem) as info:
        resolver.resolve(ref)
    assert info.value.fixture == fixture and fragment in info.value.message


def test_outside_repository_refused(tmp_path):
    (tmp_path / "outside.json").write_text('{"a": 1}\n')
    root = tmp_path / "repo"
    root.mkdir()
    commit_all(root)
    with pytest.raises(FixtureProblem, match="outside the repository"):
        Resolver(root).resolve("../outside.json#a")
    assert Resolver(root, allow_outside=True).resolve("../outside.json#a").href == ""


def test_nan_is_refused_only_where_used(tmp_path):
    (tmp_path / "n.json").write_text('{\n  "ok": 1.5,\n  "bad": NaN\n}\n')
    (tmp_path / "n.jsonl").write_text('{"x": 1.0}\n{"x": NaN}\n')
    (tmp_path / "n.yaml").write_text("a: .nan\n")
    commit_all(tmp_path)
    r = Resolver(tmp_path)
    assert r.resolve("n.json:2").value == 1.5
    for ref, where in [("n.json:3", "n.json:3"), ("n.json#bad", "n.json:3"), ("n.jsonl | mean x", "n.jsonl:2"),
                       ("n.yaml#a", "n.yaml:1")]:
        with pytest.raises(FixtureProblem, match="finite") as info:
            r.resolve(ref)
        assert info.value.fixture == where


def test_jsonl_parse_error_names_line(tmp_path):
    (tmp_path / "b.jsonl").write_text('{"x": 1}\n{"x": 2}\n{"x": \n')
    commit_all(tmp_path)
    with pytest.raises(FixtureProblem, match="does not parse") as info:
        Resolver(tmp_path).resolve("b.jsonl | count")
    assert info.value.fixture == "b.jsonl:3"
