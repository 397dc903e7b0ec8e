"""The command line's option types: every option is checked when it is parsed, and a bad one is
one line (`error: --threads 0: must be a whole number of at least 1`) and exit status 2."""
from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path

STUDY_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")  # a bundle folder's name: never `..`, `/` or hidden
DEVICE = re.compile(r"cpu|cuda(:[0-9]+)?|mps")
SEED_LIMIT = 2 ** 63  # torch.manual_seed takes seeds below it


class UsageError(Exception):
    """A bad option, reported in one line by the parser that found it."""


class Parser(argparse.ArgumentParser):
    """argparse, with its errors raised as one line (`OPTION VALUE: why`) instead of the usage
    text: the caller prints it and exits 2."""

    def error(self, message: str):
        """Raise the parse error as one line (`OPTION VALUE: why`) for the caller to print."""
        raise UsageError(re.sub(r"^argument ([^:]+): ", r"\1 ", message))


def _number(text: str, kind):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text}: not a {'whole ' if kind is int else ''}number") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text}: must be a finite number")
    return value


def count(text: str) -> int:
    """A whole number of at least 1 (pairs, rows, threads, shards, epochs, GPUs' count aside)."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be a whole number of at least 1")
    return value


def threads(text: str) -> int:
    """CPU threads: 1 to this machine's CPU count (torch crashes on absurd counts)."""
    value = count(text)
    available = os.cpu_count() or 1
    if value > available:
        raise argparse.ArgumentTypeError(f"{text}: this machine has {available} CPUs")
    return value


def whole(text: str) -> int:
    """A whole number of at least 0 (an index, a number of GPUs)."""
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text}: must be a whole number of at least 0")
    return value


def seed(text: str) -> int:
    """A seed torch accepts: 0 to 2**63 - 1."""
    value = _number(text, int)
    if not 0 <= value < SEED_LIMIT:
        raise argparse.ArgumentTypeError(f"{text}: must be a whole number from 0 to 2**63 - 1")
    return value


def positive(text: str) -> float:
    """A finite number above 0 (a rate, a memory size)."""
    value = _number(text, float)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: must be above 0")
    return value


def fraction(text: str) -> float:
    """A fraction above 0 and at most 1."""
    value = _number(text, float)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text}: must be above 0 and at most 1")
    return value


def study_name(text: str) -> str:
    """A study's name, which names its bundle folder: `[a-z0-9][a-z0-9_-]*`, at most 64 characters."""
    if not STUDY_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r}: a study name is up to 64 lower-case letters, digits, "
                                         f"'-' and '_', starting with a letter or digit")
    return text


def device(text: str) -> str:
    """`cpu`, `cuda`, `cuda:N` or `mps` (whether it is there is checked when the model loads)."""
    if not DEVICE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r}: not a device (cpu, cuda, cuda:N, mps)")
    return text


def names(text: str) -> tuple[str, ...]:
    """A comma-separated list of names, none empty."""
    items = tuple(part.strip() for part in text.split(","))
    if not all(items):
        raise argparse.ArgumentTypeError(f"{text!r}: an empty name in the list")
    return items


def _plain_path(text: str) -> Path:
    """The path named, refused if it holds a control character (a newline would split every
    line that names it, in the manifest, the README and the errors)."""
    bad = next((c for c in text if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: holds a control character ({bad!r}); name a plain path")
    return Path(text).expanduser()


def input_file(text: str) -> Path:
    """A regular file that exists (not a folder, a device or a pipe)."""
    path = _plain_path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: {'is a folder' if path.is_dir() else 'not a regular file'}")
    return path


def output_file(text: str) -> Path:
    """A file to write: not a folder, not a link, in a folder that exists."""
    path = _plain_path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a folder; name a file")
    if path.is_symlink():
        raise argparse.ArgumentTypeError(f"{text}: is a symbolic link; name a plain file")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: its folder {path.parent} does not exist")
    return path


def folder(text: str) -> Path:
    """A folder to write into: a folder or nothing yet (then it is made), never a file."""
    path = _plain_path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a file, not a folder")
    return path
