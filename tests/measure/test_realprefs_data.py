"""The realprefs study's real data (issue 30): committed bytes verified against their provenance,
refused when changed, parsed into pairs whose counts are the documented ones."""
from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from measure.errors import MeasureError
from measure.studies.realprefs import data as rd

REPO = Path(__file__).resolve().parents[2]
# sha256 prefixes and record counts as issue 30 states them
ISSUE = {"harmless-base": ("ebfaaed2", 2312), "helpful-base": ("8be3fc1a", 2354),
         "helpful-online": ("2094b210", 1137), "helpful-rejection-sampled": ("6186fc69", 2749),
         "batch13": (None, 1097), "batch18": (None, 674), "cnndm0": (None, 437)}
# pairs kept per objective, as data/realprefs/README.md documents them
DOCUMENTED = {"helpfulness": 6185, "harmlessness": 2303, "summary": 2196}


@pytest.fixture(scope="module")
def loaded():
    return {s: rd.load_source(s) for s in rd.SOURCES}


def _copy_data(tmp_path: Path) -> Path:
    for folder in ("hh-rlhf", "summarize-feedback"):
        shutil.copytree(rd.DATA / folder, tmp_path / folder)
    return tmp_path


def test_every_source_is_the_one_the_issue_names(loaded):
    for source, (prefix, records) in ISSUE.items():
        folder, rel, _o, _f = rd.SOURCES[source]
        record = rd.provenance(folder)["files"][rel]
        if prefix:
            assert record["sha256"].startswith(prefix), source
        assert record["records"] == records, source
        pairs, drops = loaded[source]
        assert len(pairs) + sum(drops.values()) == records, source
    for folder in ("hh-rlhf", "summarize-feedback"):
        doc = rd.provenance(folder)
        assert (rd.DATA / folder / doc["licence"]["file"]).read_text(encoding="utf-8").count(doc["licence"]["copyright"]) == 1
        assert len(doc["source"]["commit"]) == 40


def test_counts_match_the_documented_ones(loaded):
    by_objective = Counter(p.objective for pairs, _ in loaded.values() for p in pairs)
    assert dict(by_objective) == DOCUMENTED
    readme = (rd.DATA / "realprefs" / "README.md").read_text(encoding="utf-8")
    for objective, n in DOCUMENTED.items():
        assert f"{objective} {n:,}" in readme
    for source, (pairs, _drops) in loaded.items():
        assert f"| {source} | {ISSUE[source][1]:,} | {len(pairs):,} |" in readme


def test_a_one_byte_change_is_refused_with_one_line_naming_the_file(tmp_path):
    data = _copy_data(tmp_path)
    target = data / "summarize-feedback" / "comparisons" / "batch18.json"
    raw = bytearray(target.read_bytes())
    raw[1000] ^= 0x01
    target.write_bytes(bytes(raw))
    with pytest.raises(MeasureError, match=r"comparisons/batch18\.json: sha256 .* refusing it"):
        rd.load_source("batch18", data)
    rd.load_source("batch13", data)  # the untouched files still load
    out = subprocess.run([sys.executable, "-m", "measure.studies.realprefs.data", "--data", str(data)],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "batch18.json: sha256" in out.stderr


def test_a_gz_changed_inside_is_refused_even_when_it_still_decompresses(tmp_path):
    data = _copy_data(tmp_path)
    target = data / "hh-rlhf" / "helpful-online" / "test.jsonl.gz"
    text = gzip.decompress(target.read_bytes()).decode("utf-8")
    first = json.loads(text.splitlines()[0])
    first["chosen"], first["rejected"] = first["rejected"], first["chosen"]  # a flipped label
    lines = text.splitlines()
    lines[0] = json.dumps(first)
    target.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), mtime=0))
    with pytest.raises(MeasureError, match=r"helpful-online/test\.jsonl\.gz: sha256"):
        rd.load_source("helpful-online", data)


def test_a_parse_that_disagrees_with_the_recorded_counts_is_refused(tmp_path):
    data = _copy_data(tmp_path)
    prov = data / "hh-rlhf" / "PROVENANCE.yaml"
    prov.write_text(prov.read_text(encoding="utf-8").replace("pairs: 1132", "pairs: 1133"), encoding="utf-8")
    with pytest.raises(MeasureError, match="parsed .* but hh-rlhf/PROVENANCE.yaml states"):
        rd.load_source("helpful-online", data)


