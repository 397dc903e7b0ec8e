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
    assert "<dt>reproduction</dt>\n<dd>No independent reproduction recorded</dd>" in html


def _site_with_a_recorded_run(tmp_path, tiny_bundle, signer: str = "alice@example.org"):
    """A study site whose reproductions/ holds one record of its bundle run here, signed by a
    throwaway key listed as `signer` ('' leaves it unsigned)."""
    from .test_reproductions import make_key, public, sign
    root = make_study_site(tmp_path)
    done = run_record(unzip(tiny_bundle, tmp_path / "dl" / "tiny"))
    (root / "reproductions" / "tiny").mkdir(parents=True)
    record = root / "reproductions" / "tiny" / "here.yaml"
    record.write_text(done.stdout)
    if signer:
        key = make_key(tmp_path / "keys", "signer")
        (root / "reproductions" / "allowed_signers").write_text(f"{signer} {public(key)}\n")
        sign(record, key)
    return root


def test_header_line_and_registry_come_from_the_records(tmp_path, tiny_bundle):
    root = _site_with_a_recorded_run(tmp_path, tiny_bundle)
    result, errors = build_site(root)
    assert errors == []
    html = result.files["studies/tiny/index.html"].decode()
    line = "No independent reproduction recorded; 1 run on the project&#39;s own machine matched the expected output (not independent)"
    assert f'<dt>reproduction</dt>\n<dd><a href="#reproductions">{line}</a></dd>' in html
    assert "reproduction on the project&#39;s own machine (not independent)" in html
    assert 'signed by <a href="../../source/reproductions/tiny/here.yaml.sig">alice@example.org</a>;' in html
    assert "source/reproductions/tiny/here.yaml.html" in result.files  # the record is published with its lines
    assert "source/reproductions/tiny/here.yaml.sig" in result.files  # and its signature, to verify by hand
    assert "source/reproductions/allowed_signers" in result.files


def test_the_authors_runs_and_unsigned_runs_are_named_so(tmp_path, tiny_bundle):
    root = _site_with_a_recorded_run(tmp_path / "a", tiny_bundle, signer="authors@preference-sites")
    html = build_site(root)[0].files["studies/tiny/index.html"].decode()
    assert "1 run by the authors matched the expected output (not independent)" in html
    assert "authors@preference-sites (the project&#39;s own key)" in html
    root = _site_with_a_recorded_run(tmp_path / "u", tiny_bundle, signer="")
    result, errors = build_site(root)
    html = result.files["studies/tiny/index.html"].decode().replace("<wbr>", "")  # break points in long code
    assert errors == [] and "1 unverified record (unsigned, or not signed by a listed signer), not counted" in html
    assert '<span class="record-facts">unsigned;' in html and "<code>reproductions/allowed_signers</code>" in html


def _registered_site(tmp_path, predictions: dict[str, str]):
    """A study site in git whose records (id -> prediction) were committed before everything else."""
    from .gitrepo import Repo
    root = make_study_site(tmp_path)
    repo = Repo(root)
    for reg_id, prediction in predictions.items():
        repo.write(f"registrations/{reg_id}.yaml", (
            f"id: {reg_id}\nstudy: tiny\nclaim: A claim about the mean rho.\nquantity: mean_rho\n"
            f"prediction: {prediction}\nkill: {{quantity: counts/pairs, op: '<', bound: 2, meaning: too few pairs}}\n"
            "rationale: A test.\nauthor: tester\n"))
    repo.commit("freeze", "registrations")
    repo.commit("everything else", ".")
    return root


def test_registration_pages_and_header(tmp_path):
    root = _registered_site(tmp_path, {"tiny-high": '{op: ">", bound: 0.9}', "tiny-low": '{op: "<", bound: 0.9}'})
    result, errors = build_site(root)
    assert errors == []
    high = result.files["registrations/tiny-high/index.html"].decode()
    low = result.files["registrations/tiny-low/index.html"].decode()
    # a verdict is text, colour and a symbol (templates/partials/chips.html), never colour alone
    assert '<span class="chip verdict verdict-refuted"><span class="chip-mark" aria-hidden="true" data-pagefind-ignore>✗</span> refuted</span>' in high
    assert '<span class="chip verdict verdict-confirmed"><span class="chip-mark" aria-hidden="true" data-pagefind-ignore>✓</span> confirmed</span>' in low
    # exactly as prominent: the two pages differ only where their texts differ
    assert high.count("chip verdict") == low.count("chip verdict")
    assert high.replace("refuted", "X").count("<") == low.replace("confirmed", "X").count("<")
    assert 'class="ref" href="../../source/bundles/tiny/golden.json.html#L' in high   # the verdict's receipt
    assert 'href="../../studies/tiny/"' in high                        # a link to the study
    index = result.files["registrations/index.html"].decode()
    assert index.index("tiny-high") < index.index("tiny-low")          # by id, not by verdict
    study = result.files["studies/tiny/index.html"].decode()
    assert '<a href="../../registrations/tiny-high/">tiny-high</a> <span class="chip verdict verdict-refuted">' in study
    assert "source/registrations/tiny-high.yaml.html" in result.files


def test_a_bad_registration_fails_the_build(tmp_path):
    root = _registered_site(tmp_path, {"tiny-high": '{op: ">", bound: 0.9}'})
    path = root / "registrations" / "tiny-high.yaml"
    path.write_text(path.read_text().replace("0.9", "-0.9"))
    result, errors = build_site(root)
    assert len(errors) == 1 and errors[0].startswith("registrations/tiny-high.yaml:5: was edited after its freeze")


def test_page_names_the_zip_each_matching_record_ran(tmp_path, tiny_bundle):
    root = _site_with_a_recorded_run(tmp_path, tiny_bundle)
    result, errors = build_site(root)
    html = result.files["studies/tiny/index.html"].decode()
    assert errors == [] and f"this bundle: zip sha256 <code>{tiny_bundle.sha256[:16]}</code>" in html


def test_golden_tolerance_of_10_with_a_tampered_rho_fails_the_site_build(tmp_path):
    root = make_study_site(tmp_path)
    golden = root / "bundles" / "tiny" / "golden.json"
    text = golden.read_text().replace('"honesty": -0.028571', '"honesty": -0.99')
    golden.write_text(text.replace('"tolerance": 1e-06', '"tolerance": 10'))
    _result, errors = build_site(root)
    assert len(errors) == 1 and errors[0].startswith("content/studies/tiny.md:9: bundle 'tiny': ")
    assert "golden.json:6: tolerance is 10, but the check's bar is contract.py TOLERANCE = 1e-06" in errors[0]
