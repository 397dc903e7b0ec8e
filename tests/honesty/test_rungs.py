"""Trust rungs and claim kinds: a page or figure may say only what its bundle and data support."""
from __future__ import annotations

import json

import pytest

from site_src.honesty import claims

from .conftest import STUDY_FRONT, build_site, make_study_site
from .test_site import _registered_site

FIGURE = """```figure
kind: {kind}
id: f1
caption: A figure.
claim: {claim}
data:
  attribution: attribution_per_pair.jsonl
  patching: patching_per_pair.jsonl
options: {{mode: mean}}
```
"""


def _line(root, needle: str, last: bool = False) -> int:
    text = (root / "content/studies/tiny.md").read_text()
    found = [i for i, t in enumerate(text.splitlines(), 1) if t.startswith(needle)]
    return found[-1] if last else found[0]


def test_registered_without_a_registration(tmp_path):
    root = make_study_site(tmp_path, STUDY_FRONT.replace("trust: exploratory", "trust: registered"))
    _result, errors = build_site(root)
    assert errors == [f"content/studies/tiny.md:{_line(root, 'trust:')}: the page says 'registered', but no verified "
                      "registration with a verdict concerns its bundle (tiny): commit a record under registrations/ "
                      "before the data, or say 'exploratory'"]


def test_registered_with_a_verified_registration(tmp_path):
    root = _registered_site(tmp_path, {"tiny-high": '{op: ">", bound: 0.9}'})
    page = root / "content/studies/tiny.md"
    page.write_text(page.read_text().replace("trust: exploratory", "trust: registered"))
    _result, errors = build_site(root)
    assert errors == []


def test_registration_awaiting_data_does_not_make_a_page_registered(tmp_path):
    root = _registered_site(tmp_path, {"tiny-high": '{op: ">", bound: 0.9}'})
    for path in (root / "registrations").iterdir():
        path.write_text(path.read_text().replace("study: tiny", "study: elsewhere"))
    page = root / "content/studies/tiny.md"
    page.write_text(page.read_text().replace("trust: exploratory", "trust: registered"))
    _result, errors = build_site(root)
    assert any("says 'registered', but no verified registration" in e for e in errors)


def test_figure_registered_without_a_registration(tmp_path):
    body = FIGURE.format(kind="rank_scatter", claim="observational vs causal").replace("claim:", "trust: registered\nclaim:")
    root = make_study_site(tmp_path, body="## Result\n\n" + body)
    _result, errors = build_site(root)
    assert errors == [f"content/studies/tiny.md:{_line(root, 'trust: registered')}: figure f1 says 'registered', but no "
                      "verified registration with a verdict concerns its bundle (tiny): commit a record under "
                      "registrations/ before the data, or say 'exploratory'"]


def test_calibrated_without_a_scorecard(tmp_path):
    root = make_study_site(tmp_path, STUDY_FRONT.replace("trust: exploratory", "trust: calibrated"))
    _result, errors = build_site(root)
    assert len(errors) == 1 and errors[0].startswith(
        f"content/studies/tiny.md:{_line(root, 'trust:')}: the page says 'calibrated', but the page cites no calibration")


def _calibration_study(root, construction="hand-set weights write the key", passed=True):
    folder = root / "bundles" / "cal"
    folder.mkdir(parents=True)
    key = {"construction": construction} if construction else {"rule": "measured from activation deltas"}
    (folder / "key.json").write_text(json.dumps(key) + "\n")
    (folder / "golden.json").write_text(json.dumps({"key_check": {"all_pass": passed}}) + "\n")


@pytest.mark.parametrize("construction, passed, message", [
    ("hand-set weights write the key", True, None),
    ("", True, "bundles/cal/key.json does not say how its key was constructed"),
    ("hand-set weights write the key", False, "bundles/cal/golden.json does not record a passed key verification"),
])
def test_calibrated_needs_a_key_true_by_construction(tmp_path, construction, passed, message):
    front = STUDY_FRONT.replace("trust: exploratory", "trust: calibrated") + "calibration: cal\n"
    root = make_study_site(tmp_path, front)
    _calibration_study(root, construction, passed)
    _result, errors = build_site(root)
    if message is None:
        assert errors == []
    else:
        assert len(errors) == 1 and errors[0].startswith(
            f"content/studies/tiny.md:{_line(root, 'calibration:')}: calibration 'cal' {message}")


def test_calibration_naming_a_study_that_is_not_there(tmp_path):
    front = STUDY_FRONT.replace("trust: exploratory", "trust: calibrated") + "calibration: nowhere\n"
    root = make_study_site(tmp_path, front)
    _result, errors = build_site(root)
    assert errors == [f"content/studies/tiny.md:{_line(root, 'calibration:')}: calibration 'nowhere' names no study: "
                      "expected the folder bundles/nowhere/"]


