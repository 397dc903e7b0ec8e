"""The reproduction registry: `reproduce.py --record`, how the build classifies each record, and
the SSH signatures that decide whether a record counts at all (keys made here, thrown away)."""
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
from site_src.honesty import signatures

from .conftest import TINY, run_record, unzip

NAMESPACE = signatures.NAMESPACE


def make_key(folder: Path, name: str) -> Path:
    """A throwaway ed25519 key pair: (private key path); the public half is PATH.pub."""
    if shutil.which("ssh-keygen") is None:
        pytest.fail("ssh-keygen (openssh-client) is needed: `make test` installs it")
    folder.mkdir(parents=True, exist_ok=True)
    key = folder / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True,
                   capture_output=True)
    return key


def public(key: Path) -> str:
    """'KEYTYPE BASE64' of a key pair, as an allowed-signers line ends."""
    return " ".join((key.parent / (key.name + ".pub")).read_text().split()[:2])


def sign(path: Path, key: Path, namespace: str = NAMESPACE) -> Path:
    sig = path.with_name(path.name + ".sig")
    sig.unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-Y", "sign", "-q", "-f", str(key), "-n", namespace, str(path)], check=True,
                   capture_output=True, stdin=subprocess.DEVNULL)
    return sig


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("keys")
    return {name: make_key(folder, name) for name in ("alice", "authors", "mallory")}


def allow(root: Path, keys: dict, text: str | None = None) -> Path:
    """reproductions/allowed_signers: alice and the project's own key (mallory is not listed)."""
    path = root / "reproductions" / "allowed_signers"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text is not None else
                    f"alice@example.org {public(keys['alice'])}\n"
                    f'{signatures.PROJECT_SIGNER} namespaces="{NAMESPACE}" {public(keys["authors"])} the authors\n')
    return path


@pytest.fixture
def recorded(tiny_bundle, tmp_path, keys) -> tuple[Path, str]:
    """(a repository root holding reproductions/tiny/alice.yaml signed by alice, the record's text)
    made from the real zip."""
    folder = unzip(tiny_bundle, tmp_path / "download" / "tiny")
    done = run_record(folder)
    assert done.returncode == 0, done.stderr
    root = tmp_path / "repo"
    (root / "reproductions" / "tiny").mkdir(parents=True)
    allow(root, keys)
    write_signed(root, done.stdout, keys["alice"])
    return root, done.stdout


def write_signed(root: Path, text: str, key: Path | None, name: str = "alice") -> Path:
    """Write reproductions/tiny/NAME.yaml and sign it with `key` (None: leave it unsigned)."""
    path = root / "reproductions" / "tiny" / f"{name}.yaml"
    path.write_text(text)
    path.with_name(path.name + ".sig").unlink(missing_ok=True)
    if key is not None:
        sign(path, key)
    return path


def _load(root: Path, bundle, machines=None) -> tuple[list, Errors]:
    errors = Errors()
    found = rp.load_reproductions(root, "tiny", bundle, errors, machines)
    return found, errors


def _elsewhere(text: str) -> str:
    """The record as another machine would print it (checksum recomputed)."""
    return _resign(re.sub(r'machine_fingerprint: "\w+"', 'machine_fingerprint: "0123456789abcdef"', text))


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
    assert rep.signature.signer == "alice@example.org" and rep.signature.text == "alice@example.org"
    line = rp.reproduction_line(found)
    assert line.startswith("No independent reproduction recorded; 1 run on the project's own machine")


def test_signed_record_from_another_machine_counts_as_independent(recorded, tiny_bundle, keys):
    root, text = recorded
    write_signed(root, _elsewhere(text), keys["alice"])
    found, errors = _load(root, tiny_bundle)
    assert not errors and found[0].independent
    assert rp.reproduction_line(found) == "1 independent reproduction of this bundle, by alice@example.org (1 run)"


def test_machines_file_marks_a_project_machine(recorded, tiny_bundle, keys):
    root, text = recorded
    write_signed(root, _elsewhere(text), keys["alice"])
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


