"""Preregistration records (registrations/<id>.yaml): their fields, their place in git's history,
and the verdict the data give them.

The format is the one in docs/honesty.md. The build refuses a record that is malformed, whose
quantity does not resolve in its study's golden.json, that is not committed, that changed after
its first commit, or whose first commit is not a strict ancestor of the first commit holding
every file of its study's data as it is now. The verdict is computed here and never typed:
"kill criterion met" when the kill condition holds, else "confirmed" when the prediction holds,
else "refuted".
"""
from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import BuildError, FixtureProblem
from ..fixtures import Structured
from ..parse import MAX_BYTES
from ..receipts import Resolved
from ..refgrammar import RefSyntaxError, parse_key_path
from ..resolve import Resolver, find_entry
from . import superseded
from .history import Commit, History, sha256
from .superseded import Supersession
from .yamlfile import Record, load_record, record_files

FOLDER = "registrations"
ID = re.compile(r"[a-z0-9][a-z0-9_-]*")
KEY_PATH = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")
FIELDS = ("id", "study", "claim", "quantity", "prediction", "kill", "rationale", "author")
TEXT = ("id", "study", "claim", "quantity", "rationale", "author")
OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
CONFIRMED, REFUTED, KILLED = "confirmed", "refuted", "kill criterion met"
AWAITING = "awaiting data"   # frozen, and its study has no data yet
SKIPPED = re.compile(r"(^|/)(\.|__pycache__(/|$))|\.pyc$|~$")


@dataclass(frozen=True)
class Condition:
    """`value OP bound`, or `lo <= value <= hi` for an interval."""

    quantity: str
    op: str = ""
    bound: float = math.nan
    interval: tuple = ()

    def holds(self, value: float) -> bool:
        """Whether `value` meets the condition."""
        if self.interval:
            return self.interval[0] <= value <= self.interval[1]
        return OPS[self.op](value, self.bound)

    @property
    def text(self) -> str:
        """The condition in words, as the page prints it."""
        if self.interval:
            return f"between {self.interval[0]:g} and {self.interval[1]:g} (inclusive)"
        return f"{self.op} {self.bound:g}"


@dataclass(frozen=True)
class Registration:
    id: str
    study: str
    claim: str
    prediction: Condition
    kill: Condition
    kill_meaning: str
    rationale: str
    author: str
    doc: Record

    @property
    def rel(self) -> str:
        """The record's path in the repository."""
        return self.doc.rel


@dataclass(frozen=True)
class Verified:
    """A registration whose history checks passed, with the verdict its data give."""

    registration: Registration
    record_commit: Commit
    data_commits: tuple          # (Commit, (file, ...)) per distinct first commit, oldest first
    value: Resolved | None       # the predicted quantity, read from golden.json (None: no data yet)
    kill_value: Resolved | None
    prediction_holds: bool = False
    kill_holds: bool = False
    superseded: Supersession | None = None   # judged on the data of an earlier commit, and replaced

    @property
    def awaiting(self) -> bool:
        """Whether the registration still waits for its data."""
        return self.value is None

    @property
    def judges_current_data(self) -> bool:
        """Whether the verdict is the current bundle's: what a `registered` rung may rest on."""
        return not self.awaiting and self.superseded is None

    @property
    def verdict(self) -> str:
        """The verdict the page shows: awaiting data, killed, confirmed or refuted."""
        if self.awaiting:
            return AWAITING
        if self.kill_holds:
            return KILLED
        return CONFIRMED if self.prediction_holds else REFUTED

    @property
    def first_data_commit(self) -> Commit | None:
        """The first commit that gave the study's data its content, if any."""
        return self.data_commits[0][0] if self.data_commits else None


# ---------------------------------------------------------------- fields

