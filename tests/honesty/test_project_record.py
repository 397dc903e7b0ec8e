"""`build.py record STUDY --key KEY`: the authors' signed record, made from the built site's zip as a
reader makes one (fresh folder, unzip, `python3 -I -S reproduce.py --record`), then signed."""
from __future__ import annotations

import subprocess
import sys

import pytest

from site_src.errors import Errors
from site_src.honesty import reproductions as rp
from site_src.honesty import signatures

from .conftest import REPO, make_study_site
from .test_reproductions import make_key, public


def _cli(root, *args):
    return subprocess.run([sys.executable, str(REPO / "build.py"), "--root", str(root), *args], capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A built study site whose allowed_signers names a throwaway key as the project's own."""
    tmp = tmp_path_factory.mktemp("site")
    root = make_study_site(tmp)
    key = make_key(tmp / "keys", "authors")
    (root / "reproductions").mkdir()
    (root / "reproductions" / "allowed_signers").write_text(f"{signatures.PROJECT_SIGNER} {public(key)}\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    done = _cli(root)
    assert done.returncode == 0, done.stderr
    return root, key


def test_the_command_records_and_signs_a_run_by_the_authors(built):
    root, key = built
    done = _cli(root, "record", "tiny", "--key", str(key), "--name", "authors-test")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("recorded reproductions/tiny/authors-test.yaml (the check exited 0) and signed it as "
                           "authors@preference-sites: commit reproductions/tiny/authors-test.yaml and "
                           "reproductions/tiny/authors-test.yaml.sig\n")
    from site_src import bundles
    bundle = bundles.build_bundle(root / "bundles" / "tiny", root)
    errors = Errors()
    [rep] = rp.load_reproductions(root, "tiny", bundle, errors)
    assert not errors and rep.by_authors and rep.status == rp.REPRODUCED
    assert "python3" not in rep.python and rep.python.endswith("(CPython)")
    again = _cli(root, "record", "tiny", "--key", str(key), "--name", "authors-test")
    assert again.returncode == 1 and "already exists: choose another --name" in again.stderr
    for path in (root / "reproductions" / "tiny").iterdir():
        path.unlink()


def test_a_key_not_in_allowed_signers_leaves_nothing_behind(built, tmp_path):
    root, _key = built
    stranger = make_key(tmp_path, "stranger")
    done = _cli(root, "record", "tiny", "--key", str(stranger), "--name", "stranger")
    assert done.returncode == 1
    assert done.stderr == ("error: the new record's signature is signed by a key not in reproductions/allowed_signers: "
                           "add the key's public half to reproductions/allowed_signers first\n")
    assert not (root / "reproductions" / "tiny" / "stranger.yaml").exists()
    assert not (root / "reproductions" / "tiny" / "stranger.yaml.sig").exists()


@pytest.mark.parametrize("args, status, message", [
    (["../x"], 2, "build.py record: error: argument study: study '../x' must match [a-z0-9][a-z0-9_-]*"),
    (["tiny", "--name", "A/B"], 2, "build.py record: error: argument --name: record name 'A/B' must match"),
    (["tiny", "--key", "/nonexistent/key"], 2, "build.py record: error: argument --key: '/nonexistent/key' is not a file"),
    (["nosuch"], 1, "public/bundles/nosuch.zip not found: build the site first"),
])
def test_bad_input_is_one_line(built, args, status, message):
    root, key = built
    done = _cli(root, "record", "--key", str(key), *args)
    assert done.returncode == status and len(done.stderr.splitlines()) == 1 and message in done.stderr, done.stderr
