"""Errata: the organism's correction, recomputed from its rows, and every bad correction note."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bundle_kit import rankstats
from site_src.errors import BuildError
from site_src.honesty import errata

from .conftest import REPO, STUDY_FRONT, build_site, make_study_site

ORGANISM = REPO / "bundles" / "organism"


def _key_recovery(absolute: bool) -> tuple[float, float]:
    """(attribution AUC, mean patching AUC minus it) over mlp and head components, mean patching
    join, averaged over dimensions: measure/runner/summary.py's point estimate, by rankstats alone."""
    def rows(*names):
        return [r for n in names for r in rankstats.read_jsonl(ORGANISM / n) if r["kind"] in ("mlp", "head")]
    joined = rankstats.join_rows(rows("attribution_per_pair.jsonl", "heads_attribution_per_pair.jsonl"),
                                 rows("patching_per_pair.jsonl", "heads_patching_per_pair.jsonl"), "mean")
    key = {d: set(v["components"]) for d, v in json.loads((ORGANISM / "key.json").read_text())["dimensions"].items()}
    attribution, patching = [], []
    for dimension, comps in rankstats.component_scores(joined).items():
        names = list(comps)
        member = [c in key[dimension] for c in names]
        attribution.append(rankstats.roc_auc([abs(comps[c][0]) if absolute else comps[c][0] for c in names], member))
        patching.append(rankstats.roc_auc([comps[c][1] for c in names], member))
    a = rankstats.mean(attribution)
    return a, rankstats.mean(patching) - a


class _AbsoluteKeyRecovery:
    """Key recovery of the organism with attribution scored by its absolute value, point estimates
    and the seed bootstrap the study's summary uses (measure/runner/summary.py: all seeds resampled
    together, rankstats.seed_bootstrap with 1000 resamples, seed 0, 95%). Each seed's per-component
    values are kept apart, so a resample only gathers lists instead of joining rows again."""

    def __init__(self):
        def rows(*names):
            return [r for n in names for r in rankstats.read_jsonl(ORGANISM / n) if r["kind"] in ("mlp", "head")]
        joined = rankstats.join_rows(rows("attribution_per_pair.jsonl", "heads_attribution_per_pair.jsonl"),
                                     rows("patching_per_pair.jsonl", "heads_patching_per_pair.jsonl"), "mean")
        self.key = {d: set(v["components"])
                    for d, v in json.loads((ORGANISM / "key.json").read_text())["dimensions"].items()}
        self.values: dict = {}   # seed -> (dimension, component) -> ([attribution], [patch fraction])
        for (dimension, _pair, component), (attr, patch) in sorted(joined.items()):
            cell = self.values.setdefault(attr["seed_id"], {}).setdefault((dimension, component), ([], []))
            cell[0].append(attr["attribution"])
            cell[1].append(rankstats.patch_fraction(patch))
        self.dimension = {seed: next(iter(cells))[0] for seed, cells in self.values.items()}

    def aucs(self, seeds) -> dict:
        """{dimension: (attribution AUC of |score|, patching AUC)} over the (resampled) seeds."""
        gathered: dict = {}
        for seed in seeds:
            for (dimension, component), (a, p) in self.values[seed].items():
                cell = gathered.setdefault(dimension, {}).setdefault(component, ([], []))
                cell[0].extend(a)
                cell[1].extend(p)
        out = {}
        for dimension, comps in gathered.items():
            names = sorted(comps)
            member = [c in self.key[dimension] for c in names]
            out[dimension] = (rankstats.roc_auc([abs(rankstats.mean(comps[c][0])) for c in names], member),
                              rankstats.roc_auc([rankstats.mean(comps[c][1]) for c in names], member))
        return out

    def overall(self, seeds) -> tuple[float, float]:
        """(attribution AUC, patching minus attribution), averaged over the dimensions present."""
        got = self.aucs(seeds)
        a = rankstats.mean(v[0] for v in got.values())
        return a, rankstats.mean(v[1] for v in got.values()) - a


def _organism_corrections() -> dict:
    text = (ORGANISM / "CORRECTIONS.md").read_text()
    return {c.key_path: c for c in errata.parse(text, "bundles/organism/CORRECTIONS.md", "organism")}


