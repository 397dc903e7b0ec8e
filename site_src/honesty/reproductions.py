"""The reproduction registry: records under reproductions/<study>/, checked against the bundle
the build just made, and their SSH signatures (signatures.py) against reproductions/allowed_signers.

A record (written by `python reproduce.py --record`, see bundle_kit/record.py) names a bundle by
its file listing and holds the check's output and exit status. Against the current bundle it is:
- a reproduction, when it names the current bundle's file listing, its check exited 0 and its
  output is the bundle's expected output, character for character;
- a failed reproduction, when it names the current bundle but exited non-zero or printed
  something else (shown, never hidden);
- a run of an earlier bundle, when it names another file listing.
Only a record signed by a listed signer (`<name>.yaml.sig`) is any of the first two: an unsigned
record, or one whose signature does not verify, is listed as unverified and never counted,
whatever it says. A reproduction signed by the project's own key is the authors' run; one made
on a machine the project builds or measures on (reproductions/machines.yaml, or the machine
running this build) is labelled so; neither is counted as independent.

Records are counted as runs and signers, never as files: one run (its bundle listing, machine,
date, platform, Python, host, exit status and output) committed under two names, or signed by
two keys, is one run (`same_run_as` names the first), and independent reproductions are distinct
signers, each with a run of their own (a run signed by two keys counts once), with how many runs
each made.
"""
from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from bundle_kit import record as kit_record

from ..errors import BuildError
from . import signatures
from .signatures import UNSIGNED, Signature
from .yamlfile import Record, load_record, record_files

FOLDER = "reproductions"
MACHINES = "machines.yaml"
NAME = re.compile(r"[a-z0-9][a-z0-9._-]*\.yaml")
SIGNATURE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*\.yaml\.sig")
HEX64 = re.compile(r"[0-9a-f]{64}")
HEX16 = re.compile(r"[0-9a-f]{16}")
TEXT_FIELDS = ("study", "date", "platform", "python", "hostname", "output")
FIELDS = ("format", "study", "bundle_files_sha256", "files", "exit_status", "date", "platform",
          "python", "hostname", "machine_fingerprint", "output", "checksum")

REPRODUCED, FAILED, EARLIER = "reproduced", "failed reproduction", "run of an earlier bundle"
UNVERIFIED = "unverified"


@dataclass(frozen=True)
class Reproduction:
    rel: str                # repository-relative path of the record
    name: str               # file name without .yaml
    status: str             # REPRODUCED, FAILED, EARLIER or UNVERIFIED
    same_machine: bool      # made on a machine of the project's own
    date: str
    platform: str
    python: str
    hostname: str
    exit_status: int
    output: str
    output_line: int        # line of `output:` in the record, for its receipt
    bundle_files_sha256: str
    differing_files: tuple  # files whose sha256 differs from the current bundle's (or are missing)
    output_diff: str        # unified diff of the expected output against the record's ('' if equal)
    signature: Signature = UNSIGNED
    claims: str = ""        # an unverified record: what it says it shows (REPRODUCED or FAILED)
    signature_rel: str = ""  # repository-relative path of its signature file ('' when unsigned)
    machine_fingerprint: str = ""
    same_run_as: str = ""    # the name of an earlier-listed record of the very same run ('' when none)

    @property
    def run(self) -> tuple:
        """What makes a run one run: a record copied under another name, re-signed by another key,
        or given a new comment is still this run."""
        return (self.bundle_files_sha256, self.machine_fingerprint, self.date, self.platform, self.python,
                self.hostname, self.exit_status, self.output)

    @property
    def by_authors(self) -> bool:
        """Whether the record is a reproduction the project's own key signed."""
        return self.status == REPRODUCED and self.signature.project

    @property
    def independent(self) -> bool:
        """Whether the record counts as an independent reproduction."""
        return self.status == REPRODUCED and not self.same_machine and not self.signature.project

    @property
    def label(self) -> str:
        """The record's kind in words, as the page prints it."""
        if self.same_run_as:
            return f"{self._kind()}; the same run as {self.same_run_as}, counted once"
        return self._kind()

    def _kind(self) -> str:
        if self.status == REPRODUCED:
            if self.signature.project:
                return "reproduction by the authors (not independent)"
            return "reproduction on the project's own machine (not independent)" if self.same_machine \
                else "independent reproduction"
        if self.status == FAILED:
            return "failed reproduction" + (" on the project's own machine" if self.same_machine else "") + \
                (f" (exit status {self.exit_status})" if self.exit_status else "")
        if self.status == UNVERIFIED:
            said = "the expected output" if self.claims == REPRODUCED else "a failed check"
            return f"unverified record, not counted (it shows {said})"
        return EARLIER


def bundle_listing_digest(bundle) -> str:
    """The file-listing sha256 of a built bundle (site_src.bundles.Bundle), as a record names it."""
    return kit_record.listing_digest([(f.name, f.sha256) for f in bundle.files])


