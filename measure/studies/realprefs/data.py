"""The real human preferences of the realprefs study (issue 30): verified bytes in, pairs out.

Two committed sources, each a folder with its exact source files, a `PROVENANCE.yaml` and the
licence text:

- `data/hh-rlhf/`: Anthropic's HH-RLHF test splits (crowd workers' pairwise choices between two
  assistant replies to the same dialogue). `harmless-base` gives the harmlessness pairs, the three
  helpful splits the helpfulness pairs.
- `data/summarize-feedback/`: OpenAI's summarize-from-feedback comparisons (labellers' choices
  between two summaries of one Reddit post or CNN/DM article, with worker id and confidence),
  the summary-quality pairs.

Every file is checked against its folder's `PROVENANCE.yaml` (size and sha256) before a byte of
it is parsed; any other content is refused with one line naming the file. How a record becomes a
`Pair`, what is dropped and why, and the grouping that the split respects are written in
`data/realprefs/README.md`; the parse's counts must equal those PROVENANCE.yaml records, so a
changed parser cannot silently change the data either.

`python -m measure.studies.realprefs.data` verifies everything and prints the counts; exit 2 with
one line on any problem.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import re
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import yaml

from measure.errors import MeasureError

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "data"
OBJECTIVES = ("helpfulness", "harmlessness", "summary")
# source name -> (folder under data/, path in the folder, objective, record format)
SOURCES = {
    "harmless-base": ("hh-rlhf", "harmless-base/test.jsonl.gz", "harmlessness", "hh"),
    "helpful-base": ("hh-rlhf", "helpful-base/test.jsonl.gz", "helpfulness", "hh"),
    "helpful-online": ("hh-rlhf", "helpful-online/test.jsonl.gz", "helpfulness", "hh"),
    "helpful-rejection-sampled": ("hh-rlhf", "helpful-rejection-sampled/test.jsonl.gz", "helpfulness", "hh"),
    "batch13": ("summarize-feedback", "comparisons/batch13.json", "summary", "summarize"),
    "batch18": ("summarize-feedback", "comparisons/batch18.json", "summary", "summarize"),
    "cnndm0": ("summarize-feedback", "comparisons/cnndm0.json", "summary", "summarize"),
}
ASSISTANT = "\n\nAssistant:"
HUMAN = "Human:"
SOURCE_LIMIT = 16 << 20  # bytes of one source file (the largest is 2.3 MB)
DROP_REASONS = ("prefix_mismatch", "identical_replies", "empty_reply")


@dataclass(frozen=True)
class Pair:
    """One human preference: `chosen` was preferred to `rejected` as a reply to `prompt`.

    `group` keys what must stay on one side of the split (the normalised first human turn of an
    HH dialogue; the post or article of a summary). `line` is the record's line in its source
    file (from 1). The summary pairs also keep the labeller's `worker` id, `confidence` (1 to 9)
    and `choice` (the index, 0 or 1, of the chosen summary in the record)."""

    pair_id: str
    objective: str
    source: str
    group: str
    prompt: str
    chosen: str
    rejected: str
    line: int = 0
    worker: str | None = None
    confidence: int | None = None
    choice: int | None = None


def _rel(path: Path) -> str:
    try:
        return Path(path).relative_to(REPO).as_posix()
    except ValueError:
        return str(path)


# ----- provenance ---------------------------------------------------------------------------------
def provenance(folder: str, data: Path = DATA) -> dict:
    """A source folder's PROVENANCE.yaml, its `files` keyed by path; one-line error when unreadable."""
    path = Path(data) / folder / "PROVENANCE.yaml"
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise MeasureError(f"{_rel(path)}: cannot read the provenance record "
                           f"({str(exc).splitlines()[0]})") from None
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, dict) and "path" in f for f in files):
        raise MeasureError(f"{_rel(path)}: `files` must be a list of records, each with a `path`")
    return {**doc, "files": {f["path"]: f for f in files}}


def verified_bytes(source: str, data: Path = DATA) -> bytes:
    """The bytes of `source`'s file, after checking size and sha256 against PROVENANCE.yaml."""
    folder, rel, _objective, _format = SOURCES[source]
    record = provenance(folder, data)["files"].get(rel)
    path = Path(data) / folder / rel
    if record is None:
        raise MeasureError(f"{_rel(path)}: not listed in {folder}/PROVENANCE.yaml; refusing it")
    try:
        with open(path, "rb") as handle:
            raw = handle.read(SOURCE_LIMIT + 1)
    except OSError as exc:
        raise MeasureError(f"{_rel(path)}: cannot read it ({exc.strerror})") from None
    got = hashlib.sha256(raw).hexdigest()
    if len(raw) != record.get("bytes") or got != record.get("sha256"):
        raise MeasureError(f"{_rel(path)}: sha256 {got[:16]}... ({len(raw)} bytes) is not the file "
                           f"{folder}/PROVENANCE.yaml records ({str(record.get('sha256'))[:16]}..., "
                           f"{record.get('bytes')} bytes); refusing it")
    return raw