def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _condition(doc: Record, key: str, spec, quantity: str | None) -> Condition:
    where = doc.where(key)
    if not isinstance(spec, dict):
        raise BuildError(f"{key} must be a mapping: {{op: '>', bound: 0.05}} or {{interval: [lo, hi]}}", where)
    allowed = {"op", "bound", "interval"} | ({"quantity", "meaning"} if key == "kill" else set())
    for name in spec:
        if name not in allowed:
            raise BuildError(f"{key}: unknown key {name!r} (known: {', '.join(sorted(allowed))})", doc.where(key, str(name)))
    if key == "kill":
        quantity = spec.get("quantity")
        if not isinstance(quantity, str) or not KEY_PATH.fullmatch(quantity):
            raise BuildError("kill needs 'quantity', a key path into golden.json such as counts/pairs", doc.where(key, "quantity"))
        if not isinstance(spec.get("meaning"), str) or not spec["meaning"].strip():
            raise BuildError("kill needs 'meaning': what it says about the study when the kill condition holds", doc.where(key))
    if "interval" in spec:
        if "op" in spec or "bound" in spec:
            raise BuildError(f"{key}: give either op and bound, or interval, not both", where)
        interval = spec["interval"]
        if not (isinstance(interval, list) and len(interval) == 2 and all(map(_number, interval))
                and interval[0] <= interval[1]):
            raise BuildError(f"{key}: interval must be [lo, hi], two numbers with lo <= hi", doc.where(key, "interval"))
        return Condition(quantity, interval=(float(interval[0]), float(interval[1])))
    if spec.get("op") not in OPS:
        raise BuildError(f"{key}: op must be one of {', '.join(OPS)} (quoted in YAML), or use interval", doc.where(key, "op"))
    if not _number(spec.get("bound")):
        raise BuildError(f"{key}: bound must be a finite number", doc.where(key, "bound"))
    return Condition(quantity, op=spec["op"], bound=float(spec["bound"]))


def parse(doc: Record) -> Registration:
    """Validate a record's fields; every error names the record file and the field's line."""
    data = doc.data
    doc.check_fields(FIELDS, f" (a registration holds {', '.join(FIELDS)})", "")
    for key in TEXT:
        if not isinstance(data[key], str) or not data[key].strip():
            raise BuildError(f"{key} must be non-empty text", doc.where(key))
    stem = Path(doc.rel).stem
    if data["id"] != stem:
        raise BuildError(f"id is {data['id']!r} but the file is {stem}.yaml: they must be equal", doc.where("id"))
    if not ID.fullmatch(stem):
        raise BuildError(f"a registration id must match {ID.pattern}", doc.where("id"))
    if not ID.fullmatch(data["study"]):
        raise BuildError(f"study must be a bundle folder name under bundles/ ({ID.pattern})", doc.where("study"))
    if not KEY_PATH.fullmatch(data["quantity"]):
        raise BuildError("quantity must be a key path into golden.json, such as key_recovery/overall/n", doc.where("quantity"))
    return Registration(
        id=data["id"], study=data["study"], claim=data["claim"].strip(),
        prediction=_condition(doc, "prediction", data["prediction"], data["quantity"]),
        kill=_condition(doc, "kill", data["kill"], None), kill_meaning=data["kill"]["meaning"].strip(),
        rationale=data["rationale"].strip(), author=data["author"].strip(), doc=doc)


# ---------------------------------------------------------------- data and history

def resolve_quantity(reg: Registration, resolver: Resolver, key: str) -> Resolved:
    """The number at the condition's key path in bundles/<study>/golden.json, with its receipt."""
    condition = reg.prediction if key == "prediction" else reg.kill
    field_where = reg.doc.where("quantity") if key == "prediction" else reg.doc.where("kill", "quantity")
    source = f"bundles/{reg.study}/golden.json"
    try:
        value = resolver.resolve(f"{source}#{condition.quantity}")
    except FixtureProblem as exc:
        raise BuildError(f"quantity {condition.quantity!r} does not resolve in {source}: {exc.message}",
                         field_where, exc.fixture) from None
    if not _number(value.value):
        raise BuildError(f"quantity {condition.quantity!r} in {source} is {value.value!r}, not a finite number",
                         field_where, value.location)
    return value


def data_files(root: Path, study: str) -> list[str]:
    """Repository-relative paths of every file of bundles/<study>/ that goes into its bundle."""
    folder = root / "bundles" / study
    return sorted(p.relative_to(root).as_posix() for p in folder.rglob("*")
                  if p.is_file() and not SKIPPED.search(p.relative_to(folder).as_posix()))


def _first_difference(then: bytes, now: bytes) -> int:
    old, new = then.decode("utf-8", "replace").split("\n"), now.decode("utf-8", "replace").split("\n")
    for number, (a, b) in enumerate(zip(old, new), start=1):
        if a != b:
            return number
    return min(len(old), len(new))