def project_machines(root: Path) -> set[str]:
    """Fingerprints of the project's own machines: reproductions/machines.yaml plus this one."""
    known = {kit_record.machine_fingerprint()}
    path = root / FOLDER / MACHINES
    if not path.is_file():
        return known
    doc = load_record(path, f"{FOLDER}/{MACHINES}")
    machines = doc.data.get("machines")
    if not isinstance(machines, list):
        raise BuildError("needs 'machines:', a list of {fingerprint, note}", doc.where("machines"))
    for index, entry in enumerate(machines):
        fingerprint = entry.get("fingerprint") if isinstance(entry, dict) else None
        if not isinstance(fingerprint, str) or not HEX16.fullmatch(fingerprint):
            raise BuildError("fingerprint must be the 16 hex digits a record's machine_fingerprint holds",
                             doc.where("machines", index))
        known.add(fingerprint)
    return known


def validate(doc: Record, study: str) -> None:
    """Raise BuildError (file:line) for a record that is malformed or was edited after it was written."""
    data = doc.data
    doc.check_fields(FIELDS, f"; a record holds {', '.join(FIELDS)}",
                     "; write records with `python reproduce.py --record`")
    above, written, line = kit_record.split_checksum(doc.text)
    if written != kit_record.checksum(above):
        raise BuildError("was edited after reproduce.py wrote it: its checksum does not match the lines above "
                         "(a record is committed exactly as printed)", f"{doc.rel}:{line or 1}")
    if data["format"] != kit_record.FORMAT:
        raise BuildError(f"format is {data['format']!r}; this build reads {kit_record.FORMAT}", doc.where("format"))
    for key in TEXT_FIELDS:
        if not isinstance(data[key], str):
            raise BuildError(f"{key} must be text", doc.where(key))
    if data["study"] != study:
        raise BuildError(f"is filed under {FOLDER}/{study}/ but records study {data['study']!r}", doc.where("study"))
    if not isinstance(data["exit_status"], int) or isinstance(data["exit_status"], bool) \
            or data["exit_status"] not in (0, 1, 2, 3):
        raise BuildError("exit_status must be 0, 1, 2 or 3", doc.where("exit_status"))
    files = data["files"]
    if not isinstance(files, dict) or not files or not all(
            isinstance(k, str) and isinstance(v, str) and HEX64.fullmatch(v) for k, v in files.items()):
        raise BuildError("files must map each file name to its sha256", doc.where("files"))
    if not isinstance(data["machine_fingerprint"], str) or not HEX16.fullmatch(data["machine_fingerprint"]):
        raise BuildError("machine_fingerprint must be 16 hex digits", doc.where("machine_fingerprint"))
    digest = data["bundle_files_sha256"]
    if not isinstance(digest, str) or digest != kit_record.listing_digest(list(files.items())):
        raise BuildError("bundle_files_sha256 is not the digest of the files listed under it", doc.where("bundle_files_sha256"))


def classify(doc: Record, bundle, machines: set[str], signature: Signature = UNSIGNED,
             signature_rel: str = "") -> Reproduction:
    """A validated record, compared with the bundle this build made."""
    data = doc.data
    current = {f.name: f.sha256 for f in bundle.files}
    recorded = data["files"]
    differing = tuple(sorted(n for n in set(current) | set(recorded) if current.get(n) != recorded.get(n)))
    output = data["output"]
    diff, claims = "", ""
    if data["bundle_files_sha256"] != bundle_listing_digest(bundle):
        status = EARLIER
    elif output == bundle.expected_output and data["exit_status"] == 0:
        status = REPRODUCED
    else:
        status = FAILED
        diff = "".join(difflib.unified_diff(bundle.expected_output.splitlines(True), output.splitlines(True),
                                            "expected output (this build)", f"{doc.rel}"))
    if status != EARLIER and not signature.verified:   # whatever it says, nobody vouches for it
        status, claims = UNVERIFIED, status
    return Reproduction(
        rel=doc.rel, name=Path(doc.rel).stem, status=status,
        same_machine=data["machine_fingerprint"] in machines,
        date=data["date"], platform=data["platform"], python=data["python"], hostname=data["hostname"],
        exit_status=data["exit_status"], output=output, output_line=doc.lines[("output",)],
        bundle_files_sha256=data["bundle_files_sha256"], differing_files=differing, output_diff=diff,
        signature=signature, claims=claims, signature_rel=signature_rel,
        machine_fingerprint=data["machine_fingerprint"])


