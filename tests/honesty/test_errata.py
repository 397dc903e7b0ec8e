"""Errata: the organism's correction, recomputed from its rows, and every bad correction note."""
from __future__ import annotations

import json
import math
import re
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from bundle_kit import rankstats
from site_src.errors import BuildError
from site_src.honesty import errata

from .conftest import REPO, STUDY_FRONT, build_site, make_study_site

ORGANISM = REPO / "bundles" / "organism"


def _rows(*names):
    return [r for n in names for r in rankstats.read_jsonl(ORGANISM / n) if r["kind"] in ("mlp", "head")]


def _key() -> dict:
    return {d: set(v["components"]) for d, v in json.loads((ORGANISM / "key.json").read_text())["dimensions"].items()}


def _key_recovery(absolute: bool, patch_score: str) -> tuple[float, float]:
    """(attribution AUC, mean patching AUC minus it) over mlp and head components, mean patching
    join, averaged over dimensions: measure/runner/summary.py's point estimate, by rankstats alone."""
    joined = rankstats.join_rows(_rows("attribution_per_pair.jsonl", "heads_attribution_per_pair.jsonl"),
                                 _rows("patching_per_pair.jsonl", "heads_patching_per_pair.jsonl"), "mean")
    key = _key()
    attribution, patching = [], []
    for dimension, comps in rankstats.component_scores(joined, patch_score).items():
        names = list(comps)
        member = [c in key[dimension] for c in names]
        attribution.append(rankstats.roc_auc([abs(comps[c][0]) if absolute else comps[c][0] for c in names], member))
        patching.append(rankstats.roc_auc([comps[c][1] for c in names], member))
    a = rankstats.mean(attribution)
    return a, rankstats.mean(patching) - a


class _CorrectedKeyRecovery:
    """Key recovery of the organism as corrected: attribution scored by its absolute value, patching
    by the one patch score (sum |effect| / sum |clean margin|, docs/statistics.md); point estimates
    and the seed bootstrap the study's summary uses (measure/runner/summary.py: rankstats.seed_bootstrap
    with 1000 resamples, seed 0, 95%). Each seed's per-component rows are kept apart, so a resample
    only gathers lists instead of joining rows again."""

    def __init__(self):
        joined = rankstats.join_rows(_rows("attribution_per_pair.jsonl", "heads_attribution_per_pair.jsonl"),
                                     _rows("patching_per_pair.jsonl", "heads_patching_per_pair.jsonl"), "mean")
        self.key = _key()
        self.values: dict = {}   # seed -> (dimension, component) -> ([attribution], [patching row])
        for (dimension, _pair, component), (attr, patch) in sorted(joined.items()):
            cell = self.values.setdefault(attr["seed_id"], {}).setdefault((dimension, component), ([], []))
            cell[0].append(attr["attribution"])
            cell[1].append(patch)
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
                              rankstats.roc_auc([rankstats.ratio_of_means(comps[c][1]) for c in names], member))
        return out

    def overall(self, seeds) -> tuple[float, float, float]:
        """(attribution AUC, patching AUC, patching minus attribution), averaged over the dimensions present."""
        got = self.aucs(seeds)
        a = rankstats.mean(v[0] for v in got.values())
        p = rankstats.mean(v[1] for v in got.values())
        return a, p, p - a


def _organism_corrections() -> dict:
    text = (ORGANISM / "CORRECTIONS.md").read_text()
    return {c.key_path: c for c in errata.parse(text, "bundles/organism/CORRECTIONS.md", "organism")
            if isinstance(c, errata.Correction)}


def _leaves(tree, path=()):
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _leaves(v, path + (str(i),))
    else:
        yield "/".join(path), tree


def _golden_at(commit: str) -> dict:
    shown = subprocess.run(["git", "-C", str(REPO), "show", f"{commit}:bundles/organism/golden.json"],
                           capture_output=True, text=True, check=True)
    return json.loads(shown.stdout, parse_float=Decimal)


def test_published_values_are_the_signed_score_and_the_mean_of_ratios():
    """What the note says was published is what the first definitions give from the committed rows."""
    signed_auc, signed_gap = _key_recovery(absolute=False, patch_score="mean_ratio")
    notes = _organism_corrections()
    assert notes["key_recovery/overall/attribution_auc"].published == round(signed_auc, 6)
    assert notes["key_recovery/overall/gap_patching_minus_attribution"].published == round(signed_gap, 6)


