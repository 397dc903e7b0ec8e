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


def _recorded(root: Path, out: Path) -> dict:
    import json
    state = json.loads((root / ".cache" / "incremental" / "state.json").read_text())
    return state["outputs"][str(out)]


def test_a_file_written_in_the_fence_tick_is_read(tmp_path, monkeypatch):
    """Where the ctime says nothing (a file written in the same clock tick as the build's record,
    the fence), the sha256 the build recorded at write time is what decides: a tampered page
    whose whole stat signature stayed as recorded is still found."""
    from site_src import incremental
    from site_src.paths import STAMP
    root = _site(tmp_path)
    _build(root)
    out = root / "public"
    assert incremental.up_to_date(root, out) is not None
    frozen = incremental._output_signature(Path(os.path.realpath(out)))
    fence = next(row[3] for row in frozen if row[0] == STAMP)
    racy = [[*row[:3], fence, row[4]] if row[0] == "index.html" else row for row in frozen]
    monkeypatch.setattr(incremental, "_output_signature", lambda folder: racy)
    monkeypatch.setattr(incremental.State, "__init__", _with_signature(incremental.State.__init__, str(out), racy))
    assert incremental.up_to_date(root, out) is not None      # untampered: still a no-op
    good = _tamper_in_place(out / "index.html")
    assert incremental.up_to_date(root, out) is None
    (out / "index.html").write_bytes(good)


def _with_signature(init, out: str, signature: list):
    def patched(self, root):
        init(self, root)
        self.data["outputs"][out]["signature"] = signature
    return patched


def test_the_no_op_reads_only_files_not_older_than_the_fence(tmp_path, monkeypatch):
    """A no-op does not read the site again: only the files whose recorded ctime is not older
    than the fence (the stamp, touched when the build was recorded) are hashed."""
    from site_src import incremental
    from site_src.paths import STAMP
    root = _site(tmp_path)
    _build(root)
    out = root / "public"
    entry = _recorded(root, out)
    ctimes = {row[0]: row[3] for row in entry["signature"]}
    fence = ctimes[STAMP]
    racy = {rel for rel in entry["files"] if ctimes[rel] >= fence}
    read = []
    real = incremental._file_sha
    monkeypatch.setattr(incremental, "_file_sha", lambda path: read.append(path) or real(path))
    assert incremental.up_to_date(root, out) is not None
    live = os.path.realpath(out)
    assert sorted(os.path.relpath(p, live) for p in read) == sorted(racy)
    assert len(racy) < len(entry["files"]) / 2   # the build's pages were written ticks before its record


def test_the_next_build_links_only_outputs_it_knows_unchanged(tmp_path):
    """The write stage links a previous output without reading it only when its sha256 is known:
    recorded, its stat signature as recorded, older than the fence. A page changed in place is
    not known, and the next build writes the bytes it makes, not the changed ones."""
    from site_src import incremental
    root = _site(tmp_path)
    _build(root)
    out = root / "public"
    entry = _recorded(root, out)
    known = incremental.known_outputs(root, out)
    assert "index.html" in known and set(known) <= set(entry["files"])
    assert all(known[rel] == entry["sha256"][rel] for rel in known)
    good = _tamper_in_place(out / "index.html")
    assert "index.html" not in incremental.known_outputs(root, out)
    page = next(p for p in sorted((root / "content").rglob("*.md")) if p.name != "index.md")
    page.write_text(page.read_text(encoding="utf-8") + "\nOne more sentence.\n", encoding="utf-8")
    assert "up to date" not in _build(root)
    assert (out / "index.html").read_bytes() == good
