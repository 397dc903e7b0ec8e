"""Safetensors files whose bytes depend on nothing but what they hold.

safetensors keeps a file's metadata in a hash map, and the map's order changes from one process
to the next: a file with two metadata keys came out in either order, so two runs of
`measure train --model minilm` wrote `features.safetensors` with different bytes and equal
tensors (issue 28). `tensor_file` lets safetensors lay out the tensors (their order and offsets
do not depend on the process) and writes the header's metadata itself, keys sorted, in
safetensors' own format: an 8-byte little-endian header length, the header as compact JSON
padded with spaces to a multiple of 8 bytes, then the data.
"""
from __future__ import annotations

import json
from pathlib import Path

from safe_io import write_atomic

METADATA = "__metadata__"


def tensor_file(tensors: dict, metadata: dict[str, str] | None = None) -> bytes:
    """The bytes of a safetensors file of `tensors` ({name: torch tensor}) and `metadata`."""
    from safetensors.torch import save

    raw = save(tensors)  # no metadata: nothing in it depends on the process
    length = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + length])
    header.pop(METADATA, None)
    if metadata:
        header = {METADATA: {k: metadata[k] for k in sorted(metadata)}, **header}
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + raw[8 + length:]


def save_tensor_file(tensors: dict, path: Path, metadata: dict[str, str] | None = None) -> None:
    """Write `tensor_file(tensors, metadata)` to `path`, replaced whole or not at all."""
    write_atomic(Path(path), tensor_file(tensors, metadata))