def test_signed_record_with_other_output_is_a_failed_reproduction_not_hidden(recorded, tiny_bundle, keys):
    root, text = recorded
    tampered = re.sub(r"(?m)^(  honesty +)\S+", r"\1+0.999999", text, count=1)
    assert tampered != text
    write_signed(root, _resign(tampered), keys["alice"])
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
    assert errors.lines() == ["reproductions/tiny/alice.yaml:6: is filed under reproductions/tiny/ but records study 'other'"]


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


# ---------------------------------------------------------------- signatures (issue 18, case 5)

def test_a_nonzero_exit_status_is_never_a_reproduction(recorded, tiny_bundle, keys):
    """Issue 18, case 5: `exit_status: 1` with the expected output was counted as a reproduction."""
    root, text = recorded
    failing = _elsewhere(text.replace("exit_status: 0", "exit_status: 1"))
    for key, status in ((None, rp.UNVERIFIED), (keys["alice"], rp.FAILED)):
        write_signed(root, failing, key)
        found, errors = _load(root, tiny_bundle)
        assert not errors
        [rep] = found
        assert rep.status == status and not rep.independent, key
        assert "independent reproduction of" not in rp.reproduction_line(found)
    assert rep.label == "failed reproduction (exit status 1)"


def test_a_forged_unsigned_record_is_listed_as_unverified_never_counted(recorded, tiny_bundle):
    """Issue 18, case 5: anyone could write an 'independent' record, its checksum a plain sha256."""
    root, text = recorded
    write_signed(root, _elsewhere(text), None)
    found, errors = _load(root, tiny_bundle)
    assert not errors
    [rep] = found
    assert rep.status == rp.UNVERIFIED and rep.claims == rp.REPRODUCED and not rep.independent
    assert rep.signature.text == "unsigned"
    assert rep.label == "unverified record, not counted (it shows the expected output)"
    assert rp.reproduction_line(found) == ("No independent reproduction recorded; 1 unverified record (unsigned, "
                                           "or not signed by a listed signer), not counted")


@pytest.mark.parametrize("forge, problem", [
    ("mallory", "unverified: signed by a key not in reproductions/allowed_signers"),
    ("namespace", f"unverified: signed for 'git', not {NAMESPACE}"),
    ("other file", "unverified: the signature by alice@example.org does not match this record"),
    ("edited after", "unverified: the signature by alice@example.org does not match this record"),
    ("garbage", "unverified: the signature is not an SSH signature (-----BEGIN SSH SIGNATURE-----)"),
    ("truncated", "unverified: the signature is a truncated SSH signature"),
    ("huge", "unverified: the signature is over 16,384 bytes, which no SSH signature is"),
])
def test_a_signature_that_does_not_verify_leaves_the_record_unverified(recorded, tiny_bundle, keys, forge, problem):
    root, text = recorded
    path = write_signed(root, _elsewhere(text), keys["alice"])
    sig = path.with_name("alice.yaml.sig")
    if forge == "mallory":
        sign(path, keys["mallory"])
    elif forge == "namespace":
        sign(path, keys["alice"], namespace="git")
    elif forge == "other file":          # alice's good signature of another record, moved here
        other = write_signed(root, _elsewhere(text).replace("exit_status: 0", "exit_status: 0 "), keys["alice"], "bob")
        shutil.copyfile(other.with_name("bob.yaml.sig"), sig)
        other.unlink()
        other.with_name("bob.yaml.sig").unlink()
    elif forge == "edited after":       # signed, then the output changed and the checksum redone
        path.write_text(_resign(re.sub(r"(?m)^(  honesty +)\S+", r"\1+0.999999", path.read_text(), count=1)))
    elif forge == "garbage":
        sig.write_text("not a signature\n")
    elif forge == "huge":
        sig.write_text("-----BEGIN SSH SIGNATURE-----\n" + "QUFB\n" * 5000 + "-----END SSH SIGNATURE-----\n")
    elif forge == "truncated":
        import base64
        body = base64.b64encode(b"SSHSIG" + (1).to_bytes(4, "big") + (999).to_bytes(4, "big")).decode()
        sig.write_text(f"-----BEGIN SSH SIGNATURE-----\n{body}\n-----END SSH SIGNATURE-----\n")
    found, errors = _load(root, tiny_bundle)
    assert not errors
    [rep] = found
    assert rep.signature.problem == problem and rep.status == rp.UNVERIFIED and not rep.independent


