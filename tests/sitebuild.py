"""The repository's own site, built once per session for every test folder that reads it, and
the pages it holds. Imported by tests/conftest.py (which adds this folder to sys.path: under
pytest's importlib mode a conftest is not importable) and by tests/site/conftest.py.

`SITE_DIR=path` reads an already built site instead of building one.
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_BUILT: dict = {}


def built_site() -> Path:
    """The site, built once per session by the generator's own command line into a temporary
    folder (removed at exit); raises RuntimeError with the build's output if it fails."""
    given = os.environ.get("SITE_DIR")
    if given:
        return Path(given).resolve()
    if "out" not in _BUILT:
        folder = Path(tempfile.mkdtemp(prefix="site-test-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        out = folder / "public"
        cmd = [sys.executable, str(REPO / "build.py"), "build", "--out", str(out)]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 or not (out / "index.html").is_file():
            _BUILT["error"] = (f"site build failed ({' '.join(cmd[1:])}, exit {proc.returncode}):\n"
                               f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        _BUILT["out"] = out
    if "error" in _BUILT:
        raise RuntimeError(_BUILT["error"])
    return _BUILT["out"]


def built_pages(site_dir: Path) -> list[str]:
    """Every HTML file the build wrote, as a site-relative URL path (clean URLs end in '/')."""
    pages = []
    for path in sorted(site_dir.rglob("*.html")):
        rel = path.relative_to(site_dir).as_posix()
        if rel == "index.html":
            rel = ""
        elif rel.endswith("/index.html"):
            rel = rel[: -len("index.html")]
        pages.append(rel)
    return pages


def html_file(site_dir: Path, path: str) -> Path:
    """The file a site-relative URL path serves."""
    return site_dir / (path + "index.html" if path == "" or path.endswith("/") else path)