def test_corrected_values_are_the_absolute_score_and_the_one_patch_score():
    auc, gap = _key_recovery(absolute=True, patch_score="ratio_of_means")
    notes = _organism_corrections()
    assert notes["key_recovery/overall/attribution_auc"].corrected == round(auc, 6)
    assert notes["key_recovery/overall/gap_patching_minus_attribution"].corrected == round(gap, 6)
    # issue 26 item 6: the first correction, still on the mean of ratios, gave -0.016
    assert round(_key_recovery(absolute=True, patch_score="mean_ratio")[1], 6) == -0.015712
    assert round(gap, 3) == 0.043


def test_every_value_the_recomputation_changed_is_corrected_and_the_bundle_holds_it():
    """Every number of golden.json that differs from the one published (published_in) has its
    correction, whose published value is the old one and whose corrected value golden.json holds
    (test_committed_bundles proves golden.json is today's code on the committed rows); nothing
    unchanged is listed as corrected."""
    notes = _organism_corrections()
    commits = {c.published_in for c in notes.values()}
    assert len(commits) == 1 and "" not in commits
    then = dict(_leaves(_golden_at(commits.pop())))
    now = dict(_leaves(json.loads((ORGANISM / "golden.json").read_text(), parse_float=Decimal)))
    changed = {k for k, v in now.items() if isinstance(v, Decimal) and k in then and then[k] != v}
    assert set(notes) == changed
    for path in changed:
        assert notes[path].published_exact == then[path] and notes[path].corrected_exact == now[path], path


def test_corrected_per_dimension_values_are_recomputed_by_rankstats():
    """The per-dimension key recovery of each method and their difference, as the note and the
    bundle give them, recomputed from the rows by rankstats alone."""
    kr = _CorrectedKeyRecovery()
    golden = json.loads((ORGANISM / "golden.json").read_text())["key_recovery"]["per_dimension"]
    notes = _organism_corrections()
    for dimension, (attribution, patching) in kr.aucs(sorted(kr.values)).items():
        for field, value in (("attribution_auc", attribution), ("patching_auc", patching),
                             ("gap_patching_minus_attribution", patching - attribution)):
            assert golden[dimension][field] == round(value, 6), (dimension, field)
            path = f"key_recovery/per_dimension/{dimension}/{field}"
            if path in notes:
                assert notes[path].corrected == round(value, 6)


def test_corrected_intervals_are_the_seed_bootstrap_of_the_corrected_scores():
    kr = _CorrectedKeyRecovery()
    seeds = sorted(kr.values)
    cache: dict = {}

    def overall(sample):
        key = tuple(sample)
        if key not in cache:
            cache[key] = kr.overall(sample)
        return cache[key]

    notes = _organism_corrections()
    settings = {"resamples": 1000, "seed": 0, "level": 0.95}   # measure/runner/summary.py's BOOTSTRAP
    for path, which in (("key_recovery/overall/attribution_ci", 0), ("key_recovery/overall/patching_ci", 1),
                        ("key_recovery/overall/gap_ci", 2)):
        interval = rankstats.seed_bootstrap(seeds, lambda s: overall(s)[which], **settings)
        for end in (0, 1):
            assert notes[f"{path}/{end}"].corrected == round(interval[end], 6), (path, interval)
    assert round(overall(seeds)[0], 6) == notes["key_recovery/overall/attribution_auc"].corrected


def test_the_planted_study_needs_no_correction_the_two_patch_scores_coincide_there():
    """docs/statistics.md: planted-v2 was computed with the mean of per-pair ratios; every pair of
    a rule has the same clean margin, so the one patch score gives the same rhos and the same
    key-recovery headline, and no published number changes."""
    from bundle_kit import keyrecovery
    planted = REPO / "bundles" / "planted-v2"
    golden = json.loads((planted / "golden.json").read_text())
    attr = rankstats.read_jsonl(planted / "attribution_per_pair.jsonl")
    patch = rankstats.read_jsonl(planted / "patching_per_pair.jsonl")
    joined = rankstats.join_rows(attr, patch, "mean")
    ratios, sums = (rankstats.component_scores(joined, s) for s in ("mean_ratio", "ratio_of_means"))
    assert max(abs(ratios[d][c][1] - sums[d][c][1]) for d in ratios for c in ratios[d]) < 1e-5
    rhos = rankstats.dimension_rhos(sums)
    assert {d: round(v, 6) for d, v in rhos.items()} == golden["per_dimension_rho"]
    assert round(rankstats.mean(rhos.values()), 6) == golden["mean_rho"]
    # the primary key-recovery headline with mean patching scored as a ratio of sums
    heads = rankstats.read_jsonl(planted / "heads_patching_per_pair.jsonl")
    key = json.loads((planted / "key.json").read_text())
    table = keyrecovery.pair_table(attr + rankstats.read_jsonl(planted / "heads_attribution_per_pair.jsonl"),
                                   patch + heads)
    moved: dict = {}
    for r in patch + heads:
        if r["mode"] == "mean":
            cell = moved.setdefault(r["dimension"], {}).setdefault(r["component"], [0.0, 0.0])
            cell[0] += abs(r["effect"])
            cell[1] += abs(r["clean_margin"])
    primary = keyrecovery.PRIMARY
    values = []
    for d in sorted(key["dimensions"]):
        names = table[d]["components"]
        scores = [moved[d][c][0] / moved[d][c][1] for c in names]
        scores = [v if v >= primary["floor"] else 0.0 for v in scores]
        values.append(keyrecovery.metric(scores, names, key["dimensions"][d]["keys"][primary["key"]], primary["metric"]))
    assert round(math.fsum(values) / len(values), 6) == golden["key_recovery"]["headline"]["patching"]["value"]


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


