"""reproduce.py: agrees with scipy, runs isolated, and names file and line on every bad input."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from scipy import stats

from bundle_kit import contract, rankstats

TINY = Path(__file__).resolve().parent / "fixtures" / "tiny"


def _scores_by_hand(folder: Path, mode: str) -> dict:
    """Component scores straight from docs/statistics.md, without rankstats: {dim: {comp: (attr, patch)}}."""
    attribution = [json.loads(line) for line in (folder / "attribution_per_pair.jsonl").open()]
    patching = [json.loads(line) for line in (folder / "patching_per_pair.jsonl").open()]
    patched = {(r["dimension"], r["pair_id"], r["component"]): r for r in patching if r["mode"] == mode}
    sums: dict = {}
    for row in attribution:
        key = (row["dimension"], row["pair_id"], row["component"])
        if key in patched:
            p = patched[key]
            entry = sums.setdefault(row["dimension"], {}).setdefault(row["component"], [[], []])
            entry[0].append(row["attribution"])
            entry[1].append(abs(p["effect"]) / abs(p["clean_margin"]))
    return {d: {c: (sum(a) / len(a), sum(p) / len(p)) for c, (a, p) in comps.items()} for d, comps in sums.items()}


@pytest.mark.parametrize("mode", ["mean", "zero", "swap"])
def test_rhos_agree_with_scipy(mode):
    by_hand = _scores_by_hand(TINY, mode)
    attribution = rankstats.read_jsonl(TINY / "attribution_per_pair.jsonl", rankstats.ATTRIBUTION_FIELDS)
    patching = rankstats.read_jsonl(TINY / "patching_per_pair.jsonl", rankstats.PATCHING_FIELDS)
    rhos = rankstats.dimension_rhos(rankstats.component_scores(rankstats.join_rows(attribution, patching, mode)))
    assert sorted(rhos) == sorted(by_hand) == ["brevity", "honesty", "safety"]
    for dimension, comps in by_hand.items():
        names = sorted(comps)
        expected = stats.spearmanr([comps[c][0] for c in names], [comps[c][1] for c in names]).statistic
        assert rhos[dimension] == pytest.approx(expected, abs=1e-9)


def test_fixture_has_a_tie_so_average_ranks_matter():
    by_hand = _scores_by_hand(TINY, "mean")["brevity"]
    assert by_hand["attn_L0"][0] == by_hand["mlp_L0"][0]


def test_golden_is_scipy_rounded_and_printed(unzipped, run_check):
    golden = json.loads((TINY / "golden.json").read_text())
    by_hand = _scores_by_hand(TINY, golden["rank_mode"])
    done = run_check(unzipped, "-I")
    assert done.returncode == 0, done.stderr
    for dimension, comps in by_hand.items():
        names = sorted(comps)
        rho = stats.spearmanr([comps[c][0] for c in names], [comps[c][1] for c in names]).statistic
        assert golden["per_dimension_rho"][dimension] == round(rho, 6)
        top = max(names, key=lambda c: comps[c][0])
        moves = f"{100 * comps[top][1]:.4f}%"
        assert re.search(rf"^{dimension} +{rho:+.6f} +{rho:+.6f} +{top} .* {re.escape(moves)}$", done.stdout, re.M), done.stdout
    assert re.search(r"^pairs joined +15$", done.stdout, re.M)
    assert re.search(r"^components ranked both ways +6$", done.stdout, re.M)
    assert re.search(r"^dimensions +3$", done.stdout, re.M)
    assert re.search(r"^within tolerance +yes$", done.stdout, re.M)


def test_runs_isolated_without_site_packages_and_from_another_folder(unzipped, run_check, tmp_path):
    isolated = run_check(unzipped, "-I", "-S")
    assert isolated.returncode == 0, isolated.stderr
    assert isolated.stderr == ""
    # the page's command runs it from the parent folder; the output must not depend on that
    import subprocess, sys
    parent = subprocess.run([sys.executable, "-I", "-S", "tiny/reproduce.py"], cwd=unzipped.parent,
                            capture_output=True, text=True, timeout=60)
    assert parent.returncode == 0 and parent.stdout == isolated.stdout
    assert str(tmp_path) not in isolated.stdout


def _edit(path: Path, line: int, change) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[line - 1] = change(lines[line - 1])
    path.write_text("".join(lines))


def _fails(run_check, folder, code: int, where: str):
    done = run_check(folder, "-I", "-S")
    assert done.returncode == code, (done.stdout, done.stderr)
    assert where in (done.stderr if code == 2 else done.stdout), (done.stdout, done.stderr)
    return done


def test_truncated_mid_row(unzipped, run_check):
    path = unzipped / "patching_per_pair.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])
    lines = path.read_text().count("\n") + 1
    _fails(run_check, unzipped, 2, f"patching_per_pair.jsonl:{lines}: not valid JSON")


def test_truncated_at_a_row_boundary_is_caught_by_the_counts(unzipped, run_check):
    path = unzipped / "attribution_per_pair.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-6]))
    golden_line = next(i for i, t in enumerate((unzipped / "golden.json").read_text().splitlines(), 1) if "attribution_rows" in t)
    done = _fails(run_check, unzipped, 2, f"attribution_per_pair.jsonl:{len(lines) - 6}: holds {len(lines) - 6} rows")
    assert f"golden.json:{golden_line} says {len(lines)}" in done.stderr


def test_last_row_without_newline(unzipped, run_check):
    path = unzipped / "attribution_per_pair.jsonl"
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    n = path.read_text().count("\n") + 1
    _fails(run_check, unzipped, 2, f"attribution_per_pair.jsonl:{n}: last line has no newline")


def test_row_missing_a_field(unzipped, run_check):
    _edit(unzipped / "attribution_per_pair.jsonl", 7,
          lambda t: json.dumps({k: v for k, v in json.loads(t).items() if k != "seed_id"}) + "\n")
    _fails(run_check, unzipped, 2, "attribution_per_pair.jsonl:7: row lacks field(s): seed_id")


def test_field_that_is_not_a_number(unzipped, run_check):
    _edit(unzipped / "patching_per_pair.jsonl", 12, lambda t: json.dumps({**json.loads(t), "effect": "0.5"}) + "\n")
    _fails(run_check, unzipped, 2, 'patching_per_pair.jsonl:12: effect is "0.5", expected a finite number')


def test_repeated_row(unzipped, run_check):
    path = unzipped / "patching_per_pair.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:5] + [lines[2]] + lines[5:]))
    _fails(run_check, unzipped, 2, "patching_per_pair.jsonl:6: repeats the (dimension, pair_id, component, mode) of line 3")


def _golden_line(folder: Path, needle: str) -> int:
    return next(i for i, t in enumerate((folder / "golden.json").read_text().splitlines(), 1) if needle in t)


def test_tampered_rho_fails_naming_its_golden_line(unzipped, run_check):
    line = _golden_line(unzipped, '"honesty"')
    _edit(unzipped / "golden.json", line, lambda t: re.sub(r"-?\d\.\d+", "0.5", t))
    done = _fails(run_check, unzipped, 1, f"golden.json:{line}: per_dimension_rho/honesty disagrees by")
    assert re.search(r"^within tolerance +no$", done.stdout, re.M)
    assert re.search(rf"^  where +per_dimension_rho/honesty, golden.json:{line}$", done.stdout, re.M)


def test_tampered_mean_fails(unzipped, run_check):
    line = _golden_line(unzipped, '"mean_rho"')
    _edit(unzipped / "golden.json", line, lambda t: t.replace(": -0.", ": -0.0"))
    _fails(run_check, unzipped, 1, f"golden.json:{line}: mean_rho disagrees")


def test_disagreement_within_tolerance_passes(unzipped, run_check):
    line = _golden_line(unzipped, '"safety"')
    _edit(unzipped / "golden.json", line, lambda t: re.sub(r"(-?\d\.\d+)", lambda m: f"{float(m.group(1)) + 4e-7:.7f}", t))
    done = run_check(unzipped, "-I")
    assert done.returncode == 0, done.stdout


@pytest.mark.parametrize("needle, change, message", [
    ('"safety"', lambda t: re.sub(r"-?\d\.\d+", '"high"', t), 'per_dimension_rho/safety is "high", expected a number'),
    ('"tolerance"', lambda t: t.replace("1e-06", "-1"), "tolerance is -1, but the check's bar is contract.py TOLERANCE"),
    ('"rank_mode"', lambda t: t.replace('"mean"', "7"), "rank_mode is 7, expected a non-empty string"),
    ('"patching_rows"', lambda t: t.replace("270", "2.5"), "counts/patching_rows is 2.5"),
    ('"study"', lambda t: t.replace('"tiny",', '"tiny"'), "not valid JSON"),
    ('"model"', lambda t: t.replace(": ", ": NaN, \"x\": "), "not valid JSON (not a finite number)"),
])
def test_malformed_golden_value_names_its_line(unzipped, run_check, needle, change, message):
    line = _golden_line(unzipped, needle)
    _edit(unzipped / "golden.json", line, change)
    done = _fails(run_check, unzipped, 2, "golden.json:")
    reported = int(re.search(r"golden\.json:(\d+)", done.stderr).group(1))
    # a broken separator is only seen where the next token starts: on this line or the next
    assert reported in (line, line + 1), done.stderr
    assert message in done.stderr


def test_rank_mode_with_no_rows(unzipped, run_check):
    line = _golden_line(unzipped, '"rank_mode"')
    _edit(unzipped / "golden.json", line, lambda t: t.replace('"mean"', '"resample"'))
    _fails(run_check, unzipped, 2, "patching_per_pair.jsonl: no rows of mode 'resample'")


@pytest.mark.parametrize("name", ["golden.json", "attribution_per_pair.jsonl", "patching_per_pair.jsonl"])
def test_missing_file(unzipped, run_check, name):
    (unzipped / name).unlink()
    done = _fails(run_check, unzipped, 2, f"reproduce.py: {name}: cannot open")
    assert str(unzipped) not in done.stderr


def test_unpublished_dimension_fails(unzipped, run_check):
    golden = json.loads((unzipped / "golden.json").read_text())
    del golden["per_dimension_rho"]["safety"]
    (unzipped / "golden.json").write_text(json.dumps(golden, indent=2) + "\n")
    done = _fails(run_check, unzipped, 1, "per_dimension_rho/safety disagrees by missing")
    assert "not published" in done.stdout


def test_dimension_with_one_ranked_component(unzipped, run_check):
    golden = json.loads((unzipped / "golden.json").read_text())
    del golden["counts"]  # rows are removed on purpose; the count check is tested above
    (unzipped / "golden.json").write_text(json.dumps(golden, indent=2) + "\n")
    path = unzipped / "patching_per_pair.jsonl"
    kept = [t for t in path.read_text().splitlines(keepends=True)
            if '"safety"' not in t or '"attn_L0"' in t]
    path.write_text("".join(kept))
    _fails(run_check, unzipped, 2, "patching_per_pair.jsonl: dimension 'safety' has 1 component ranked both ways")


def test_output_is_deterministic(unzipped, run_check):
    first, second = run_check(unzipped, "-I"), run_check(unzipped, "-I")
    assert first.stdout == second.stdout and first.returncode == 0


@pytest.mark.parametrize("name", contract.KIT_FILES)
def test_kit_is_stdlib_only_python_3_10(name):
    import ast
    import sys
    source = (Path(__file__).resolve().parents[2] / "bundle_kit" / name).read_text()
    tree = ast.parse(source, feature_version=(3, 10))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(node.module.split(".")[0])
    allowed = set(sys.stdlib_module_names) | {"__future__"} | {n.removesuffix(".py") for n in contract.KIT_FILES}
    assert imported <= allowed, imported - allowed


@pytest.mark.parametrize("seed", [11, 12])
def test_larger_study_agrees_with_scipy(tmp_path, seed):
    import importlib.util
    spec = importlib.util.spec_from_file_location("study_maker", Path(__file__).with_name("study_maker.py"))
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    maker.write_study(tmp_path, dimensions=("a", "b"), pairs_per_dimension=6, layers=16, seed=seed, tie=False)
    attribution = rankstats.read_jsonl(tmp_path / "attribution_per_pair.jsonl")
    patching = rankstats.read_jsonl(tmp_path / "patching_per_pair.jsonl")
    rhos = rankstats.dimension_rhos(rankstats.component_scores(rankstats.join_rows(attribution, patching, "mean")))
    for dimension, comps in _scores_by_hand(tmp_path, "mean").items():
        names = sorted(comps)
        assert len(names) == 32
        rho = stats.spearmanr([comps[c][0] for c in names], [comps[c][1] for c in names]).statistic
        assert rhos[dimension] == pytest.approx(rho, abs=1e-9)


@pytest.mark.parametrize("name", ["rankstats.py", "contract.py"])
def test_missing_kit_file_is_named(unzipped, run_check, name):
    (unzipped / name).unlink()
    done = run_check(unzipped, "-I", "-S")
    assert done.returncode == 2 and f"{name}: missing" in done.stderr


# ---------------------------------------------------------------- a check cannot set its own bar

def _loosen_and_tamper(folder: Path, tolerance: str | None) -> tuple[int, int]:
    """Set golden.json's tolerance (None: drop the key) and one rho to -0.99; return both lines."""
    rho_line = _golden_line(folder, '"honesty"')
    _edit(folder / "golden.json", rho_line, lambda t: re.sub(r"-?\d\.\d+", "-0.99", t))
    tol_line = _golden_line(folder, '"tolerance"')
    if tolerance is None:
        _edit(folder / "golden.json", tol_line, lambda t: "")
        rho_line -= rho_line > tol_line
    else:
        _edit(folder / "golden.json", tol_line, lambda t: t.replace("1e-06", tolerance))
    return tol_line, rho_line