def test_published_values_are_the_signed_score():
    golden = json.loads((ORGANISM / "golden.json").read_text())["key_recovery"]["overall"]
    signed_auc, signed_gap = _key_recovery(absolute=False)
    assert round(signed_auc, 6) == golden["attribution_auc"]
    assert round(signed_gap, 6) == golden["gap_patching_minus_attribution"]
    notes = _organism_corrections()
    assert notes["key_recovery/overall/attribution_auc"].published == golden["attribution_auc"]
    assert notes["key_recovery/overall/gap_patching_minus_attribution"].published == golden["gap_patching_minus_attribution"]


def test_corrected_values_are_the_auc_of_the_absolute_score():
    auc, gap = _key_recovery(absolute=True)
    notes = _organism_corrections()
    assert notes["key_recovery/overall/attribution_auc"].corrected == round(auc, 6)
    assert notes["key_recovery/overall/gap_patching_minus_attribution"].corrected == round(gap, 6)


def test_corrected_per_dimension_values_are_the_auc_of_the_absolute_score():
    """The per-dimension key recovery of attribution and the difference from patching, as the
    correction note gives them: every dimension whose value the absolute score changes is corrected."""
    kr = _AbsoluteKeyRecovery()
    golden = json.loads((ORGANISM / "golden.json").read_text())["key_recovery"]["per_dimension"]
    notes = _organism_corrections()
    for dimension, (attribution, patching) in kr.aucs(sorted(kr.values)).items():
        published = golden[dimension]
        for field, value in (("attribution_auc", attribution), ("gap_patching_minus_attribution", patching - attribution)):
            path = f"key_recovery/per_dimension/{dimension}/{field}"
            if round(value, 6) == published[field]:
                assert path not in notes, f"{path} is unchanged by the correction, but the note corrects it"
                continue
            assert path in notes, f"{path}: published {published[field]}, {round(value, 6)} with the absolute score"
            assert notes[path].published == published[field] and notes[path].corrected == round(value, 6)


def test_corrected_intervals_are_the_seed_bootstrap_of_the_absolute_score():
    kr = _AbsoluteKeyRecovery()
    seeds = sorted(kr.values)
    cache: dict = {}

    def overall(sample):
        key = tuple(sample)
        if key not in cache:
            cache[key] = kr.overall(sample)
        return cache[key]

    notes = _organism_corrections()
    settings = {"resamples": 1000, "seed": 0, "level": 0.95}   # measure/runner/summary.py's BOOTSTRAP
    auc = rankstats.seed_bootstrap(seeds, lambda s: overall(s)[0], **settings)
    gap = rankstats.seed_bootstrap(seeds, lambda s: overall(s)[1], **settings)
    for path, interval in (("key_recovery/overall/attribution_ci", auc), ("key_recovery/overall/gap_ci", gap)):
        for end in (0, 1):
            assert notes[f"{path}/{end}"].corrected == round(interval[end], 6), (path, interval)
    assert round(overall(seeds)[0], 6) == notes["key_recovery/overall/attribution_auc"].corrected


GOOD = """# Notes

- corrects: golden.json#mean_rho
- published: {published}
- corrected: 0.5
- date: 2026-12-01
- reason: A reason.
"""


@pytest.mark.parametrize("text, line, message", [
    (GOOD.replace("- date: 2026-12-01\n", ""), 3, "correction lacks date"),
    (GOOD.replace("2026-12-01", "1 December"), 6, "date must be YYYY-MM-DD"),
    (GOOD.replace("- corrected: 0.5", "- corrected: 0.5 or 0.6"), 5, "corrected must hold exactly one number"),
    (GOOD.replace("- reason:", "- why:"), 7, "unknown field 'why'"),
    (GOOD.replace("golden.json#mean_rho", "README.md#x"), 3, "corrects must name a value of golden.json"),
    ("- published: 0.5\n" + GOOD, 1, "a correction starts with its '- corrects:' line"),
    (GOOD.replace("- reason: A reason.", "- reason: A reason.\n- reason: Another."), 8, "reason given twice"),
    (GOOD.replace("- corrected:", "-corrected:").replace("- date", "- Date"), 6, "a correction line reads"),
])
def test_malformed_note_names_its_line(text, line, message):
    with pytest.raises(BuildError) as caught:
        errata.parse(text.format(published="0.1"), "bundles/tiny/CORRECTIONS.md", "tiny")
    assert caught.value.where == f"bundles/tiny/CORRECTIONS.md:{line}"
    assert message in caught.value.message


def _tiny_mean_rho() -> float:
    return json.loads((REPO / "tests/bundles/fixtures/tiny/golden.json").read_text())["mean_rho"]


