"""The no-op check (site_src/incremental.py, up_to_date) trusts no output it cannot verify: a page
edited in place, its size and mtime restored, is found and rebuilt (issue 18, case 7)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _site(tmp_path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(REPO / "tests" / "generator" / "fixtures" / "repo", root)
    shutil.copytree(REPO / "templates", root / "templates")
    (root / ".gitignore").write_text("/public\n/.public.builds/\n.cache/\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    return root


def _build(root: Path) -> str:
    done = subprocess.run([sys.executable, str(REPO / "build.py"), "--root", str(root)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _tamper_in_place(path: Path) -> bytes:
    """Change bytes of the file without changing its size, then put its mtime back."""
    good = path.read_bytes()
    info = os.stat(path)
    at = good.index(b"<title>") + len(b"<title>")
    bad = good[:at] + bytes([good[at] ^ 0x20]) + good[at + 1:]
    assert len(bad) == len(good) and bad != good
    with open(path, "r+b") as handle:    # in place: the same inode
        handle.write(bad)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (info.st_size, info.st_mtime_ns, info.st_ino)
    return good


def test_a_page_tampered_in_place_with_its_mtime_restored_is_rebuilt(tmp_path):
    root = _site(tmp_path)
    assert _build(root).startswith("build ok: ")
    assert "up to date" in _build(root)                      # the no-op works
    index = root / "public" / "index.html"
    good = _tamper_in_place(index)
    said = _build(root)
    assert "up to date" not in said, said
    assert index.read_bytes() == good
    assert "up to date" in _build(root)                      # and is a no-op again afterwards


def test_the_check_reads_the_content_not_only_the_ctime(tmp_path, monkeypatch):
    """Even where the ctime says nothing (a copy that keeps it, a coarse clock), the sha256 the
    build recorded at write time is what decides."""
    from site_src import incremental
    root = _site(tmp_path)
    _build(root)
    out = root / "public"
    assert incremental.up_to_date(root, out) is not None
    real = incremental._output_signature
    frozen = real(Path(os.path.realpath(out)))
    good = _tamper_in_place(out / "index.html")
    monkeypatch.setattr(incremental, "_output_signature", lambda folder: frozen)
    assert incremental.up_to_date(root, out) is None
    (out / "index.html").write_bytes(good)