# ----- parsing --------------------------------------------------------------------------------------
def normalise(text: str) -> str:
    """Text reduced for grouping: Unicode NFKC, case-folded, every run of non-alphanumeric
    characters one space, trimmed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[\W_]+", " ", text).split())


def first_human_turn(prompt: str) -> str:
    """The first human turn of an HH dialogue prompt (the text after its first `Human:`, up to the
    first assistant turn)."""
    start = prompt.find(HUMAN)
    body = prompt[start + len(HUMAN):] if start >= 0 else prompt
    return body.split(ASSISTANT, 1)[0].strip()


def group_key(kind: str, text: str) -> str:
    """A short stable key for a group: `kind-` and 16 hex digits of the sha256 of `text`."""
    return f"{kind}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}"


def _lines(raw: bytes, path: str, gz: bool) -> list[str]:
    try:
        text = (gzip.decompress(raw) if gz else raw).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise MeasureError(f"{path}: cannot decode it ({exc})") from None
    return text.splitlines()


def _record(line: str, path: str, number: int) -> dict:
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as exc:
        raise MeasureError(f"{path}:{number}: not a JSON record ({exc.msg})") from None
    if not isinstance(rec, dict):
        raise MeasureError(f"{path}:{number}: a record is a JSON object")
    return rec


def _hh_pairs(source: str, raw: bytes, path: str, drops: dict) -> list[Pair]:
    objective = SOURCES[source][2]
    out = []
    for number, line in enumerate(_lines(raw, path, gz=True), start=1):
        rec = _record(line, path, number)
        chosen, rejected = rec.get("chosen"), rec.get("rejected")
        if not isinstance(chosen, str) or not isinstance(rejected, str):
            raise MeasureError(f"{path}:{number}: `chosen` and `rejected` must be text")
        ic, ir = chosen.rfind(ASSISTANT), rejected.rfind(ASSISTANT)
        if ic < 0 or ir < 0 or chosen[:ic] != rejected[:ir]:
            drops["prefix_mismatch"] += 1  # the two dialogues differ before their final reply
            continue
        reply_c, reply_r = chosen[ic + len(ASSISTANT):].strip(), rejected[ir + len(ASSISTANT):].strip()
        if not reply_c or not reply_r:
            drops["empty_reply"] += 1
            continue
        if reply_c == reply_r:
            drops["identical_replies"] += 1
            continue
        prompt = chosen[:ic].strip()
        out.append(Pair(f"{source}-{number:05d}", objective, source,
                        group_key("hh", normalise(first_human_turn(prompt))),
                        prompt, reply_c, reply_r, line=number))
    return out


def _summarize_pairs(source: str, raw: bytes, path: str, drops: dict) -> list[Pair]:
    out = []
    for number, line in enumerate(_lines(raw, path, gz=False), start=1):
        rec = _record(line, path, number)
        try:
            info, summaries, choice = rec["info"], rec["summaries"], rec["choice"]
            texts = [s["text"].strip() for s in summaries]
            document = info["article"] if "article" in info else info["post"]
            kind = "cnndm" if "article" in info else "tldr"
            doc_id, worker = str(info["id"]), str(rec["worker"])
            confidence = rec["extra"]["confidence"]
        except (KeyError, TypeError, AttributeError):
            raise MeasureError(f"{path}:{number}: a comparison needs info.id, info.post or "
                               f"info.article, summaries[].text, choice, worker, extra.confidence") from None
        if len(texts) != 2 or choice not in (0, 1) or not isinstance(document, str):
            raise MeasureError(f"{path}:{number}: a comparison has two summaries and a choice of 0 or 1")
        if not texts[0] or not texts[1]:
            drops["empty_reply"] += 1
            continue
        if texts[0] == texts[1]:
            drops["identical_replies"] += 1
            continue
        out.append(Pair(f"{source}-{number:05d}", "summary", source, group_key(kind, doc_id),
                        document.strip(), texts[choice], texts[1 - choice], line=number,
                        worker=worker, confidence=int(confidence), choice=choice))
    return out


def load_source(source: str, data: Path = DATA) -> tuple[list[Pair], dict]:
    """(pairs, {drop reason: count}) of one source, its bytes verified first and its counts
    checked against the `records`, `pairs` and `dropped` PROVENANCE.yaml states."""
    if source not in SOURCES:
        raise MeasureError(f"unknown source {source!r} (known: {', '.join(SOURCES)})")
    folder, rel, _objective, fmt = SOURCES[source]
    raw = verified_bytes(source, data)
    path = f"{_rel(Path(data) / folder / rel)}"
    drops = dict.fromkeys(DROP_REASONS, 0)
    pairs = (_hh_pairs if fmt == "hh" else _summarize_pairs)(source, raw, path, drops)
    record = provenance(folder, data)["files"][rel]
    counted = {"records": len(pairs) + sum(drops.values()), "pairs": len(pairs), "dropped": drops}
    stated = {k: record.get(k) for k in counted}
    if counted != stated:
        raise MeasureError(f"{path}: parsed {counted}, but {folder}/PROVENANCE.yaml states {stated}")
    return pairs, drops


def load_pairs(data: Path = DATA) -> list[Pair]:
    """Every pair of every source, in the order of `SOURCES` and then of the file."""
    out = []
    for source in SOURCES:
        out.extend(load_source(source, data)[0])
    return out


def main(argv: list[str] | None = None) -> int:
    """Verify every source file and print its counts; exit 2 with one line on any problem."""
    import argparse
    parser = argparse.ArgumentParser(prog="python -m measure.studies.realprefs.data",
                                     description="verify the realprefs sources and print their counts")
    parser.add_argument("--data", type=Path, default=DATA, help="the data folder (default data/)")
    args = parser.parse_args(argv)
    try:
        totals = dict.fromkeys(OBJECTIVES, 0)
        for source in SOURCES:
            pairs, drops = load_source(source, args.data)
            totals[SOURCES[source][2]] += len(pairs)
            dropped = ", ".join(f"{k} {v}" for k, v in drops.items() if v) or "none"
            print(f"{source}: {len(pairs)} pairs ({SOURCES[source][2]}; dropped: {dropped})")
        print("objectives: " + ", ".join(f"{k} {v}" for k, v in totals.items()))
    except MeasureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