def _site_with_note(tmp_path, note: str, body: str):
    root = make_study_site(tmp_path, STUDY_FRONT, body)
    (root / "bundles/tiny/CORRECTIONS.md").write_text(note)
    return build_site(root)


def test_page_shows_both_values_each_with_its_receipt(tmp_path):
    note = GOOD.format(published=_tiny_mean_rho())
    body = "## Result\n\nThe mean rho was ~~{{ CORRECTIONS.md:4 }}~~ and is {{ CORRECTIONS.md:5 }}.\n"
    result, errors = _site_with_note(tmp_path, note, body)
    assert errors == []
    html = result.files["studies/tiny/index.html"].decode()
    assert '<s><a class="ref" href="../../source/bundles/tiny/CORRECTIONS.md.html#L4"' in html
    assert re.search(r'href="\.\./\.\./source/bundles/tiny/CORRECTIONS\.md\.html#L5" id="ref-\d+">0\.5</a>', html)
    table = html[html.index('id="corrections"'):]
    assert "<del><a class=\"ref\"" in table and 'href="../../source/bundles/tiny/CORRECTIONS.md.html#L4"' in table
    assert '<a href="#corrections">1 published value corrected</a>' in html


def test_corrected_value_quoted_bare_is_refused(tmp_path):
    note = GOOD.format(published=_tiny_mean_rho())
    _result, errors = _site_with_note(tmp_path, note, "## Result\n\nThe mean rho is {{ golden.json#mean_rho }}.\n")
    assert errors == ["content/studies/tiny.md:13: quotes mean_rho of bundles/tiny/golden.json bare, but it was corrected "
                      "(bundles/tiny/CORRECTIONS.md:3): show both values from the note, the published one struck through: "
                      "~~{{ bundles/tiny/CORRECTIONS.md:4 }}~~ {{ bundles/tiny/CORRECTIONS.md:5 }}"]


def test_erratum_line_out_of_range(tmp_path):
    note = GOOD.format(published=_tiny_mean_rho())
    _result, errors = _site_with_note(tmp_path, note, "## Result\n\nCorrected: {{ CORRECTIONS.md:40 }}.\n")
    assert len(errors) == 1 and errors[0].startswith("content/studies/tiny.md:13: {{ CORRECTIONS.md:40 }}: ")
    assert "bundles/tiny/CORRECTIONS.md" in errors[0]


def test_published_value_other_than_the_bundle_holds(tmp_path):
    _result, errors = _site_with_note(tmp_path, GOOD.format(published="0.123"), "## Result\n\nText.\n")
    assert errors == [f"bundles/tiny/CORRECTIONS.md:4: published is 0.123, but bundles/tiny/golden.json:19 holds "
                      f"{_tiny_mean_rho()!r}: the published value is the one the bundle still holds, exactly as written"]


def test_correction_of_a_value_that_does_not_exist(tmp_path):
    note = GOOD.format(published="0.1").replace("golden.json#mean_rho", "golden.json#mean_rho_typo")
    _result, errors = _site_with_note(tmp_path, note, "## Result\n\nText.\n")
    assert len(errors) == 1 and errors[0].startswith(
        "bundles/tiny/CORRECTIONS.md:3: corrects 'mean_rho_typo', which does not resolve")


@pytest.mark.parametrize("published", ["{rho}4", "{rho}1", "{rho}9999"])
def test_published_value_is_compared_exactly_as_written(tmp_path, published):
    """Issue 18, case 8: 0.649124 passed against 0.64912 (compared after rounding to golden's precision)."""
    rho = repr(_tiny_mean_rho())
    _result, errors = _site_with_note(tmp_path, GOOD.format(published=published.format(rho=rho)), "## Result\n\nText.\n")
    assert len(errors) == 1 and errors[0].startswith("bundles/tiny/CORRECTIONS.md:4: published is ")


def test_the_same_number_written_with_a_trailing_zero_is_the_same(tmp_path):
    _result, errors = _site_with_note(tmp_path, GOOD.format(published=repr(_tiny_mean_rho()) + "0"), "## Result\n\nText.\n")
    assert errors == []


@pytest.mark.parametrize("published", ["-38.5124%", "-0.385,124", "1/2"])
def test_published_value_must_be_a_plain_decimal(published):
    with pytest.raises(BuildError) as caught:
        errata.parse(GOOD.format(published=published), "bundles/tiny/CORRECTIONS.md", "tiny")
    assert caught.value.where == "bundles/tiny/CORRECTIONS.md:4"