@pytest.mark.parametrize("kind, claim, supported", [
    ("rank_scatter", "causal", "observational vs causal"),
    ("rank_scatter", "observational", "observational vs causal"),
    ("patch_picker", "observational", "causal"),
    ("patch_picker", "observational vs causal", "causal"),
    ("top_lists", "causal", "observational vs causal"),
])
def test_figure_with_the_wrong_claim_kind(tmp_path, kind, claim, supported):
    root = make_study_site(tmp_path, body="## Result\n\n" + FIGURE.format(kind=kind, claim=claim))
    _result, errors = build_site(root)
    assert f"content/studies/tiny.md:{_line(root, 'claim: ' + claim, last=True)}: figure f1: claim {claim!r} is not what a {kind} " \
           f"figure supports: its data make it {supported!r}" in errors


def test_figure_with_the_right_claim_kind(tmp_path):
    root = make_study_site(tmp_path, body="## Result\n\n" + FIGURE.format(kind="patch_picker", claim="causal")
                           + "\nThe mean rho is {{ golden.json#mean_rho }}.\n")
    _result, errors = build_site(root)
    assert errors == []


@pytest.mark.parametrize("claim, body, supported", [
    ("causal", "The mean rho is {{ golden.json#mean_rho }}.\n", "observational vs causal"),
    ("causal", "Rows: {{ attribution_per_pair.jsonl | mean attribution }}.\n", "observational"),
    ("observational", "Effect: {{ patching_per_pair.jsonl | mean effect }}.\n", "causal"),
    ("observational vs causal", "Rows: {{ attribution_per_pair.jsonl | mean attribution }}.\n", "observational"),
])
def test_page_claim_its_values_do_not_support(tmp_path, claim, body, supported):
    root = make_study_site(tmp_path, STUDY_FRONT.replace("claim: observational vs causal", f"claim: {claim}"), body)
    _result, errors = build_site(root)
    assert errors == [f"content/studies/tiny.md:{_line(root, 'claim:')}: claim {claim!r} is not what this page's "
                      f"figures and values support: together they make it {supported!r}"]


def test_page_claim_supported_by_both_kinds(tmp_path):
    body = ("Rows: {{ attribution_per_pair.jsonl | mean attribution }} and "
            "{{ patching_per_pair.jsonl | mean effect }}; pairs {{ golden.json#counts/pairs }}.\n")
    _result, errors = build_site(make_study_site(tmp_path, body=body))
    assert errors == []


@pytest.mark.parametrize("source, expression, kind", [
    ("bundles/s/patching_per_pair.jsonl", "patching_per_pair.jsonl | count", claims.CAUSAL),
    ("bundles/s/heads_attribution_per_pair.jsonl", "heads_attribution_per_pair.jsonl | count", claims.OBSERVATIONAL),
    ("bundles/s/lens_per_pair.jsonl", "lens_per_pair.jsonl | mean depth", claims.OBSERVATIONAL),
    ("bundles/s/golden.json", "golden.json#per_dimension_rho/hazard", claims.COMPARISON),
    ("bundles/s/golden.json", "golden.json#key_recovery/overall/patching_auc | fmt .3f", claims.CAUSAL),
    ("bundles/s/golden.json", "golden.json#key_recovery/overall/attribution_auc", claims.OBSERVATIONAL),
    ("bundles/s/golden.json", "golden.json#key_recovery/gap/mean_minus_attribution", claims.COMPARISON),
    ("bundles/s/golden.json", "golden.json#key_recovery/overall/gap_patching_minus_attribution", claims.COMPARISON),
    ("bundles/s/golden.json", "golden.json#key_recovery/by_rule", claims.COMPARISON),
    ("bundles/s/golden.json", "golden.json#key_recovery/auc/patching_swap/mean", claims.CAUSAL),
    ("bundles/s/golden.json", "golden.json#key_check/by_dimension", claims.CAUSAL),
    ("bundles/s/golden.json", "golden.json#crystallization/mean_depth", claims.OBSERVATIONAL),
    ("bundles/s/golden.json", "golden.json#rho_by_mode/zero/mean_rho | fmt +.3f minus", claims.COMPARISON),
    ("bundles/s/golden.json", "golden.json#counts/components_patched", None),
    ("bundles/s/golden.json", "golden.json#model", None),
])
def test_value_kinds(source, expression, kind):
    assert claims.value_kind(source, expression) == kind


@pytest.mark.parametrize("matrix, claim, error", [
    ("golden.json#key_check/by_dimension", "causal", False),       # resample ablation intervenes
    ("golden.json#key_check/by_dimension", "observational", True),
    ("golden.json#key_recovery/by_rule", "observational vs causal", False),
    ("golden.json#objective_cosines", "observational", False),     # geometry: nothing replaced
    ("golden.json#objective_cosines", "causal", True),
])
def test_heatmap_takes_the_kind_of_its_matrix(matrix, claim, error):
    kind = claims.figure_claim("heatmap", {"matrix": matrix})
    assert (kind != claim) == error