def test_the_projects_own_key_makes_a_run_by_the_authors(recorded, tiny_bundle, keys):
    root, text = recorded
    write_signed(root, _elsewhere(text), keys["authors"])
    found, errors = _load(root, tiny_bundle)
    assert not errors
    [rep] = found
    assert rep.by_authors and not rep.independent and rep.signature.project
    assert rep.signature.text == "authors@preference-sites (the project's own key)"
    assert rep.label == "reproduction by the authors (not independent)"
    assert rp.reproduction_line(found) == ("No independent reproduction recorded; 1 run by the authors matched the "
                                           "expected output (not independent)")


def test_a_browser_run_unsigned_is_accepted_and_listed_as_unverified(recorded, tiny_bundle, monkeypatch):
    """The page's "Run the check here" (Pyodide) makes a record no key signs: accepted as input,
    listed, never counted."""
    root, text = recorded
    data = yaml.safe_load(text)
    monkeypatch.setattr(kit_record.platform, "platform", lambda: "Emscripten-3.1.58-wasm32-32bit")
    monkeypatch.setattr(kit_record.platform, "node", lambda: "")
    monkeypatch.setattr(kit_record, "machine_fingerprint", lambda: "00000000000000b0")
    browser = kit_record.render("tiny", list(data["files"].items()), 0, data["output"], note="browser run, unsigned")
    assert browser.startswith("# browser run, unsigned\n# A reproduction record")
    write_signed(root, browser, None, name="browser-run")
    (root / "reproductions" / "tiny" / "alice.yaml").unlink()
    (root / "reproductions" / "tiny" / "alice.yaml.sig").unlink()
    found, errors = _load(root, tiny_bundle)
    assert not errors
    [rep] = found
    assert rep.status == rp.UNVERIFIED and rep.platform.startswith("Emscripten") and not rep.independent


@pytest.mark.parametrize("line, message", [
    ('alice@example.org cert-authority {key}', "cert-authority is not accepted: list each signer's own key"),
    ('alice@example.org valid-before="20300101" {key}', "valid-before is not accepted"),
    ('alice@example.org namespaces="git" {key}', f'namespaces="git" leaves out {NAMESPACE}'),
    ('alice@example.org no-touch-required {key}', "unknown option 'no-touch-required'"),
    ('*@example.org {key}', "principal '*@example.org' must be one name"),
    ('alice@example.org,bob@example.org {key}', "must be one name"),
    ('alice@example.org ssh-ed25519 not-base64!', "the key is not base64"),
    ('alice@example.org ssh-rsa {blob}', "the key is not a ssh-rsa key"),
    ('alice@example.org', "an allowed signer is PRINCIPAL"),
])
def test_an_allowed_signers_line_it_cannot_vouch_for_is_refused_with_its_line(recorded, tiny_bundle, keys, line,
                                                                              message):
    root, _text = recorded
    key = public(keys["alice"])
    allow(root, keys, "# signers\n\n" + line.format(key=key, blob=key.split()[1]) + "\n")
    _found, errors = _load(root, tiny_bundle)
    assert len(errors) == 1 and errors.lines()[0].startswith("reproductions/allowed_signers:3: "), errors.lines()
    assert message in errors.lines()[0]


def test_a_key_listed_twice_is_refused(recorded, tiny_bundle, keys):
    root, _text = recorded
    key = public(keys["alice"])
    allow(root, keys, f"alice@example.org {key}\nsomeone@example.org {key}\n")
    _found, errors = _load(root, tiny_bundle)
    assert errors.lines() == ["reproductions/allowed_signers:2: lists the key of alice@example.org (line 1) again: "
                              "one key names one signer"]


