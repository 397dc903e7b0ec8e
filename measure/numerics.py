"""The portable numerics mode: the same float32 results on every x86-64 CPU.

On a CPU, torch picks its kernels by what the processor offers: ATen's vectorised kernels by
its capability (AVX2, AVX-512), MKL's matrix products by instruction set, oneDNN by ISA. Each
choice sums in another order, so the last digits of a float32 result, and of the rows a bundle
holds (rounded to 8 decimals), depend on the CPU that made them. Measurement and training run
in one declared mode instead:

- `ATEN_CPU_CAPABILITY=default`: ATen's portable kernels, compiled for no particular extension;
- `MKL_CBWR=COMPATIBLE`: MKL's conditional numerical reproducibility, the one code path MKL
  promises gives the same results on every Intel or compatible processor (it makes
  `MKL_ENABLE_INSTRUCTIONS` irrelevant);
- oneDNN off (`torch.backends.mkldnn.enabled = False`);
- one intra-op thread (`--threads 1`, the default; more threads are recorded, and may differ).

Torch reads both variables once: ATen when it first asks for the capability, MKL at its first
call. So `python -m measure` sets them before it imports torch, overriding the caller's
environment (`set_environment`), and every run checks what is actually in effect
(`enter`): ATen reports its capability, MKL its CNR mode in the line its verbose mode prints.
A caller that imported and used torch before the variables were set is refused, never measured
in another mode without a word. The manifest records the mode in effect (`in_effect`).
This module imports torch only inside its functions, so it can run before torch is imported.
"""
from __future__ import annotations

import os
import sys
import tempfile

from measure.errors import MeasureError

ENVIRONMENT = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}
CAPABILITY = "DEFAULT"      # what torch.backends.cpu.get_cpu_capability() reports in the mode
MKL_MODE = "COMPATIBLE"     # the CNR mode MKL's verbose line reports in the mode


def set_environment(environ=os.environ) -> None:
    """Set the mode's variables (replacing the caller's values); before torch computes anything."""
    environ.update(ENVIRONMENT)


def _mkl_cnr_mode() -> str | None:
    """MKL's conditional-numerical-reproducibility mode as MKL itself reports it (the `CNR:`
    field of the line its verbose mode prints for one small product); None without MKL."""
    import torch

    if not torch.backends.mkl.is_available():
        return None
    a = torch.ones(4, 4)
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 1)  # MKL prints to the C library's stdout
        try:
            with torch.backends.mkl.verbose(torch.backends.mkl.VERBOSE_ON):
                a @ a
            _flush_c_stdout()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        capture.seek(0)
        text = capture.read().decode("utf-8", "replace")
    for word in text.split():
        if word.startswith("CNR:"):
            return word[len("CNR:"):]
    return "unknown"


def _flush_c_stdout() -> None:
    import ctypes

    ctypes.CDLL(None).fflush(None)


def in_effect() -> dict:
    """The numerics torch runs with now: ATen's capability, MKL's CNR mode, oneDNN, threads,
    and whether that is the portable mode (`portable`: a torch without MKL never is)."""
    import torch

    state = {"aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
             "mkl_cnr": _mkl_cnr_mode(),
             "onednn": bool(torch.backends.mkldnn.enabled),
             "threads": torch.get_num_threads()}
    state["portable"] = (state["aten_cpu_capability"] == CAPABILITY and state["mkl_cnr"] == MKL_MODE
                         and not state["onednn"] and state["threads"] == 1)
    return state


def enter(threads: int = 1) -> dict:
    """Put this process in the portable mode (with `threads` intra-op threads) and return what
    is in effect. Refuses a process whose torch already chose other kernels: the variables
    are read once, so setting them now would change nothing."""
    import torch

    set_environment()
    torch.backends.mkldnn.enabled = False
    torch.set_num_threads(threads)
    state = in_effect()
    wrong = []
    if state["aten_cpu_capability"] != CAPABILITY:
        wrong.append(f"ATen's CPU capability is {state['aten_cpu_capability']}, not {CAPABILITY}")
    if state["mkl_cnr"] not in (MKL_MODE, None):
        wrong.append(f"MKL's CNR mode is {state['mkl_cnr']}, not {MKL_MODE}")
    if wrong:
        raise MeasureError(
            "the portable numerics mode is not in effect (" + "; ".join(wrong) + "): torch ran before "
            "its variables were set; run `python -m measure`, or call measure.numerics.set_environment() "
            "before importing torch")
    return state


def departures(state: dict, device: str = "cpu") -> list[str]:
    """What of the run `state` (from `in_effect`) on `device` is not the portable mode, in words;
    empty when the portable claim holds (the mode is a CPU mode: a GPU run never makes it)."""
    out = []
    if not str(device).startswith("cpu"):
        out.append(f"device {device}")
    if state.get("threads") != 1:
        out.append(f"{state.get('threads')} threads")
    if state.get("aten_cpu_capability") != CAPABILITY:
        out.append(f"ATen's {state.get('aten_cpu_capability')} kernels")
    if state.get("mkl_cnr") != MKL_MODE:
        out.append("no MKL" if state.get("mkl_cnr") is None else f"MKL CNR {state.get('mkl_cnr')}")
    if state.get("onednn"):
        out.append("oneDNN on")
    return out


def claimed(state: dict, device: str = "cpu") -> bool:
    """Whether a run in `state` on `device` may claim the portable mode's byte-identity on any CPU."""
    return not departures(state, device)


def describe(state: dict, device: str = "cpu") -> str:
    """One sentence for a run outside the portable mode: what differs, and what its files'
    byte-identity then rests on."""
    return (f"this run is outside the portable numerics mode ({', '.join(departures(state, device))}): "
            f"its files are byte-identical only when the run is repeated with the same settings on a "
            f"machine that picks the same kernels, not on any CPU; the bundle's README says so")
