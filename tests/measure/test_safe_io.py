"""safe_io.replace_dir: the old folder or the new one, whole, at every moment."""
from __future__ import annotations

import safe_io


def _fill(folder, files):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def _read(folder):
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def test_replace_dir_swaps_in_the_new_folder_and_leaves_nothing_beside_it(tmp_path):
    target = tmp_path / "bundle"
    _fill(target, {"a.json": "old", "b.json": "old"})
    staged = safe_io.staging_dir(target)
    _fill(staged, {"a.json": "new"})
    safe_io.replace_dir(staged, target)
    assert _read(target) == {"a.json": "new"}
    assert [p.name for p in tmp_path.iterdir()] == ["bundle"]


def test_replace_dir_without_an_exchange_call(tmp_path, monkeypatch):
    monkeypatch.setattr(safe_io, "_exchange", lambda a, b: False)
    target = tmp_path / "bundle"
    _fill(target, {"a.json": "old"})
    staged = safe_io.staging_dir(target)
    _fill(staged, {"a.json": "new"})
    safe_io.replace_dir(staged, target)
    assert _read(target) == {"a.json": "new"}
    assert [p.name for p in tmp_path.iterdir()] == ["bundle"]


def test_a_first_bundle_is_renamed_into_place_and_leftovers_are_cleared(tmp_path):
    target = tmp_path / "bundle"
    leftover = safe_io.staging_dir(target)
    _fill(leftover, {"half.json": "{"})
    staged = safe_io.staging_dir(target)  # a new run clears what a killed one left
    assert not leftover.exists()
    _fill(staged, {"a.json": "new"})
    safe_io.replace_dir(staged, target)
    assert _read(target) == {"a.json": "new"}
    assert oct(target.stat().st_mode & 0o777) == "0o755"


def test_a_swap_killed_between_its_two_renames_is_undone_by_the_next_run(tmp_path, monkeypatch):
    monkeypatch.setattr(safe_io, "_exchange", lambda a, b: False)
    target = tmp_path / "bundle"
    _fill(target, {"a.json": "old"})
    staged = safe_io.staging_dir(target)
    _fill(staged, {"a.json": "new"})
    real_replace = safe_io.os.replace

    def killed(src, dst):  # the first rename happens, then the process dies
        real_replace(src, dst)
        if str(dst).endswith(safe_io._ASIDE):
            raise SystemExit("killed")
    monkeypatch.setattr(safe_io.os, "replace", killed)
    try:
        safe_io.replace_dir(staged, target)
    except SystemExit:
        pass
    monkeypatch.setattr(safe_io.os, "replace", real_replace)
    assert not target.exists()
    safe_io.staging_dir(target)  # the next run
    assert _read(target) == {"a.json": "old"}