def check_frozen(reg: Registration, root: Path, history: History) -> Commit:
    """The record's first commit, checked to hold the record's bytes as they are now."""
    history.require_full_history()
    first = history.first_commit(reg.rel)
    if first is None:
        raise BuildError("is not committed: commit the record alone, before the data it predicts", f"{reg.rel}:1")
    now = (root / reg.rel).read_bytes()
    if history.holds(first.sha, reg.rel, now):
        return first   # the same blob id: the same bytes, without asking git for them
    then = history.content_at(first.sha, reg.rel)
    if then != now:
        line = _first_difference(then, now)
        raise BuildError(f"was edited after its freeze: at its first commit {first.short} ({first.date}) its sha256 "
                         f"was {sha256(then)[:16]}..., now it is {sha256(now)[:16]}... (first change on this line); "
                         "a registration is never edited: write a new record instead", f"{reg.rel}:{line}")
    return first


def _check_precedes(reg: Registration, first: Commit, holding: dict, history: History, at: str = "") -> None:
    """Every commit that gave a data file its content (`holding`: {file: commits}) must come after
    the record's first commit: a strict descendant of it, whatever branch it was made on."""
    for rel, commits in holding.items():
        if not commits:
            raise BuildError(f"{rel} is not committed in its current form, so the build cannot show the record came "
                             "first; commit the data", reg.doc.where("study"))
        for commit in commits:
            if not history.is_strict_ancestor(first.sha, commit.sha):
                held = f"held at {at[:12]} " if at else ""
                raise BuildError(f"is newer than its data: the record was first committed in {first.short} ({first.date}), "
                                 f"but {rel} {held}holds content committed in {commit.short} ({commit.date}), which "
                                 "does not come after it; a prediction must be committed before the data it predicts",
                                 reg.doc.where("study"))


def check_history(reg: Registration, root: Path, history: History) -> tuple[Commit, tuple]:
    """(the record's first commit, the data's first commits); BuildError naming the record's line."""
    first = check_frozen(reg, root, history)
    files = data_files(root, reg.study)
    if not files:
        raise BuildError(f"bundles/{reg.study}/ holds no data", reg.doc.where("study"))
    holding = history.introductions(files)
    _check_precedes(reg, first, holding, history)
    return first, _by_first_commit(files, holding)


def _by_first_commit(files: list[str], holding: dict) -> tuple:
    """((Commit, files), ...): the files grouped by the oldest commit that gave them their content."""
    by_commit: dict[str, list] = {}
    for rel in files:
        commit = holding[rel][0]
        by_commit.setdefault(commit.sha, [commit, []])[1].append(rel)
    return tuple(sorted(((c, tuple(f)) for c, f in by_commit.values()), key=lambda g: (g[0].date, g[0].sha)))


def verify(reg: Registration, root: Path, history: History, resolver: Resolver,
           supersession: Supersession | None = None) -> Verified:
    """A registration checked against git history and its study's data, with its verdict."""
    if supersession is not None:
        return verify_superseded(reg, root, history, supersession)
    if not (root / "bundles" / reg.study).is_dir():
        # Frozen before its data exist: the normal state between the two commits. It is listed as
        # awaiting data (its study name shown), never as a verdict.
        return Verified(reg, check_frozen(reg, root, history), (), None, None)
    value = resolve_quantity(reg, resolver, "prediction")
    kill_value = resolve_quantity(reg, resolver, "kill")
    commit, data = check_history(reg, root, history)
    return Verified(reg, commit, data, value, kill_value,
                    prediction_holds=reg.prediction.holds(value.value), kill_holds=reg.kill.holds(kill_value.value))