def test_hh_pairs_are_the_final_replies_to_one_shared_dialogue(loaded):
    for source in ("harmless-base", "helpful-base", "helpful-online", "helpful-rejection-sampled"):
        pairs, _ = loaded[source]
        raw = gzip.decompress(rd.verified_bytes(source)).decode("utf-8").splitlines()
        for p in pairs[::50]:
            rec = json.loads(raw[p.line - 1])
            assert p.prompt.startswith("Human:") and p.prompt in rec["chosen"] and p.prompt in rec["rejected"]
            assert rec["chosen"].rstrip().endswith(p.chosen) and rec["rejected"].rstrip().endswith(p.rejected)
            assert rd.ASSISTANT not in p.chosen and p.chosen != p.rejected
        assert len({p.pair_id for p in pairs}) == len(pairs)


def test_summary_pairs_keep_the_choice_the_worker_and_the_confidence(loaded):
    for source in ("batch13", "batch18", "cnndm0"):
        pairs, _ = loaded[source]
        raw = rd.verified_bytes(source).decode("utf-8").splitlines()
        for p in pairs[::25]:
            rec = json.loads(raw[p.line - 1])
            assert p.chosen == rec["summaries"][rec["choice"]]["text"].strip() and p.choice == rec["choice"]
            assert p.rejected == rec["summaries"][1 - rec["choice"]]["text"].strip()
            assert (p.worker, p.confidence) == (rec["worker"], rec["extra"]["confidence"])
            doc = rec["info"].get("post", rec["info"].get("article"))
            assert p.prompt == doc.strip() and p.group.endswith(rd.group_key("x", rec["info"]["id"])[2:])


def test_a_file_missing_from_the_provenance_record_is_refused(tmp_path):
    data = _copy_data(tmp_path)
    prov = data / "summarize-feedback" / "PROVENANCE.yaml"
    doc = yaml.safe_load(prov.read_text(encoding="utf-8"))
    doc["files"] = [f for f in doc["files"] if f["path"] != "comparisons/cnndm0.json"]
    prov.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(MeasureError, match="cnndm0.json: not listed in summarize-feedback/PROVENANCE.yaml"):
        rd.load_source("cnndm0", data)


# ----- the split ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sides(loaded):
    from measure.studies.realprefs import split
    pairs = [p for ps, _ in loaded.values() for p in ps]
    return pairs, split.load_split(pairs)


def test_no_group_prompt_post_or_first_human_turn_is_on_both_sides(sides):
    pairs, side = sides
    seen = {}
    for p in pairs:  # recomputed from the texts, not read from the group keys
        keys = [("group", p.group), ("prompt", p.prompt)]  # a summary's prompt is its document
        if p.objective != "summary":
            keys.append(("first human turn", rd.normalise(rd.first_human_turn(p.prompt))))
        for key in keys:
            assert seen.setdefault(key, side[p.pair_id]) == side[p.pair_id], key
    assert sum(1 for k in seen if k[0] == "first human turn") > 8000


def test_split_file_is_current_holds_every_pair_once_and_enough_held_out(sides):
    from measure.studies.realprefs import split
    pairs, side = sides
    assert sorted(side) == sorted(p.pair_id for p in pairs)
    doc = json.loads(split.SPLIT_FILE.read_text(encoding="utf-8"))
    assert doc["seed"] == split.SEED and doc["token_budget"]["max_tokens"] == 128
    for objective in rd.OBJECTIVES:
        n_eval = sum(1 for p in pairs if p.objective == objective and side[p.pair_id] == "eval")
        assert n_eval == doc["counts"][objective]["eval_pairs"] >= split.MIN_EVAL
        assert len(doc["eval"][objective]) + len(doc["train"][objective]) == DOCUMENTED[objective]
    for source in rd.SOURCES:
        folder, rel, _o, _f = rd.SOURCES[source]
        assert doc["sources"][source]["sha256"] == rd.provenance(folder)["files"][rel]["sha256"]


def test_a_split_file_the_rule_does_not_regenerate_is_refused(sides, tmp_path):
    from measure.studies.realprefs import split
    pairs, _ = sides
    doc = json.loads(split.SPLIT_FILE.read_text(encoding="utf-8"))
    moved = doc["eval"]["harmlessness"].pop()
    doc["train"]["harmlessness"].append(moved)
    edited = tmp_path / "split.json"
    edited.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    with pytest.raises(MeasureError, match="split.json: not the split the rule gives"):
        split.load_split(pairs, edited)


def test_the_token_budget_keeps_the_reply_and_fills_with_the_prompt_tail():
    from measure.studies.realprefs.budget import assemble
    prompt, reply = list(range(100, 200)), list(range(500, 520))
    ids = assemble(prompt, reply, cls_id=1, sep_id=2, max_tokens=32)
    assert len(ids) == 32 and ids[0] == 1 and ids[-1] == 2
    assert ids[-21:-1] == reply and ids[1:10] == prompt[-9:] and ids[10] == 2
    long = list(range(1000, 1100))
    assert assemble(prompt, long, 1, 2, 32) == [1, 2, *long[:29], 2]
    assert assemble([], [7], 1, 2, 32) == [1, 2, 7, 2]
