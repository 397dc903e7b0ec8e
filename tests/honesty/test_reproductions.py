"""The reproduction registry: `reproduce.py --record`, and how the build classifies each record."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bundle_kit import record as kit_record
from site_src import bundles
from site_src.errors import Errors
from site_src.honesty import reproductions as rp

from .conftest import TINY, run_record, unzip


@pytest.fixture
def recorded(tiny_bundle, tmp_path) -> tuple[Path, str]:
    """(a repository root holding reproductions/tiny/, the record's text) made from the real zip."""
    folder = unzip(tiny_bundle, tmp_path / "download" / "tiny")
    done = run_record(folder)
    assert done.returncode == 0, done.stderr
    root = tmp_path / "repo"
    (root / "reproductions" / "tiny").mkdir(parents=True)
    (root / "reproductions" / "tiny" / "alice.yaml").write_text(done.stdout)
    return root, done.stdout


def _load(root: Path, bundle, machines=None) -> tuple[list, Errors]:
    errors = Errors()
    found = rp.load_reproductions(root, "tiny", bundle, errors, machines)
    return found, errors


def _resign(text: str) -> str:
    """Recompute the checksum after an edit, as someone covering their tracks would."""
    above, _sum, _line = kit_record.split_checksum(text)
    return above + f'checksum: "{kit_record.checksum(above)}"\n'


def test_record_holds_what_the_issue_asks_and_parses(recorded, tiny_bundle):
    _root, text = recorded
    data = yaml.safe_load(text)
    for key in ("platform", "python", "date", "bundle_files_sha256", "output", "machine_fingerprint"):
        assert data[key]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", data["date"])
    assert data["output"] == tiny_bundle.expected_output  # the full output, exactly
    assert data["bundle_files_sha256"] == rp.bundle_listing_digest(tiny_bundle)
    assert sorted(data["files"]) == sorted(f.name for f in tiny_bundle.files)


def test_record_of_the_current_bundle_on_this_machine_is_not_independent(recorded, tiny_bundle):
    found, errors = _load(recorded[0], tiny_bundle)
    assert not errors
    [rep] = found
    assert rep.status == rp.REPRODUCED and rep.same_machine and not rep.independent
    assert rep.label == "reproduction on the project's own machine (not independent)"
    line = rp.reproduction_line(found)
    assert line.startswith("No independent reproduction recorded; 1 run on the project's own machine")


def test_record_from_another_machine_counts_as_independent(recorded, tiny_bundle):
    root, text = recorded
    other = re.sub(r'machine_fingerprint: "\w+"', 'machine_fingerprint: "0123456789abcdef"', text)
    (root / "reproductions" / "tiny" / "alice.yaml").write_text(_resign(other))
    found, errors = _load(root, tiny_bundle)
    assert not errors and found[0].independent
    assert rp.reproduction_line(found) == "1 independent reproduction of this bundle"


def test_machines_file_marks_a_project_machine(recorded, tiny_bundle):
    root, text = recorded
    other = re.sub(r'machine_fingerprint: "\w+"', 'machine_fingerprint: "0123456789abcdef"', text)
    (root / "reproductions" / "tiny" / "alice.yaml").write_text(_resign(other))
    (root / "reproductions" / "machines.yaml").write_text(
        "machines:\n  - fingerprint: 0123456789abcdef\n    note: the CI runner\n")
    found, errors = _load(root, tiny_bundle)
    assert not errors and found[0].same_machine and not found[0].independent


def test_no_records_no_reproduction(tmp_path, tiny_bundle):
    found, errors = _load(tmp_path, tiny_bundle)
    assert found == [] and not errors
    assert rp.reproduction_line(found) == "No independent reproduction recorded"


def test_hand_edited_record_is_refused_naming_its_line(recorded, tiny_bundle):
    root, text = recorded
    tampered = text.replace("within tolerance", "within  tolerance", 1)
    path = root / "reproductions" / "tiny" / "alice.yaml"
    path.write_text(tampered)
    found, errors = _load(root, tiny_bundle)
    assert found == []
    checksum_line = tampered.splitlines().index(next(t for t in tampered.splitlines() if t.startswith("checksum:"))) + 1
    assert errors.lines() == [f"reproductions/tiny/alice.yaml:{checksum_line}: was edited after reproduce.py wrote it: "
                              "its checksum does not match the lines above (a record is committed exactly as printed)"]


def test_resigned_record_with_other_output_is_a_failed_reproduction_not_hidden(recorded, tiny_bundle):
    root, text = recorded
    tampered = re.sub(r"(?m)^(  honesty +)\S+", r"\1+0.999999", text, count=1)
    assert tampered != text
    (root / "reproductions" / "tiny" / "alice.yaml").write_text(_resign(tampered))
    found, errors = _load(root, tiny_bundle)
    assert not errors
    [rep] = found
    assert rep.status == rp.FAILED and "+0.999999" in rep.output_diff
    assert "1 failed reproduction" in rp.reproduction_line(found)


def test_record_of_an_earlier_bundle_is_listed_as_such(recorded, tmp_path):
    root, _text = recorded
    study = tmp_path / "later" / "bundles" / "tiny"
    shutil.copytree(TINY, study)
    with (study / "README.md").open("a") as handle:
        handle.write("\nA later line.\n")
    later = bundles.build_bundle(study, tmp_path / "later")
    found, errors = _load(root, later)
    assert not errors
    [rep] = found
    assert rep.status == rp.EARLIER and rep.differing_files == ("README.md",)
    assert rp.reproduction_line(found) == "No independent reproduction recorded; 1 run of an earlier bundle"


def test_listing_does_not_match_its_files(recorded, tiny_bundle):
    root, text = recorded
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.startswith('  "golden.json"'))
    tampered = re.sub(r'(?m)^(  "golden.json": )"\w+"', r'\g<1>"' + "0" * 64 + '"', text)
    (root / "reproductions" / "tiny" / "alice.yaml").write_text(_resign(tampered))
    _found, errors = _load(root, tiny_bundle)
    digest_line = next(i for i, t in enumerate(text.splitlines(), 1) if t.startswith("bundle_files_sha256"))
    assert errors.lines() == [f"reproductions/tiny/alice.yaml:{digest_line}: bundle_files_sha256 is not the digest "
                              "of the files listed under it"]
    assert line > digest_line


