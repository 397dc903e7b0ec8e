"""A non-editable install of the package (`pip install .`, not `-e`) into a fresh virtual
environment builds a site (issue 18, case 15: pyproject.toml's package list left out
site_src.stages and site_src.honesty, so an installed generator could not import).

The environment reuses this one's libraries through a path file (no download, no build isolation,
`--no-deps`), so it takes seconds; the package itself is built from a copy of the files git lists
here, working-tree edits included, and imported from the new environment only."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

from generator_helpers import FIXTURE, GITIGNORE, REPO, git

PROBE = textwrap.dedent("""
    import importlib, pkgutil, sys
    from pathlib import Path
    import site_src
    here = Path(site_src.__file__).resolve()
    assert here.is_relative_to(Path(sys.argv[1]).resolve()), f"site_src imported from {here}"
    for top in ("site_src", "bundle_kit", "safe_io", "measure"):
        package = importlib.import_module(top)
        for info in pkgutil.walk_packages(package.__path__, top + "."):
            if top == "measure" and info.name.count(".") > 1 and not info.ispkg:
                continue          # measure's modules import torch; its packages must be there
            importlib.import_module(info.name)
    from site_src.figures import runtime
    for name in (runtime.CSS, runtime.LOADER):          # package data: the figures' static files
        assert runtime._static(name), name
    from bundle_kit import record, reproduce           # shipped in every bundle zip
    assert Path(reproduce.__file__).is_file() and Path(record.__file__).is_file()
    from site_src.site import build
    result = build(Path(sys.argv[2]), Path(sys.argv[2]) / "public")
    print("\\n".join(result.errors.lines()) or f"built {len(result.files)} files")
""")


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def test_a_non_editable_install_builds_the_site(tmp_path):
    source = tmp_path / "source"
    for rel in git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0"):
        path = REPO / rel
        if rel and path.is_file() and not rel.startswith(("tests/", "bundles/", "models/", "data/", "node_modules/")):
            (source / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / rel)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    purelib = subprocess.run([str(_python(venv)), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # this environment's libraries (a plain path: its .pth files, the editable install's among
    # them, are not run there, so site_src can come only from the new install)
    Path(purelib, "libraries-of-the-test-run.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run([str(_python(venv)), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           str(source)], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not list(Path(purelib).glob("__editable__*"))
    site = tmp_path / "site"
    shutil.copytree(FIXTURE, site)
    shutil.copytree(REPO / "templates", site / "templates")
    (site / ".gitignore").write_text(GITIGNORE)
    git(site, "init", "-q")
    git(site, "add", "-A")
    shutil.rmtree(source)        # nothing of the copy is left to import from
    probe = subprocess.run([str(_python(venv)), "-I", "-c", PROBE, purelib, str(site)], capture_output=True,
                           text=True, timeout=300, cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert probe.stdout.startswith("built "), probe.stdout
