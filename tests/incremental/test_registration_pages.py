"""The registration pages are kept in the page cache (site_src/incremental.py, "registration
pages") by everything they are rendered from: honesty's `pages_inputs` (every verified
registration in full, the study URLs), the navigation and the context. The cache misses when any
of them changes, and `pages_inputs` changes when a registration's value does."""
from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from types import SimpleNamespace

from site_src import incremental
from site_src.errors import Errors
from site_src.stages.load import load_site

REPO = Path(__file__).resolve().parents[2]
PAGE = SimpleNamespace(url="a/", number=None, is_study=False, meta={"title": "A"})


def _memo(root: Path, title: str = "A") -> incremental.PageMemo:
    memo = incremental.PageMemo(root, SimpleNamespace(tracked=set(), untracked=set()))
    page = SimpleNamespace(**{**vars(PAGE), "meta": {"title": title}})
    memo.set_site({"a.md": page}, ["a.md"], {})
    return memo


def test_the_pages_are_reused_for_the_same_inputs_and_made_anew_for_others(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    made = []

    def make(tag: str):
        return lambda: made.append(tag) or {"registrations/index.html": tag.encode()}

    memo = _memo(tmp_path)
    assert memo.reuse("registration pages", "inputs A", make("first")) == {"registrations/index.html": b"first"}
    memo.commit()
    memo = _memo(tmp_path)
    assert memo.reuse("registration pages", "inputs A", make("again")) == {"registrations/index.html": b"first"}
    assert made == ["first"]                                   # the same inputs: reused
    assert memo.reuse("registration pages", "inputs B", make("changed"))[
        "registrations/index.html"] == b"changed"              # other inputs: made anew
    memo = _memo(tmp_path, title="Renamed")                    # the navigation every page shows changed
    assert memo.reuse("registration pages", "inputs A", make("renamed"))["registrations/index.html"] == b"renamed"
    assert made == ["first", "changed", "renamed"]


def test_the_inputs_hold_every_value_a_registration_page_shows():
    site = load_site(REPO, Errors())
    honesty = site.honesty
    before = honesty.pages_inputs()
    assert before == honesty.pages_inputs()                    # stable within a build
    verified = sorted(honesty.registrations, key=lambda v: v.registration.id)
    assert verified, "the repository has registrations"
    item = next(v for v in verified if v.value is not None)
    changed = dataclasses.replace(item, value=dataclasses.replace(item.value, value="another value"))
    honesty._registrations = [changed if v is item else v for v in honesty.registrations]
    assert honesty.pages_inputs() != before
    honesty._registrations = [v for v in honesty.registrations if v is not changed]   # one fewer
    assert honesty.pages_inputs() != before
