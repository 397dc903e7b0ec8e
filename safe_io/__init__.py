"""Small, neutral file helpers shared by the site build (`site_src/`) and the measurement stage
(`measure/`), so that neither imports the other. Standard library only.

- `write_atomic(path, data)`: a file is replaced whole or not at all.
- `replace_dir(staged, target)`: a folder is replaced whole or not at all.
- `staging_dir(target)`: a fresh folder beside `target` to build the replacement in.
- `git_state(root)`: the HEAD commit and whether the tree is dirty; `git_changes(root)`: the paths
  that differ (one `git status` for both, asked once per root inside `git_state_per_build()`).
- `sha256_file(path)`: a file's sha256, read in blocks.
"""
from __future__ import annotations

import errno
import hashlib
import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

__all__ = ["write_atomic", "replace_dir", "staging_dir", "git_state", "git_changes", "git_state_per_build",
           "sha256_file"]


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write to a temporary file beside `path`, then rename: a killed run or a build running
    side by side never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    import tempfile   # here, not at the top: a no-op build writes nothing and should not import it
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; these are ordinary readable files
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


_ASIDE = "previous"  # the old folder's name while a two-rename swap is under way


def _staging_prefix(target: Path) -> str:
    return f".{target.name}.staging-"


def staging_dir(target: Path) -> Path:
    """A new empty folder beside `target` (same file system, so it can be renamed into place).
    What earlier killed runs left beside `target` is cleared first; if one was killed in the
    middle of a two-rename swap (`target` gone, the old folder set aside), the old folder is put
    back first. One run at a time may write a given `target`."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    for leftover in sorted(target.parent.glob(_staging_prefix(target) + "*")):
        if not target.exists() and (leftover / _ASIDE).is_dir():
            os.replace(leftover / _ASIDE, target)
        shutil.rmtree(leftover, ignore_errors=True)
    import tempfile
    path = Path(tempfile.mkdtemp(dir=target.parent, prefix=_staging_prefix(target)))
    os.chmod(path, 0o755)  # mkdtemp makes 0700; a bundle is an ordinary readable folder
    return path


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    import ctypes   # here: only a swap needs it, and importing it was a twentieth of a no-op build
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def replace_dir(staged: Path, target: Path) -> None:
    """Put the folder `staged` (from `staging_dir(target)`) in place of `target`.

    Where the kernel can exchange two paths in one step, `target` is at every moment either the
    whole old folder or the whole new one, so a kill at any point leaves one of them complete
    in place. Elsewhere the old folder is first renamed aside and the new one renamed in; a kill
    between those two renames leaves the old folder complete beside `target` (under the staging
    prefix), and the next `staging_dir(target)` puts it back before anything else."""
    staged, target = Path(staged), Path(target)
    if not target.exists():
        os.replace(staged, target)
        return
    if _exchange(staged, target):
        shutil.rmtree(staged)  # now the old folder
        return
    import tempfile
    aside = Path(tempfile.mkdtemp(dir=target.parent, prefix=_staging_prefix(target)))
    os.replace(target, aside / _ASIDE)
    try:
        os.replace(staged, target)
    except BaseException:
        os.replace(aside / _ASIDE, target)
        raise
    shutil.rmtree(aside)


_GIT_STATES: dict | None = None   # inside git_state_per_build(): root -> its `git status`


@contextmanager
def git_state_per_build():
    """Inside this block `git_state(root)` and `git_changes(root)` ask git once per root, so every
    part of one build names the same commit and pays one git process for it. Each block starts
    afresh (nested ones share the outer one): `serve` builds in a new block each time and sees a
    new commit."""
    global _GIT_STATES
    outer = _GIT_STATES
    if outer is None:
        _GIT_STATES = {}
    try:
        yield
    finally:
        if outer is None:
            _GIT_STATES = None


def git_state(root: Path) -> tuple[str | None, bool]:
    """(HEAD commit, whether tracked or untracked files differ from it); (None, False) outside git
    or before the first commit."""
    head, changed = _status(root)
    if head is None:
        return None, False
    return head, bool(changed)


def git_changes(root: Path) -> frozenset | None:
    """The paths `git status` lists, relative to the top of the work tree: changed against HEAD or
    the index, untracked, unmerged, both sides of a staged rename. None outside git."""
    return _status(root)[1]


def _status(root: Path) -> tuple[str | None, frozenset | None]:
    if _GIT_STATES is None:
        return _ask_status(root)
    key = os.path.abspath(root)
    if key not in _GIT_STATES:
        _GIT_STATES[key] = _ask_status(root)
    return _GIT_STATES[key]


def _ask_status(root: Path) -> tuple[str | None, frozenset | None]:
    # One `git status`: its header names HEAD ("(initial)" before the first commit), and every
    # other entry is a change `git status --porcelain` would list.
    try:
        out = subprocess.run(["git", "-C", str(root), "status", "--porcelain=v2", "-z", "--branch",
                              "--no-ahead-behind"], capture_output=True, check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    head, changed = None, set()
    tokens = iter(out.decode("utf-8", "surrogateescape").split("\0"))
    for token in tokens:
        if token.startswith("# branch.oid "):
            head = token.split(" ", 2)[2]
        elif token[:2] in ("1 ", "2 ", "u ", "? ", "! "):
            fields = {"1": 9, "2": 10, "u": 11}.get(token[0], 2)
            changed.add(token.split(" ", fields - 1)[-1] if fields > 2 else token[2:])
            if token[0] == "2":
                changed.add(next(tokens))   # a rename's other path
    return (None if head == "(initial)" else head), frozenset(changed)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