def test_corrections_past_what_the_study_page_holds_are_a_page_beside_it(tmp_path, monkeypatch):
    """More corrections than CORRECTIONS_INLINE: the study page says how many and links to
    corrections.html in its own folder, which holds the whole table (both values, their receipts,
    the reasons); under the limit the table stays on the study page (the test above)."""
    import site_src.honesty as honesty

    monkeypatch.setattr(honesty, "CORRECTIONS_INLINE", 0)
    note = GOOD.format(published=_tiny_mean_rho())
    result, errors = _site_with_note(tmp_path, note, "## Result\n\nText.\n")
    assert errors == []
    html = result.files["studies/tiny/index.html"].decode()
    section = html[html.index('id="corrections"'):]
    assert '<a href="corrections.html">Each corrected value' in section and "<del>" not in section
    page = result.files["studies/tiny/corrections.html"].decode()
    table = page[page.index("corrections-table"):]
    assert "<del><a class=\"ref\"" in table and 'href="../../source/bundles/tiny/CORRECTIONS.md.html#L4"' in table
    assert 'id="correction-reason-1">A reason.' in page and '<a href="./">' in page


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


def _commit_all(root: Path) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root),
           "PATH": "/usr/bin:/bin"}
    if not (root / ".git").exists():
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", "published"], check=True, env=env)
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def _recomputed_site(tmp_path, published: str, corrected: str | None = None):
    """The tiny study published with a wrong mean_rho (-0.3), then its golden.json recomputed (the
    right one) with a note that names the commit that published the old value."""
    root = make_study_site(tmp_path, STUDY_FRONT, "## Result\n\nThe mean rho is {{ golden.json#mean_rho }}.\n")
    golden = root / "bundles/tiny/golden.json"
    right = golden.read_text()
    golden.write_text(right.replace(f'"mean_rho": {_tiny_mean_rho()!r}', '"mean_rho": -0.3'))
    commit = _commit_all(root)
    golden.write_text(right)
    note = GOOD.format(published=published).replace(
        "- corrected: 0.5", f"- published_in: {commit}\n- corrected: {corrected or repr(_tiny_mean_rho())}")
    (root / "bundles/tiny/CORRECTIONS.md").write_text(note)
    return build_site(root)


def test_a_recomputed_bundle_is_checked_against_the_commit_that_published_it(tmp_path):
    """published_in: the published value is golden.json's at that commit, the corrected one is
    today's, and a page may quote today's bare; the page still lists the correction."""
    result, errors = _recomputed_site(tmp_path, "-0.3")
    assert errors == []
    html = result.files["studies/tiny/index.html"].decode()
    assert '<a href="#corrections">1 published value corrected</a>' in html


@pytest.mark.parametrize("published, corrected, message", [
    ("0.123", None, "published is 0.123, but bundles/tiny/golden.json at "),
    ("-0.3", "0.6", "corrected is 0.6, but bundles/tiny/golden.json"),
])
def test_a_recomputed_bundle_refuses_values_neither_commit_holds(tmp_path, published, corrected, message):
    _result, errors = _recomputed_site(tmp_path, published, corrected)
    assert len(errors) == 1 and message in errors[0], errors


def test_published_in_must_be_a_full_commit_id():
    note = GOOD.format(published="0.1").replace("- corrected:", "- published_in: 9e0c159\n- corrected:")
    with pytest.raises(BuildError) as caught:
        errata.parse(note, "bundles/tiny/CORRECTIONS.md", "tiny")
    assert caught.value.where == "bundles/tiny/CORRECTIONS.md:5"
    assert "full commit id" in caught.value.message