@pytest.mark.parametrize("reference", [
    "{{ golden.json:LINE }}",                        # issue 18, case 6: the line form published it bare
    "{{ golden.json#mean_rho }}",
    "{{ golden.json:LINE#mean_rho }}",
    "{{ bundles/tiny/golden.json:LINE | fmt .2f }}",
    "{{ golden.json | count }}",                     # an aggregate over the whole file, which holds it
])
def test_corrected_value_is_refused_in_every_reference_form(tmp_path, reference):
    line = next(n for n, t in enumerate((REPO / "tests/bundles/fixtures/tiny/golden.json").read_text().split("\n"), 1)
                if '"mean_rho"' in t)
    note = GOOD.format(published=_tiny_mean_rho())
    body = f"## Result\n\nThe mean rho is {reference.replace('LINE', str(line))}.\n"
    _result, errors = _site_with_note(tmp_path, note, body)
    assert len(errors) == 1 and errors[0].startswith("content/studies/tiny.md:13: quotes mean_rho of "
                                                     "bundles/tiny/golden.json bare, but it was corrected"), errors


def test_a_table_of_a_block_holding_the_corrected_value_is_refused(tmp_path):
    note = GOOD.format(published="0.1").replace("golden.json#mean_rho", "golden.json#per_dimension_rho/honesty")
    note = note.replace("published: 0.1", "published: -0.028571")
    body = "## Result\n\n```table\nsource: golden.json#per_dimension_rho\n```\n"
    _result, errors = _site_with_note(tmp_path, note, body)
    assert any("quotes per_dimension_rho/honesty of bundles/tiny/golden.json bare" in e for e in errors), errors


def test_other_values_of_the_file_stay_quotable(tmp_path):
    note = GOOD.format(published=_tiny_mean_rho())
    _result, errors = _site_with_note(tmp_path, note, "## Result\n\nHonesty: {{ golden.json#per_dimension_rho/honesty }}.\n")
    assert errors == []


WITHDRAWN = """# Corrections to the tiny study

- withdraws: the test's verdict on every dimension
- date: 2026-12-02
- reason: The test could not have passed where the baseline was already right on every seed.
"""


def test_a_withdrawn_claim_is_listed_with_its_reason_and_its_line():
    """Issue 30 item 7: a claim no single value holds is corrected through the note too."""
    items = errata.parse(WITHDRAWN + "\n" + GOOD.format(published="0.1"), "bundles/tiny/CORRECTIONS.md", "tiny")
    assert [type(i).__name__ for i in items] == ["Withdrawal", "Correction"]
    claim = items[0]
    assert (claim.claim, claim.date, claim.lines) == ("the test's verdict on every dimension", "2026-12-02",
                                                     {"withdraws": 3, "date": 4, "reason": 5})


@pytest.mark.parametrize("text, line, message", [
    (WITHDRAWN.replace("- date: 2026-12-02\n", ""), 3, "withdrawn claim lacks date"),
    (WITHDRAWN.replace("- reason:", "- published: 0.5\n- reason:"), 5, "published is not a field of a withdrawn claim"),
    (WITHDRAWN.replace("2026-12-02", "2 December"), 4, "date must be YYYY-MM-DD"),
])
def test_a_malformed_withdrawal_names_its_line(text, line, message):
    with pytest.raises(BuildError) as caught:
        errata.parse(text, "bundles/tiny/CORRECTIONS.md", "tiny")
    assert caught.value.where == f"bundles/tiny/CORRECTIONS.md:{line}"
    assert message in caught.value.message


def test_the_page_lists_a_withdrawn_claim_and_its_header_counts_it(tmp_path):
    result, errors = _site_with_note(tmp_path, WITHDRAWN, "## Result\n\nText.\n")
    assert errors == []
    html = result.files["studies/tiny/index.html"].decode()
    assert '<a href="#corrections">1 published claim withdrawn</a>' in html
    section = html[html.index('id="corrections"'):]
    assert ("<li><strong>Withdrawn: the test&#39;s verdict on every dimension</strong> "
            '(<a href="../../source/bundles/tiny/CORRECTIONS.md.html#L3">correction note</a>, 2026-12-02). '
            "The test could not have passed") in section
    assert "source/bundles/tiny/CORRECTIONS.md.html" in result.files