def verify_superseded(reg: Registration, root: Path, history: History, item: Supersession) -> Verified:
    """A superseded record, judged on its study's data as they were in commit `judged_at`: the
    record frozen, that commit on HEAD's history, the record before every commit that gave those
    data their content, and the verdict from that commit's golden.json."""
    first = check_frozen(reg, root, history)
    if not history.in_history(item.judged_at):
        raise BuildError(f"judged_at {item.short} is not a commit of HEAD's history: a record is judged on data "
                         "this history holds", item.judged_where)
    folder = f"bundles/{reg.study}"
    blobs = {rel: blob for rel, blob in history.files_at(item.judged_at, folder).items()
             if not SKIPPED.search(rel[len(folder) + 1:])}
    if f"{folder}/golden.json" not in blobs:
        raise BuildError(f"{folder}/golden.json is not in commit {item.short}: judged_at must be a commit holding "
                         f"the data {reg.id} was judged on", item.judged_where)
    files = sorted(blobs)
    holding = history.introductions(files, item.judged_at, blobs)
    _check_precedes(reg, first, holding, history, at=item.judged_at)
    source = f"{item.short}:{folder}/golden.json"
    if source not in history.parsed:   # records judged on one commit share its golden.json, parsed once
        history.parsed[source] = _golden_at(history.file_at(item.judged_at, f"{folder}/golden.json", MAX_BYTES), source)
    value = _quantity_at(reg, "prediction", history.parsed[source], item)
    kill_value = _quantity_at(reg, "kill", history.parsed[source], item)
    return Verified(reg, first, _by_first_commit(files, holding), value, kill_value,
                    prediction_holds=reg.prediction.holds(value.value), kill_holds=reg.kill.holds(kill_value.value),
                    superseded=item)


def _golden_at(data: bytes, source: str) -> Structured | Exception:
    """golden.json's bytes at a commit, parsed with the line of every value (or why not: the
    error each record judged on it reports at its own line)."""
    try:
        return Structured(source, data.decode("utf-8"), ".json")
    except (UnicodeDecodeError, FixtureProblem) as exc:
        return exc


def _quantity_at(reg: Registration, key: str, fixture, item: Supersession) -> Resolved:
    """The number at a condition's key path in golden.json as commit `judged_at` holds it
    (`fixture`: `_golden_at`'s answer); its receipt names the commit and the file as `git show
    COMMIT:FILE` does, with no link (the site publishes only the current files)."""
    condition = reg.prediction if key == "prediction" else reg.kill
    field_where = reg.doc.where("quantity") if key == "prediction" else reg.doc.where("kill", "quantity")
    source = f"{item.short}:bundles/{reg.study}/golden.json"
    try:
        if isinstance(fixture, Exception):
            raise fixture
        entry = find_entry(fixture, parse_key_path(condition.quantity))
    except UnicodeDecodeError:
        raise BuildError(f"{source} is not UTF-8 text", field_where) from None
    except (FixtureProblem, RefSyntaxError) as exc:
        raise BuildError(f"quantity {condition.quantity!r} does not resolve in {source}: {exc}", field_where) from None
    if entry is None or not _number(entry.value):
        found = "missing" if entry is None else repr(entry.value)
        raise BuildError(f"quantity {condition.quantity!r} in {source} is {found}, not a finite number", field_where)
    return Resolved(entry.value, source, entry.line, f"{source}#{condition.quantity}", "")


def load_all(root: Path, resolver: Resolver, errors, history: History | None = None,
             refusal=lambda rel: None) -> list[Verified]:
    """Every registrations/*.yaml, verified; each failure is a build error naming file and line.

    `refusal(rel)` is the path policy's reason not to read a file (None: it may be read)."""
    folder = root / FOLDER
    if not folder.is_dir():
        return []
    history = history or History(root)
    out = []
    try:
        supersessions, _doc = superseded.load(root, FOLDER, refusal)
    except BuildError as exc:
        errors.add(exc)
        supersessions = {}
    ids = set()
    try:
        for path, rel in record_files(root, folder, lambda name: name.endswith(".yaml"),
                                      "registrations/ holds records named <id>.yaml only", refusal, errors,
                                      skip=(superseded.NAME,)):
            ids.add(path.stem)
            try:
                out.append(verify(parse(load_record(path, rel)), root, history, resolver, supersessions.get(path.stem)))
            except BuildError as exc:
                errors.add(exc)
                if "shallow" in exc.message or "needs git" in exc.message or "not a git" in exc.message:
                    break  # one line says it all; the other records would repeat it
        else:
            for problem in superseded.check_names(supersessions, ids):
                errors.add(problem)
    finally:
        history.close()   # its hash-object and cat-file processes
    return out
