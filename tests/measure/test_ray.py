"""The Ray path (`measure/runner/ray_runner.py`) on a local Ray with two CPUs, on the organism: a run
stopped after two shards and resumed, and a run whose worker is killed mid-shard, write the same
bundle bytes as the in-process run. Ray comes from the `scale` extra, which `make setup-test` installs; this
test does not skip without it."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

pytest.importorskip("torch")


class Stop(Exception):
    pass


def _config(tmp: Path, name: str):
    from measure.runner.config import StudyConfig

    return StudyConfig(model="organism", study="organism", out=tmp / name / "bundle",
                       runs_dir=tmp / name / "runs", max_pairs=2, shard_size=2, progress=False)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != "manifest.json"}


@pytest.fixture(scope="module")
def local_ray():
    import ray  # the scale extra: a missing Ray fails here, it does not skip

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    """The in-process run's bundle: what every Ray run must write, byte for byte."""
    from measure.runner.run import run_study

    tmp = tmp_path_factory.mktemp("inprocess")
    expected = run_study(_config(tmp, "inprocess"))
    assert expected["manifest"]["shards"] == 6
    return _files(tmp / "inprocess" / "bundle")


def test_a_ray_run_stopped_after_two_shards_resumes_to_the_in_process_bytes(tmp_path, local_ray, in_process):
    from measure.runner.config import Hooks
    from measure.runner.ray_runner import run_study_ray

    def stop_after_two(done, total):
        if done == 2:
            raise Stop
    with pytest.raises(Stop):
        run_study_ray(_config(tmp_path, "ray"), hooks=Hooks(shard_done=stop_after_two))
    run_dirs = list((tmp_path / "ray" / "runs" / "organism").iterdir())
    assert len(run_dirs) == 1 and len(list(run_dirs[0].glob("shard_*.json"))) == 2
    assert not (tmp_path / "ray" / "bundle").exists()

    result = run_study_ray(_config(tmp_path, "ray"))
    assert (result["computed"], result["resumed"]) == (4, 2)
    assert _files(tmp_path / "ray" / "bundle") == in_process


def test_a_ray_run_survives_a_killed_worker_and_writes_the_in_process_bytes(tmp_path, local_ray, in_process):
    from measure.runner.ray_runner import run_study_ray

    marker = tmp_path / "killed"

    def kill_once(k):  # runs inside the worker, after shard k is measured, before it returns
        if k == 4 and not marker.exists():
            marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
    result = run_study_ray(_config(tmp_path, "ray"), in_worker=kill_once)
    assert marker.exists(), "the worker was never killed"
    assert (result["computed"], result["resumed"]) == (6, 0)
    assert _files(tmp_path / "ray" / "bundle") == in_process


def test_ray_is_imported_only_when_asked_for():
    import subprocess
    import sys

    code = ("import sys, measure.__main__, measure.runner.ray_runner, measure.runner.study; "
            "sys.exit(1 if 'ray' in sys.modules else 0)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr or "ray was imported without --ray"