def test_golden_tolerance_of_10_does_not_pass_a_tampered_rho(unzipped, run_check):
    tol_line, _ = _loosen_and_tamper(unzipped, "10")
    done = _fails(run_check, unzipped, 2, f"golden.json:{tol_line}: tolerance is 10, but the check's bar is "
                                          f"contract.py TOLERANCE = {contract.TOLERANCE:g}")
    assert "a fixture cannot set its own bar" in done.stderr


def test_without_a_tolerance_key_the_contract_bar_applies(unzipped, run_check):
    _tol, rho_line = _loosen_and_tamper(unzipped, None)
    done = _fails(run_check, unzipped, 1, f"golden.json:{rho_line}: per_dimension_rho/honesty disagrees by")
    assert f"(tolerance {contract.TOLERANCE:g})" in done.stdout


def test_golden_tolerance_key_is_information_when_it_equals_the_contract(unzipped, run_check):
    golden = json.loads((unzipped / "golden.json").read_text())
    assert golden["tolerance"] == contract.TOLERANCE
    del golden["tolerance"]
    (unzipped / "golden.json").write_text(json.dumps(golden, indent=2) + "\n")
    assert run_check(unzipped, "-I", "-S").returncode == 0


def test_a_looser_contract_bar_would_pass_it(unzipped, run_check):
    """The bar really is read from contract.py: loosen it there and the small tamper passes."""
    line = _golden_line(unzipped, '"safety"')
    _edit(unzipped / "golden.json", line, lambda t: re.sub(r"(-?\d\.\d+)", lambda m: f"{float(m.group(1)) + 0.01:.6f}", t))
    assert run_check(unzipped, "-I", "-S").returncode == 1
    _edit(unzipped / "golden.json", _golden_line(unzipped, '"tolerance"'), lambda t: "")
    contract_py = unzipped / "contract.py"
    contract_py.write_text(contract_py.read_text().replace("TOLERANCE = 1e-6", "TOLERANCE = 0.1"))
    assert run_check(unzipped, "-I", "-S").returncode == 0


