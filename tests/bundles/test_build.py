"""build_bundle: byte-identical zips, the kit copied in, the real expected output, the commit."""
from __future__ import annotations

import hashlib
import os
import io
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from site_src import bundles

REPO = Path(__file__).resolve().parents[2]
TINY = Path(__file__).resolve().parent / "fixtures" / "tiny"


@pytest.fixture(scope="module")
def tiny() -> bundles.Bundle:
    return bundles.build_bundle(TINY, REPO)


def test_two_builds_are_byte_identical(tiny):
    again = bundles.build_bundle(TINY, REPO)
    assert again.zip_bytes == tiny.zip_bytes
    assert again.sha256 == tiny.sha256 == hashlib.sha256(tiny.zip_bytes).hexdigest()
    assert again.expected_output == tiny.expected_output


def test_build_from_another_working_directory(tiny, tmp_path):
    code = ("import sys; from pathlib import Path; from site_src import bundles; "
            "b = bundles.build_bundle(Path(sys.argv[1]), Path(sys.argv[2])); "
            "sys.stdout.write(b.sha256)")
    # this checkout's site_src, not whichever one the venv's editable install points at
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code, str(TINY), str(REPO)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == tiny.sha256


def test_same_bytes_from_another_checkout_with_crlf_text(tiny, tmp_path):
    """Another machine: another absolute path, no git, and text checked out with CRLF endings."""
    study = tmp_path / "elsewhere" / "tests" / "bundles" / "fixtures" / "tiny"
    shutil.copytree(TINY, study)
    for path in study.iterdir():
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    (study / ".DS_Store").write_bytes(b"junk")
    (study / "__pycache__").mkdir()
    (study / "__pycache__" / "x.pyc").write_bytes(b"junk")
    other = bundles.build_bundle(study, tmp_path / "elsewhere")
    assert other.zip_bytes == tiny.zip_bytes
    assert other.commit == "unknown (not a git checkout)"


def test_zip_writer_is_pinned():
    """The writer's bytes for fixed input: this sha must hold on every Python version and OS."""
    data = bundles.deterministic_zip([("a.txt", b"alpha\n"), ("dir/b.json", b"{}\n")])
    assert hashlib.sha256(data).hexdigest() == "912ae200c1dfe1042000d0ec9f2f099ed8335f04d4a0ff3398faf175218d07b4"


def test_zip_layout(tiny):
    with zipfile.ZipFile(io.BytesIO(tiny.zip_bytes)) as archive:
        assert archive.testzip() is None
        infos = archive.infolist()
        names = [info.filename for info in infos]
        assert names == sorted(names) == [f.name for f in tiny.files]
        assert names == ["README.md", "attribution_per_pair.jsonl", "contract.py", "golden.json", "hiddenkeys.py",
                         "keyrecovery.py", "localize.py",
                         "patching_per_pair.jsonl", "rankstats.py", "record.py", "reproduce.py"]
        for info in infos:
            assert info.date_time == (1980, 1, 1, 0, 0, 0)
            assert info.external_attr >> 16 == 0o100644
            assert info.compress_type == zipfile.ZIP_STORED
            assert info.create_system == 3
        # the kit is copied from bundle_kit/ at build time, never a hand-kept copy
        for kit in bundles.KIT_FILES:
            assert archive.read(kit) == (REPO / "bundle_kit" / kit).read_bytes()
        for f in tiny.files:
            assert hashlib.sha256(archive.read(f.name)).hexdigest() == f.sha256
            assert len(archive.read(f.name)) == f.size
    assert tiny.size == len(tiny.zip_bytes)


def test_page_command_works_literally(tiny, tmp_path):
    # the page tells readers to run unzip: a machine without it cannot check that (make test installs it)
    assert shutil.which("unzip"), "the study page's command needs `unzip`: apt-get install unzip (or make test)"
    (tmp_path / "tiny.zip").write_bytes(tiny.zip_bytes)
    command = tiny.run_command.replace("python ", f"{sys.executable} ", 1)
    assert command.startswith("unzip tiny.zip -d tiny && ")
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(tiny.expected_output)  # unzip prints its own lines first


def test_command_without_unzip_works(tiny, tmp_path):
    (tmp_path / "tiny.zip").write_bytes(tiny.zip_bytes)
    command = tiny.run_command_no_unzip.replace("python ", f"{sys.executable} ")
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == tiny.expected_output


def test_expected_output_is_the_real_stdout(tiny, tmp_path):
    folder = tmp_path / "x"
    with zipfile.ZipFile(io.BytesIO(tiny.zip_bytes)) as archive:
        archive.extractall(folder)
    done = subprocess.run([sys.executable, "-I", "-S", "reproduce.py"], cwd=folder, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout == tiny.expected_output
    assert "within tolerance                       yes" in tiny.expected_output


def test_failing_check_fails_the_build_naming_the_bundle(tmp_path):
    study = tmp_path / "bundles" / "broken"
    shutil.copytree(TINY, study)
    golden = study / "golden.json"
    golden.write_text(golden.read_text().replace('"honesty": -0.028571', '"honesty": 0.9'))
    with pytest.raises(bundles.BundleError, match=r"bundle broken: reproduce.py exited 1:(.|\n)*golden.json:\d+: per_dimension_rho/honesty"):
        bundles.build_bundle(study, tmp_path)


def test_golden_tolerance_of_10_and_a_tampered_rho_fail_the_build(tmp_path):
    study = tmp_path / "bundles" / "loose"
    shutil.copytree(TINY, study)
    golden = study / "golden.json"
    text = golden.read_text().replace('"honesty": -0.028571', '"honesty": -0.99')
    golden.write_text(text.replace('"tolerance": 1e-06', '"tolerance": 10'))
    with pytest.raises(bundles.BundleError, match=r"bundle loose: reproduce.py exited 2:(.|\n)*golden.json:\d+: tolerance is 10, but"):
        bundles.build_bundle(study, tmp_path)


def test_hand_kept_kit_copy_is_refused(tmp_path):
    study = tmp_path / "bundles" / "tiny"
    shutil.copytree(TINY, study)
    shutil.copy(REPO / "bundle_kit" / "rankstats.py", study / "rankstats.py")
    with pytest.raises(bundles.BundleError, match="bundle tiny: rankstats.py is copied from bundle_kit/"):
        bundles.build_bundle(study, tmp_path)


def test_study_without_readme_is_refused(tmp_path):
    study = tmp_path / "bundles" / "tiny"
    shutil.copytree(TINY, study)
    (study / "README.md").unlink()
    with pytest.raises(bundles.BundleError, match="bundle tiny: .* lacks README.md"):
        bundles.build_bundle(study, tmp_path)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                   check=True, capture_output=True)


def test_commit_is_head_and_marks_a_dirty_tree(tmp_path):
    assert shutil.which("git"), "the build reads only git-tracked files: git must be installed"
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "commit", "-q", "-m", "one")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert bundles.git_commit(tmp_path) == head
    (tmp_path / "a.txt").write_text("two\n")
    assert bundles.git_commit(tmp_path) == head + "+dirty"