def test_namespaces_option_naming_this_namespace_is_accepted(recorded, tiny_bundle, keys):
    root, _text = recorded
    allow(root, keys, f'alice@example.org namespaces="git,{NAMESPACE}" {public(keys["alice"])} a comment\n')
    found, errors = _load(root, tiny_bundle)
    assert not errors and found[0].signature.signer == "alice@example.org"


def test_a_signature_without_its_record_is_refused(recorded, tiny_bundle):
    root, _text = recorded
    shutil.copyfile(root / "reproductions" / "tiny" / "alice.yaml.sig", root / "reproductions" / "tiny" / "gone.yaml.sig")
    found, errors = _load(root, tiny_bundle)
    assert errors.lines() == ["reproductions/tiny/gone.yaml.sig: is a signature of gone.yaml, which is not a record here"]
    assert len(found) == 1


def test_symlinked_records_and_signatures_are_refused(recorded, tiny_bundle, tmp_path):
    """The path policy (tracked, no symbolic link) holds for records and signatures alike."""
    from site_src.paths import RepoFiles
    root, _text = recorded
    folder = root / "reproductions" / "tiny"
    (root / "elsewhere").mkdir()
    for name in ("alice.yaml", "alice.yaml.sig"):
        shutil.move(folder / name, root / "elsewhere" / name)
        (folder / name).symlink_to(Path("..", "..", "elsewhere", name))
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    errors = Errors()
    found = rp.load_reproductions(root, "tiny", tiny_bundle, errors, refusal=RepoFiles(root).refusal)
    assert found == []
    assert errors.lines() == [f"reproductions/tiny/{name}: is a symbolic link: the build never follows links "
                              "(commit the file itself)" for name in ("alice.yaml", "alice.yaml.sig")]


def test_without_ssh_keygen_a_signed_record_is_one_error_line(recorded, tiny_bundle, monkeypatch):
    monkeypatch.setattr(signatures, "keygen_path", lambda: None)
    found, errors = _load(recorded[0], tiny_bundle)
    assert found == [] and errors.lines() == [
        "reproductions/tiny/: verifying a signed record needs ssh-keygen, which is not installed "
        "(Debian: apt-get install openssh-client)"]


@pytest.mark.parametrize("data, message", [
    (b"alice@example.org \xff\xfe\n", "is not UTF-8 text (byte 18)"),
    (b"# " + b"x" * 70_000 + b"\n", "is 70,003 bytes; an allowed-signers file may hold 65,536"),
])
def test_an_unreadable_allowed_signers_file_is_one_error(recorded, tiny_bundle, keys, data, message):
    root, _text = recorded
    (root / "reproductions" / "allowed_signers").write_bytes(data)
    found, errors = _load(root, tiny_bundle)
    assert errors.lines() == [f"reproductions/allowed_signers: {message}"]
    assert found[0].status == rp.UNVERIFIED     # no signer can be trusted: listed, not counted


# ---------------------------------------------------------------- counted by signer and run (issue 28, item 1)

def _second_run(text: str) -> str:
    """Another run on the same other machine, a minute later (checksum recomputed)."""
    return _resign(re.sub(r'date: "[^"]+"', 'date: "2031-01-01T00:01:00Z"', _elsewhere(text)))


def test_one_signed_record_under_two_names_is_one_reproduction(recorded, tiny_bundle, keys):
    """Issue 28, item 1: the same bytes and signature under two names showed "2 independent reproductions"."""
    root, text = recorded
    path = write_signed(root, _elsewhere(text), keys["alice"])
    shutil.copyfile(path, path.with_name("alice-copy.yaml"))
    shutil.copyfile(path.with_name("alice.yaml.sig"), path.with_name("alice-copy.yaml.sig"))
    found, errors = _load(root, tiny_bundle)
    assert not errors and [r.independent for r in found] == [True, True]
    assert rp.reproduction_line(found) == "1 independent reproduction of this bundle, by alice@example.org (1 run)"
    first, copy = found       # listed by name: alice-copy.yaml, then alice.yaml
    assert not first.same_run_as and copy.same_run_as == first.name == "alice-copy"
    assert copy.label == "independent reproduction; the same run as alice-copy, counted once"


