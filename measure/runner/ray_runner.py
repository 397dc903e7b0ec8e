"""Measure a study's shards on Ray: `python -m measure run ... --ray [auto|ADDRESS]`.

Ray is imported only here, and only when asked for (`pip install -e '.[scale]'`). The driver
plans the study as the in-process run does (`study.plan_study`) and computes the mean
activations (`study.clean_stats`), then hands the shards that have no completed result to one
actor per device: each actor plans the same study itself (so it loads the model once, and checks
that its fingerprint equals the driver's), measures shard after shard with
`study.measure_shard`, and returns the rows. Only the driver writes: a shard's file is written
atomically when its whole result has arrived, so a worker killed mid-shard leaves nothing behind
and its shard is retried (Ray restarts the actor and reruns the task), never half-counted. The
bundle is then written by `bundle.write_bundle` exactly as in-process, so the two are
byte-identical (everything but `manifest.json`); a rerun resumes from the completed shards.

Where the cluster has GPUs, there is one actor per GPU, each asking for `num_gpus=1`; otherwise
one actor per `--threads` CPUs. Every node needs the same checkout (and model folder) at the same
path: workers import `measure` from the driver's checkout.
"""
from __future__ import annotations

import json
import os
from typing import Callable

from measure.errors import MeasureError

RETRIES = 3  # restarts of a dead actor, and reruns of the shard it was measuring


def _worker_env() -> dict:
    """The workers import `measure` from the driver's checkout, offline, and start in the
    portable numerics mode (their torch reads its variables once, at its first computation)."""
    from measure import numerics
    from measure.runner.config import REPO

    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {"env_vars": {"PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error",
                         **numerics.ENVIRONMENT}}


def _connect(address: str, local_cpus: int | None):
    try:
        import ray
    except ImportError:
        raise MeasureError("--ray: Ray is not installed; pip install -e '.[scale]'") from None
    if ray.is_initialized():
        return ray, False
    kwargs = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        if address == "local":
            ray.init(num_cpus=local_cpus, **kwargs)
        else:
            ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise MeasureError(f"--ray {address}: cannot start or reach Ray ({exc})") from None
    return ray, True


class ShardWorker:
    """One per device: plans the study once (loading the model) and measures shards."""

    def __init__(self, config, fingerprint: str, stats, in_worker=None, payload=None):
        from measure.runner.study import plan_study

        self.plan = plan_study(config)
        if payload is not None:  # a second stage (`Plan.stage`)
            self.plan = self.plan.stage(payload)
        if self.plan.fingerprint != fingerprint:
            raise MeasureError(
                f"worker on {os.uname().nodename}: the study's fingerprint is {self.plan.fingerprint}, the "
                f"driver's {fingerprint}: a different model, pairs file, dtype, device type or torch here")
        self.stats = stats
        self.in_worker = in_worker

    def measure(self, k: int) -> tuple[int, dict]:
        """Shard k's rows, measured in this worker."""
        from measure.runner.study import measure_shard

        rows = measure_shard(self.plan, self.stats, k)
        if self.in_worker is not None:  # tests: kill the worker here, mid-shard, before it returns
            self.in_worker(k)
        return k, rows


def measure_shards_ray(plan, address: str = "local", hooks=None, local_cpus: int | None = None,
                       in_worker: Callable[[int], None] | None = None) -> dict[str, int]:
    """Ray's version of `study.measure_shards`: the same shard files, the same counts."""
    from tqdm import tqdm

    from safe_io import write_atomic

    from measure.runner.config import Hooks
    from measure.runner.study import clean_stats

    hooks = hooks or Hooks()
    config = plan.config
    stats = clean_stats(plan)
    todo = [k for k in range(len(plan.shards)) if not plan.shard_path(k).exists()]
    counts = {"computed": 0, "resumed": len(plan.shards) - len(todo)}
    if not todo:
        return counts
    ray, started = _connect(address, local_cpus)
    workers = []
    try:
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if gpus and not config.device.startswith("cuda"):
            raise MeasureError(f"--ray {address}: the cluster has {gpus} GPU(s) but the study runs on "
                               f"--device {config.device}; pass --device cuda (run the driver on a GPU node)")
        if gpus:
            n_workers, options = gpus, {"num_gpus": 1, "num_cpus": 1}
        else:
            cpus = int(ray.cluster_resources().get("CPU", 1))
            n_workers, options = max(1, cpus // config.threads), {"num_cpus": config.threads}
        n_workers = min(n_workers, len(todo))
        remote = ray.remote(ShardWorker).options(max_restarts=RETRIES, max_task_retries=RETRIES,
                                                 runtime_env=_worker_env(), **options)
        stats_ref = ray.put(stats)
        workers = [remote.remote(config, plan.fingerprint, stats_ref, in_worker, plan.payload) for _ in range(n_workers)]
        queue, inflight = list(todo), {}

        def submit(worker):
            if queue:
                k = queue.pop(0)
                inflight[worker.measure.remote(k)] = (worker, k)

        for worker in workers:  # two in flight per worker, so a worker never waits on the driver
            submit(worker)
            submit(worker)
        with tqdm(total=len(plan.shards), initial=counts["resumed"], desc=f"measuring {config.study} on Ray",
                  disable=not config.progress) as bar:
            while inflight:
                (ref,), _ = ray.wait(list(inflight), num_returns=1)
                worker, k = inflight.pop(ref)
                try:
                    _k, rows = ray.get(ref)
                except ray.exceptions.RayActorError as exc:
                    raise MeasureError(f"shard {k}: its worker died {RETRIES + 1} times ({exc})") from None
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.cause if isinstance(getattr(exc, "cause", None), Exception) else exc
                    raise MeasureError(f"shard {k}: {cause}") from None
                write_atomic(plan.shard_path(k), json.dumps(rows, ensure_ascii=False) + "\n")
                counts["computed"] += 1
                bar.update(1)
                hooks.shard_done(counts["computed"], len(todo))
                submit(worker)
    finally:
        for worker in workers:
            ray.kill(worker, no_restart=True)
        if started:
            ray.shutdown()
    return counts


def run_study_ray(config, address: str = "local", hooks=None, local_cpus: int | None = None,
                  in_worker: Callable[[int], None] | None = None) -> dict:
    """`run.run_study` with the measuring stage on Ray."""
    from measure.runner.bundle import write_bundle
    from measure.runner.config import Hooks
    from measure.runner.run import measure_stages
    from measure.runner.study import plan_study

    hooks = hooks or Hooks()
    plan = plan_study(config)
    counts = measure_stages(plan, lambda p, h: measure_shards_ray(p, address, h, local_cpus, in_worker), hooks)
    return write_bundle(plan, counts, hooks)
