"""Processes for vl-convert, so that figures are drawn beside the page rendering, on two cores.

vl-convert runs every call of a process on one JavaScript worker, one call at a time, and holds
the GIL through most of it, so a thread of this process could neither draw two figures at once
nor render pages while it draws. A cold build spends most of its time there (each figure drawn
twice, light and dark, a preview image per study, the Vega runtime bundled once). `submit` hands
a call to the least busy of COUNT worker processes (site_src/figures/worker_loop.py, started on
first use and kept for the life of this one) and returns a Future. If a worker cannot start or
fails, the Future fails and the caller makes the call itself: the workers change when output
is made, never what.
"""
from __future__ import annotations

import atexit
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
from concurrent.futures import Future
from pathlib import Path

import vl_convert

from ..errors import BuildError

LOOP = Path(__file__).with_name("worker_loop.py")


class WorkerError(BuildError, RuntimeError):
    """A vl-convert worker process that died, babbled or did not answer in time."""


class Worker:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-I", str(LOOP)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, encoding="utf-8")
        self.pending: dict[int, Future] = {}
        self.ids = itertools.count()
        self.lock = threading.Lock()         # guards `pending`, never held while writing or reading
        # Requests go out through a thread of their own: a request larger than the pipe's buffer
        # waits there until the worker has finished its drawing and reads it, and the build's
        # main thread (which rendered nothing while it waited, 9 s of a cold build) goes on.
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.writer = threading.Thread(target=self._write, name="figure-worker-in", daemon=True)
        self.writer.start()
        threading.Thread(target=self._read, name="figure-worker", daemon=True).start()
        self.version = self.submit("version")   # checked before a drawing is trusted

    def alive(self) -> bool:
        """Whether the worker process is still running."""
        return self.proc.poll() is None

    def submit(self, op: str, **args) -> Future:
        """Queue one request for the worker (never waits for the pipe); a Future of its answer."""
        future: Future = Future()
        with self.lock:
            number = next(self.ids)
            self.pending[number] = future
        self.outbox.put((number, json.dumps({"id": number, "op": op, **args}) + "\n"))
        return future

    def _write(self) -> None:
        # A large request fills the pipe until the worker reads it, and the worker reads only
        # after its last answer is taken off its stdout: so the reader thread must never wait
        # for this write (it needs only `lock`, which is not held here).
        while (item := self.outbox.get()) is not None:
            number, line = item
            try:
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
            except (OSError, ValueError) as exc:
                with self.lock:
                    future = self.pending.pop(number, None)
                if future is not None and not future.done():
                    future.set_exception(WorkerError(f"the figure worker is gone: {exc}"))
        try:
            self.proc.stdin.close()   # the worker's loop ends when its input does
        except OSError:
            pass

    def _read(self) -> None:
        try:
            for line in self.proc.stdout:
                reply = json.loads(line)
                with self.lock:
                    future = self.pending.pop(reply["id"], None)
                if future is not None:
                    if reply["ok"]:
                        future.set_result(reply["result"])
                    else:
                        future.set_exception(WorkerError(reply["error"]))
        except (OSError, ValueError, KeyError, TypeError):
            self.proc.kill()   # an answer that is not one: trust nothing more from it
        finally:
            with self.lock:   # nothing more will come: every caller draws its figure itself
                left, self.pending = list(self.pending.values()), {}
            for future in left:
                future.set_exception(WorkerError("the figure worker stopped"))

    def close(self) -> None:
        """End the worker process once the requests queued are sent (killed if it does not exit in 5 s)."""
        self.outbox.put(None)
        self.writer.join(timeout=5)
        try:
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


# Worker processes: vl-convert holds the GIL through most of a call (a PNG, nearly all of it), so
# a thread of this process cannot draw while it renders pages; two processes keep two cores busy
COUNT = max(1, min(2, os.cpu_count() or 1))
_workers: list[Worker] = []
_lock = threading.Lock()


def _pick() -> Worker | None:
    """The least busy worker (started on first use, started again when one died); None when none
    can start."""
    with _lock:
        _workers[:] = [w for w in _workers if w.alive()]
        while len(_workers) < COUNT:
            try:
                worker = Worker()
            except OSError:
                break
            atexit.register(worker.close)
            _workers.append(worker)
        return min(_workers, key=lambda w: len(w.pending)) if _workers else None


def submit(op: str, **args) -> Future | None:
    """Hand one vl-convert call to a worker; None when there is none (then make it here)."""
    worker = _pick()
    if worker is None:
        return None
    future = worker.submit(op, **args)
    future.worker_version = worker.version
    return future


WAIT_S = 300   # how long a caller waits for an answer before making the call itself


def result(future: Future | None, timeout: float | None = None):
    """The worker's answer, or None when it has none (then make the call here). An answer from a
    worker with another vl-convert than this process is refused: the output must not depend on
    which process drew it."""
    if future is None:
        return None
    timeout = WAIT_S if timeout is None else timeout
    try:
        if future.worker_version.result(timeout=timeout) != vl_convert.__version__:
            return None
        return future.result(timeout=timeout)
    except Exception:  # WorkerError, a timeout: the caller draws it itself
        return None
