"""The honesty checks as the generator runs them: the study header, the registry section, refusals."""
from __future__ import annotations

from .conftest import STUDY_FRONT, build_site, make_study_site, run_record, unzip


def test_typed_reproduction_line_is_refused(tmp_path):
    root = make_study_site(tmp_path, STUDY_FRONT + "reproduction: Reproduced by everyone\n")
    _result, errors = build_site(root)
    assert errors == ["content/studies/tiny.md:10: front-matter field 'reproduction' is not typed: the reproduction "
                      "line is computed from the records under reproductions/<study>/; remove the field"]


def test_header_says_no_independent_reproduction_while_there_is_none(tmp_path):
    result, errors = build_site(make_study_site(tmp_path))
    assert errors == []
    html = result.files["studies/tiny/index.html"].decode()
    assert "<dt>reproduction</dt><dd>No independent reproduction recorded</dd>" in html


def test_header_line_and_registry_come_from_the_records(tmp_path, tiny_bundle):
    root = make_study_site(tmp_path)
    done = run_record(unzip(tiny_bundle, tmp_path / "dl" / "tiny"))
    (root / "reproductions" / "tiny").mkdir(parents=True)
    (root / "reproductions" / "tiny" / "here.yaml").write_text(done.stdout)
    result, errors = build_site(root)
    assert errors == []
    html = result.files["studies/tiny/index.html"].decode()
    line = "No independent reproduction recorded; 1 run on the project&#39;s own machine matched the expected output (not independent)"
    assert f'<dt>reproduction</dt><dd><a href="#reproductions">{line}</a></dd>' in html
    assert "reproduction on the project&#39;s own machine (not independent)" in html
    assert "source/reproductions/tiny/here.yaml.html" in result.files  # the record is published with its lines