def test_golden_patch_score_chooses_the_definition(unzipped, run_check):
    """golden.json's `patch_score: ratio_of_means` makes the check rank by sum |effect| / sum
    |clean margin| (docs/statistics.md); the recomputed rhos are scipy's on those scores."""
    attribution = [json.loads(line) for line in (TINY / "attribution_per_pair.jsonl").open()]
    patching = [json.loads(line) for line in (TINY / "patching_per_pair.jsonl").open()]
    golden = json.loads((TINY / "golden.json").read_text())
    patched = {(r["dimension"], r["pair_id"], r["component"]): r for r in patching if r["mode"] == golden["rank_mode"]}
    sums: dict = {}
    for row in attribution:
        p = patched.get((row["dimension"], row["pair_id"], row["component"]))
        if p is not None:
            e = sums.setdefault(row["dimension"], {}).setdefault(row["component"], [[], 0.0, 0.0])
            e[0].append(row["attribution"])
            e[1] += abs(p["effect"])
            e[2] += abs(p["clean_margin"])
    rhos = {}
    for d, comps in sums.items():
        names = sorted(comps)
        rhos[d] = round(stats.spearmanr([sum(comps[c][0]) / len(comps[c][0]) for c in names],
                                        [comps[c][1] / comps[c][2] for c in names]).statistic, 6)
    golden.update(patch_score="ratio_of_means", per_dimension_rho=rhos,
                  mean_rho=round(sum(rhos.values()) / len(rhos), 6))
    (unzipped / "golden.json").write_text(json.dumps(golden, indent=2) + "\n")
    done = run_check(unzipped, "-I")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert re.search(r"^patch score +ratio_of_means$", done.stdout, re.M)
    golden["patch_score"] = "median"
    (unzipped / "golden.json").write_text(json.dumps(golden, indent=2) + "\n")
    line = _golden_line(unzipped, '"patch_score"')
    _fails(run_check, unzipped, 2, f"golden.json:{line}: patch_score is 'median'")