def test_record_filed_under_another_study(recorded, tiny_bundle):
    root, text = recorded
    (root / "reproductions" / "tiny" / "alice.yaml").write_text(_resign(text.replace('study: "tiny"', 'study: "other"')))
    _found, errors = _load(root, tiny_bundle)
    assert errors.lines() == ["reproductions/tiny/alice.yaml:4: is filed under reproductions/tiny/ but records study 'other'"]


@pytest.mark.parametrize("text, message", [
    ("a: &x [1]\nb: *x\n", ":1: uses a YAML anchor or alias"),
    ("- 1\n", ":1: must be a YAML mapping of fields"),
    ("a: [\n", "is not valid YAML"),
])
def test_malformed_record_names_its_file(tmp_path, tiny_bundle, text, message):
    (tmp_path / "reproductions" / "tiny").mkdir(parents=True)
    (tmp_path / "reproductions" / "tiny" / "bad.yaml").write_text(text)
    _found, errors = _load(tmp_path, tiny_bundle)
    assert len(errors) == 1 and errors.lines()[0].startswith("reproductions/tiny/bad.yaml")
    assert message in errors.lines()[0]


def test_record_redirected_into_the_folder_leaves_itself_out(tiny_bundle, tmp_path):
    folder = unzip(tiny_bundle, tmp_path / "tiny")
    with (folder / "my-record.yaml").open("w") as out:
        done = subprocess.run([sys.executable, "-I", "-S", "reproduce.py", "--record"], cwd=folder,
                              stdout=out, stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    data = yaml.safe_load((folder / "my-record.yaml").read_text())
    assert "my-record.yaml" not in data["files"]
    assert data["bundle_files_sha256"] == rp.bundle_listing_digest(tiny_bundle)


def test_a_failing_check_is_recorded_with_its_exit_status(tiny_bundle, tmp_path):
    folder = unzip(tiny_bundle, tmp_path / "tiny")
    golden = folder / "golden.json"
    golden.write_text(golden.read_text().replace('"honesty": -0.028571', '"honesty": 0.9'))
    done = run_record(folder)
    assert done.returncode == 1
    data = yaml.safe_load(done.stdout)
    assert data["exit_status"] == 1 and "per_dimension_rho/honesty disagrees by" in data["output"]
    assert data["files"]["golden.json"] != next(f.sha256 for f in tiny_bundle.files if f.name == "golden.json")


def test_listing_digest_is_what_sha256sum_prints(tiny_bundle, tmp_path):
    if shutil.which("sha256sum") is None:
        pytest.fail("sha256sum (coreutils) is needed to check the documented shell command")
    folder = unzip(tiny_bundle, tmp_path / "tiny")
    done = subprocess.run("find . -type f ! -path '*/__pycache__/*' | sed 's|^\\./||' | LC_ALL=C sort "
                          "| xargs sha256sum | sha256sum", shell=True, cwd=folder, capture_output=True, text=True)
    assert done.stdout.split()[0] == rp.bundle_listing_digest(tiny_bundle)


def test_record_with_a_duplicate_key_is_refused(recorded, tiny_bundle):
    root, text = recorded
    (root / "reproductions" / "tiny" / "alice.yaml").write_text('study: "tiny"\n' + text)
    _found, errors = _load(root, tiny_bundle)
    assert len(errors) == 1 and errors.lines()[0].startswith("reproductions/tiny/alice.yaml:") and "study" in errors.lines()[0]
