"""The portable numerics mode: the same bytes whatever the caller's CPU settings, checked as the
mode itself reports it, and refused when torch already chose other kernels."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROWS = ("attribution_per_pair.jsonl", "patching_per_pair.jsonl", "heads_attribution_per_pair.jsonl",
        "heads_patching_per_pair.jsonl", "lens_per_pair.jsonl", "golden.json")
# What a caller may have set: ATen's two settings this CPU offers, MKL's instruction set and mode.
CALLERS = ({"ATEN_CPU_CAPABILITY": "avx2"},
           {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "MKL_CBWR": "AUTO"})


def _env(caller: dict) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR")}
    return {**env, **caller}


def test_a_study_gives_the_same_bytes_whatever_cpu_settings_the_caller_sets(tmp_path):
    """The caller's ATEN_CPU_CAPABILITY and MKL settings are overridden by `python -m measure`;
    without the mode, avx2 and default kernels give different last digits on this CPU."""
    outs = [tmp_path / f"bundle{n}" for n in range(len(CALLERS))]

    def run(n: int) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "measure", "run", "--model", "organism", "--study", "numerics",
             "--dimensions", "politeness", "--max-pairs", "2", "--out", str(outs[n]),
             "--runs-dir", str(tmp_path / f"runs{n}"), "--no-progress"],
            cwd=REPO, env=_env(CALLERS[n]), capture_output=True, text=True, timeout=300)
    for done in _side_by_side(run, range(len(CALLERS))):
        assert done.returncode == 0, done.stderr[-2000:]
    for name in ROWS:
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name
    for out in outs:
        numerics = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["numerics"]
        assert numerics == {"aten_cpu_capability": "DEFAULT", "mkl_cnr": "COMPATIBLE", "onednn": False,
                            "threads": 1, "portable": True}


def _side_by_side(run, items) -> list:
    """run(item) for each item, at the same time: each is its own single-threaded process, so
    on two cores the pair takes the time of one."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(run, items))


def _run_python(code: str, caller: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=_env(caller),
                          capture_output=True, text=True, timeout=300)


def test_a_caller_whose_torch_chose_other_aten_kernels_is_refused():
    code = ("import torch; torch.ones(40).sum()\n"
            "from measure.runner.config import StudyConfig\n"
            "from measure.runner.study import plan_study\n"
            "from measure.errors import MeasureError\n"
            "try:\n    plan_study(StudyConfig(max_pairs=1))\n"
            "except MeasureError as exc:\n    print(exc)\n")
    done = _run_python(code, {"ATEN_CPU_CAPABILITY": "avx2"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "portable numerics mode is not in effect" in done.stdout
    assert "ATen's CPU capability is AVX2" in done.stdout


def test_a_caller_whose_mkl_already_ran_in_another_mode_is_refused():
    code = ("import torch; a = torch.ones(8, 8); a @ a\n"
            "from measure import numerics\n"
            "from measure.errors import MeasureError\n"
            "try:\n    numerics.enter()\n"
            "except MeasureError as exc:\n    print(exc)\n")
    done = _run_python(code, {"ATEN_CPU_CAPABILITY": "default"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "MKL's CNR mode is OFF, not COMPATIBLE" in done.stdout


def test_a_process_that_set_the_mode_before_torch_computed_anything_is_in_it():
    code = ("from measure import numerics\nnumerics.set_environment()\nimport torch\n"
            "import json\nprint(json.dumps(numerics.enter()))\n")
    done = _run_python(code, {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AUTO"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["portable"] is True


TRAIN_STEPS = """
import hashlib
import measure.__main__  # sets the mode's variables, as `python -m measure train` does
from measure.models.wordtok import SPECIALS, word_tokenizer
from measure.studies.organism import data as od, train as t
s = dict(t.SETTINGS)
t.deterministic(s["seed"])
rows = t.make_data(s)["train"][:512]
ids, idx = t.encode(word_tokenizer(list(SPECIALS) + od.vocabulary()), rows)
model = t.new_model(s, len(SPECIALS) + len(od.vocabulary()))
losses = t.fit(model, ids, idx, s, progress=False, steps=4)
digest = hashlib.sha256()
for name, tensor in sorted(model.state_dict().items()):
    digest.update(name.encode() + tensor.detach().contiguous().numpy().tobytes())
print(digest.hexdigest(), losses)
"""


def test_training_steps_give_the_same_weights_whatever_cpu_settings_the_caller_sets():
    """A few optimizer steps of the organism's training (its model, data, loss and optimizer),
    under each caller setting: byte-identical weights."""
    outs = []
    for done in _side_by_side(lambda caller: _run_python(TRAIN_STEPS, caller), CALLERS):
        assert done.returncode == 0, done.stderr[-2000:]
        outs.append(done.stdout.split()[0])
    assert outs[0] == outs[1]
