"""The numerics the MiniLM heads are trained under: one thread, deterministic algorithms, no
oneDNN. (To be replaced by measure-core's portable numerics mode once it lands.)"""
from __future__ import annotations

import contextlib

import torch

DESCRIPTION = "one thread, torch.use_deterministic_algorithms, oneDNN off"


@contextlib.contextmanager
def declared():
    threads, mkldnn = torch.get_num_threads(), torch.backends.mkldnn.enabled
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
        torch.backends.mkldnn.enabled = mkldnn