def test_the_authors_record_copied_is_one_run_by_the_authors(recorded, tiny_bundle, keys):
    root, text = recorded
    write_signed(root, _elsewhere(text), keys["authors"])
    write_signed(root, _resign("# copied, with a note of its own\n" + _elsewhere(text)), keys["authors"],
                 name="authors-again")                      # another comment line: still the same run
    found, errors = _load(root, tiny_bundle)
    assert not errors and len(found) == 2
    assert rp.reproduction_line(found) == ("No independent reproduction recorded; 1 run by the authors matched the "
                                           "expected output (not independent)")


def test_two_runs_by_one_signer_are_one_independent_reproduction(recorded, tiny_bundle, keys):
    """Issue 28, item 1: two runs by one signer counted as two independent reproductions."""
    root, text = recorded
    write_signed(root, _elsewhere(text), keys["alice"])
    write_signed(root, _second_run(text), keys["alice"], name="alice-later")
    found, errors = _load(root, tiny_bundle)
    assert not errors and all(r.independent and not r.same_run_as for r in found)
    assert rp.reproduction_line(found) == "1 independent reproduction of this bundle, by alice@example.org (2 runs)"


def test_one_run_signed_by_two_keys_counts_once(recorded, tiny_bundle, keys):
    """A second listed signer who signs a copy of alice's run did not run it."""
    root, text = recorded
    allow(root, keys, f"alice@example.org {public(keys['alice'])}\nbob@example.org {public(keys['mallory'])}\n")
    write_signed(root, _elsewhere(text), keys["alice"])
    write_signed(root, _elsewhere(text), keys["mallory"], name="bob")
    found, errors = _load(root, tiny_bundle)
    assert not errors and {r.signature.signer for r in found} == {"alice@example.org", "bob@example.org"}
    assert rp.reproduction_line(found) == (
        "1 independent reproduction of this bundle, by alice@example.org (1 run) and bob@example.org (1 run); "
        "a run signed by more than one key counts once")
    write_signed(root, _second_run(text), keys["mallory"], name="bob")     # bob's own run: two signers now
    found, _errors = _load(root, tiny_bundle)
    assert rp.reproduction_line(found) == ("2 independent reproductions of this bundle, by alice@example.org (1 run) "
                                           "and bob@example.org (1 run)")


def test_an_accepted_signature_is_not_asked_again_and_an_edit_is(recorded, tiny_bundle, keys, monkeypatch):
    """ssh-keygen's acceptances are kept (signatures.GoodSignatures): the next build does not run it
    for the same record, signature and key; a record edited after it was signed is asked again and
    fails, though the old acceptance is still kept."""
    root, text = recorded
    write_signed(root, _elsewhere(text), keys["alice"])
    found, errors = _load(root, tiny_bundle)
    assert not errors and found[0].signature.signer == "alice@example.org"
    kept = signatures.GoodSignatures(root)
    assert list(kept.values()) == ["alice@example.org"]
    runs = []
    real_run = subprocess.run
    monkeypatch.setattr(signatures.subprocess, "run", lambda *a, **k: runs.append(a) or real_run(*a, **k))
    found, errors = _load(root, tiny_bundle)
    assert not errors and found[0].signature.signer == "alice@example.org" and runs == []
    path = root / "reproductions" / "tiny" / "alice.yaml"
    path.write_text(_resign(_elsewhere(text).replace('hostname: "', 'hostname: "edited-', 1)))
    found, _ = _load(root, tiny_bundle)
    assert len(runs) == 1 and not found[0].signature.verified
    assert list(signatures.GoodSignatures(root).values()) == ["alice@example.org"]
