"""The frozen lower layers of the realprefs reward model, run once per training sequence.

Only the top layers of the MiniLM-L6 trunk are trained (`train.py`), so what enters them is fixed:
the embeddings and the lower `n_lower` layers never change. Their output is computed once for
every training sequence and cached (float32), and every training step starts from it.

Each sequence runs alone (a batch of one, no padding, no attention mask), so its cached states
depend on nothing but its token ids; on this CPU that is also faster than padded batches of 32
(no work on padding: the sequences of a batch differ in length by up to 70 tokens).

The cache is a folder of chunks, `lower_00000.safetensors`, ..., each `CHUNK` sequences: `hidden`
((sum of their lengths, d) float32, the sequences one after another) and `lengths` ((n,) int64),
with one metadata key, the sha256 of the chunk's token ids (`ids_digest`). A chunk is written
atomically and kept when its digest matches, so a killed cache pass resumes at the first missing
chunk and a chunk of other sequences is never reused.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch

from measure.errors import MeasureError

CHUNK = 256  # sequences per cache file (about 40 MB at 107 tokens each)


def ids_digest(seqs: list[list[int]]) -> str:
    """The sha256 of a list of token-id sequences (one JSON array)."""
    return hashlib.sha256(json.dumps(seqs, separators=(",", ":")).encode()).hexdigest()


@torch.no_grad()
def lower_states(bert, ids: list[int], n_lower: int) -> torch.Tensor:
    """(T, d) float32: one sequence through the embeddings and layers 0..n_lower-1, alone."""
    hidden = bert.embeddings(input_ids=torch.tensor([ids], dtype=torch.long))
    for layer in bert.encoder.layer[:n_lower]:
        hidden = layer(hidden)  # no mask: a lone sequence has no padding to hide
    return hidden[0].float().contiguous()


def _chunk_path(folder: Path, k: int) -> Path:
    return folder / f"lower_{k:05d}.safetensors"


def _valid(path: Path, digest: str) -> bool:
    from safetensors import SafetensorError, safe_open
    try:
        with safe_open(str(path), framework="pt") as f:
            return (f.metadata() or {}).get("ids_digest") == digest
    except (SafetensorError, OSError):
        return False


def build(bert, seqs: list[list[int]], folder: Path, n_lower: int, progress: bool = True) -> None:
    """Compute the cache of `seqs` into `folder`, chunk by chunk, skipping chunks already there."""
    from safetensors.torch import save_file
    from tqdm import tqdm

    folder.mkdir(parents=True, exist_ok=True)
    chunks = [seqs[s:s + CHUNK] for s in range(0, len(seqs), CHUNK)]
    todo = [k for k, chunk in enumerate(chunks) if not _valid(_chunk_path(folder, k), ids_digest(chunk))]
    bar = tqdm(total=sum(len(chunks[k]) for k in todo), desc=f"frozen layers 0-{n_lower - 1}",
               unit="seq", disable=not progress)
    for k in todo:
        chunk = chunks[k]
        states = []
        for ids in chunk:
            states.append(lower_states(bert, ids, n_lower))
            bar.update(1)
        path = _chunk_path(folder, k)
        tmp = path.with_name(f".{path.name}.tmp")
        save_file({"hidden": torch.cat(states).contiguous(),
                   "lengths": torch.tensor([len(ids) for ids in chunk], dtype=torch.long)},
                  str(tmp), metadata={"ids_digest": ids_digest(chunk)})
        os.replace(tmp, path)
    bar.close()


def load(seqs: list[list[int]], folder: Path) -> list[torch.Tensor]:
    """The cached (T, d) states of every sequence of `seqs`, in order (views into each chunk);
    refused in one line when a chunk is missing or holds other sequences."""
    from safetensors.torch import load_file

    out = []
    for k, s in enumerate(range(0, len(seqs), CHUNK)):
        chunk = seqs[s:s + CHUNK]
        path = _chunk_path(folder, k)
        if not _valid(path, ids_digest(chunk)):
            raise MeasureError(f"{path}: missing or computed for other sequences; rerun the training "
                               f"command, which rebuilds it")
        tensors = load_file(str(path))
        lengths = tensors["lengths"].tolist()
        if lengths != [len(ids) for ids in chunk]:
            raise MeasureError(f"{path}: its lengths differ from the sequences' lengths")
        out.extend(torch.split(tensors["hidden"], lengths))
    return out


def digest(folder: Path, n_sequences: int) -> str:
    """The sha256 over the cache's chunk files (each file's name and sha256), for the report."""
    from safe_io import sha256_file
    h = hashlib.sha256()
    for k in range((n_sequences + CHUNK - 1) // CHUNK):
        path = _chunk_path(folder, k)
        h.update(path.name.encode() + b"\0" + sha256_file(path).encode() + b"\n")
    return h.hexdigest()