def load_reproductions(root: Path, study: str, bundle, errors, machines: set[str] | None = None,
                       refusal=lambda rel: None, signers: dict | None = None) -> list[Reproduction]:
    """Every record of `study`, checked, with its signature; a bad record is a build error and is
    left out.

    `refusal(rel)` is the path policy's reason not to read a file (None: it may be read);
    `signers` is signatures.load_signers' answer (read here when not given)."""
    folder = root / FOLDER / study
    if not folder.is_dir():
        return []
    if machines is None:
        try:
            machines = project_machines(root)
        except BuildError as exc:
            errors.add(exc)
            machines = {kit_record.machine_fingerprint()}
    if signers is None:
        try:
            signers = signatures.load_signers(root, FOLDER, refusal)
        except BuildError as exc:
            errors.add(exc)
            signers = {}
    records, sigs = [], {}
    for path, rel in record_files(root, folder, lambda name: NAME.fullmatch(name) or SIGNATURE_NAME.fullmatch(name),
                                  "a reproduction record is named <name>.yaml, its signature <name>.yaml.sig "
                                  "(lower-case letters, digits, '.', '_', '-')", refusal, errors):
        (sigs.__setitem__(path.name[:-len(signatures.SIG_SUFFIX)], path) if path.name.endswith(signatures.SIG_SUFFIX)
         else records.append((path, rel)))
    for name in sorted(set(sigs) - {path.name for path, _rel in records}):
        errors.add(BuildError(f"is a signature of {name}, which is not a record here", f"{FOLDER}/{study}/{name}.sig"))
    keygen = signatures.keygen_path() if sigs else None
    if sigs and keygen is None:
        errors.add(BuildError("verifying a signed record needs ssh-keygen, which is not installed "
                              "(Debian: apt-get install openssh-client)", f"{FOLDER}/{study}/"))
        return []
    out = []
    known = signatures.GoodSignatures(root) if sigs else None
    for path, rel in records:
        try:
            doc = load_record(path, rel)
            validate(doc, study)
        except BuildError as exc:
            errors.add(exc)
            continue
        if path.name in sigs:
            signed = signatures.verify(path, sigs[path.name], signers, keygen, known)
            out.append(classify(doc, bundle, machines, signed, f"{rel}{signatures.SIG_SUFFIX}"))
        else:
            out.append(classify(doc, bundle, machines))
    if known is not None:
        known.save()
    return mark_same_runs(out)


def mark_same_runs(found: list[Reproduction]) -> list[Reproduction]:
    """The records, each copy of an earlier-listed record's run naming that record."""
    first: dict = {}
    out = []
    for rep in found:
        earlier = first.setdefault(rep.run, rep.name)
        out.append(dataclasses.replace(rep, same_run_as=earlier) if earlier != rep.name else rep)
    return out


def independent_count(reproductions: list[Reproduction]) -> int:
    """How many distinct signers each have an independent run of their own: the largest pairing
    of signers with distinct runs, so that one run signed by several keys counts once."""
    runs_of: dict = {}
    for rep in reproductions:
        if rep.independent:
            runs_of.setdefault(rep.signature.signer, set()).add(rep.run)
    taken: dict = {}     # run -> signer

    def place(signer, seen) -> bool:
        for run in sorted(runs_of[signer], key=repr):
            if run not in seen:
                seen.add(run)
                if run not in taken or place(taken[run], seen):
                    taken[run] = signer
                    return True
        return False
    return sum(place(signer, set()) for signer in sorted(runs_of))


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def reproduction_line(reproductions: list[Reproduction]) -> str:
    """The study header's line; 'No independent reproduction recorded' only while there is none.
    Reproductions are counted by signer, the other kinds by run; unverified records by file."""
    def runs(keep) -> set:
        return {r.run for r in reproductions if keep(r)}
    independent = independent_count(reproductions)
    authors = runs(lambda r: r.by_authors)
    own = runs(lambda r: r.status == REPRODUCED and not r.independent and not r.by_authors)
    failed = runs(lambda r: r.status == FAILED)
    unverified = [r for r in reproductions if r.status == UNVERIFIED]
    earlier = runs(lambda r: r.status == EARLIER)
    head = "No independent reproduction recorded"
    if independent:
        by_signer: dict = {}
        for rep in reproductions:
            if rep.independent:
                by_signer.setdefault(rep.signature.signer, set()).add(rep.run)
        who = [f"{signer} ({_count(len(made), 'run', 'runs')})" for signer, made in sorted(by_signer.items())]
        shared = "; a run signed by more than one key counts once" if independent < len(by_signer) else ""
        head = (f"{_count(independent, 'independent reproduction', 'independent reproductions')} of this bundle, "
                f"by {' and '.join([', '.join(who[:-1]), who[-1]] if len(who) > 1 else who)}{shared}")
    rest = []
    if authors:
        rest.append(f"{_count(len(authors), 'run', 'runs')} by the authors matched the expected output (not independent)")
    if own:
        rest.append(f"{_count(len(own), 'run', 'runs')} on the project's own machine matched the expected output (not independent)")
    if failed:
        rest.append(_count(len(failed), "failed reproduction", "failed reproductions"))
    if unverified:
        rest.append(f"{_count(len(unverified), 'unverified record', 'unverified records')} (unsigned, or not signed "
                    "by a listed signer), not counted")
    if earlier:
        rest.append(f"{_count(len(earlier), 'run', 'runs')} of an earlier bundle")
    return head + ("; " + "; ".join(rest) if rest else "")
