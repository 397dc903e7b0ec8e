"""SSH signatures of reproduction records, as git signs commits with SSH keys.

A record `reproductions/<study>/<name>.yaml` is signed by whoever ran it:

    ssh-keygen -Y sign -f ~/.ssh/id_ed25519 -n reproduction-record@preference-sites <name>.yaml

which writes `<name>.yaml.sig` beside it. The build verifies each signature with
`ssh-keygen -Y verify` against `reproductions/allowed_signers`, committed in the repository: one
signer a line, in OpenSSH's allowed-signers format restricted to what a record needs,

    PRINCIPAL [namespaces="reproduction-record@preference-sites"] KEYTYPE BASE64-KEY [COMMENT]

The principal `authors@preference-sites` is the project's own key; a record it signs is the
authors' run, never an independent one. Options that would make a record's standing depend on
the day of the build (`valid-after`, `valid-before`) or on keys not listed (`cert-authority`)
are refused, as are principal patterns and lists, and a key listed twice.

The signature names its key, so the build finds the signer here (a key not listed is not
verified at all) and asks ssh-keygen only to check the bytes, with that one line as the file.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bundle_kit.record import SIGNING_NAMESPACE
from safe_io import write_atomic

from ..errors import BuildError

NAMESPACE = SIGNING_NAMESPACE
PROJECT_SIGNER = "authors@preference-sites"
ALLOWED = "allowed_signers"
SIG_SUFFIX = ".sig"
MAX_ALLOWED_BYTES = 64 * 1024
MAX_SIG_BYTES = 16 * 1024
TIMEOUT_S = 30
PRINCIPAL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+@-]*")
KEY_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa",
             "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com")
ARMOR = re.compile(r"-----BEGIN SSH SIGNATURE-----\n([A-Za-z0-9+/=\n]+)-----END SSH SIGNATURE-----\n?")


@dataclass(frozen=True)
class Signer:
    principal: str
    key_type: str
    key: str            # base64 of the public key blob, as in authorized_keys
    line: int           # line in allowed_signers

    @property
    def project(self) -> bool:
        """Whether this is the project's own key."""
        return self.principal == PROJECT_SIGNER

    def allowed_line(self) -> str:
        """The signer's line in allowed_signers, as ssh-keygen -Y verify reads it."""
        return f'{self.principal} namespaces="{NAMESPACE}" {self.key_type} {self.key}\n'


@dataclass(frozen=True)
class Signature:
    """What the build found about one record's signature."""

    signer: str = ""      # the principal, when the signature verified
    project: bool = False  # the signer is the project's own key
    problem: str = ""     # why it is not verified ('' when it is)

    @property
    def verified(self) -> bool:
        """Whether the signature verified against an allowed signer."""
        return bool(self.signer)

    @property
    def text(self) -> str:
        """Who signed, as the page prints it, or why the signature is not verified."""
        if self.verified:
            return f"{self.signer} (the project's own key)" if self.project else self.signer
        return self.problem


UNSIGNED = Signature(problem="unsigned")


def load_signers(root: Path, folder: str, refusal=lambda rel: None) -> dict[str, Signer]:
    """{base64 key: Signer} from FOLDER/allowed_signers ({} without the file). Raises BuildError
    naming the file and line of the first problem."""
    rel = f"{folder}/{ALLOWED}"
    path = root / rel
    if not path.exists() and not path.is_symlink():
        return {}
    why = refusal(rel)
    if why:
        raise BuildError(why, rel)
    raw = path.read_bytes()
    if len(raw) > MAX_ALLOWED_BYTES:
        raise BuildError(f"is {len(raw):,} bytes; an allowed-signers file may hold {MAX_ALLOWED_BYTES:,}", rel)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BuildError(f"is not UTF-8 text (byte {exc.start})", rel) from None
    signers: dict[str, Signer] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        signer = _signer(line, number, f"{rel}:{number}")
        if signer.key in signers:
            raise BuildError(f"lists the key of {signers[signer.key].principal} (line {signers[signer.key].line}) "
                             "again: one key names one signer", f"{rel}:{number}")
        signers[signer.key] = signer
    return signers


def _signer(line: str, number: int, where: str) -> Signer:
    fields = line.split()
    if len(fields) < 3:
        raise BuildError("an allowed signer is PRINCIPAL [namespaces=\"...\"] KEYTYPE KEY [COMMENT]", where)
    principal, rest = fields[0], fields[1:]
    if not PRINCIPAL.fullmatch(principal):
        raise BuildError(f"principal {principal[:40]!r} must be one name such as alice@example.org "
                         "(no list, no pattern)", where)
    if rest[0] not in KEY_TYPES:
        _options(rest[0], where)
        rest = rest[1:]
    if len(rest) < 2 or rest[0] not in KEY_TYPES:
        raise BuildError(f"key type must be one of {', '.join(KEY_TYPES)}", where)
    key_type, key = rest[0], rest[1]
    try:
        blob = base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        raise BuildError("the key is not base64", where) from None
    if _string(blob, 0)[0] != key_type.encode():
        raise BuildError(f"the key is not a {key_type} key", where)
    return Signer(principal, key_type, key, number)


def _options(text: str, where: str) -> None:
    """Only `namespaces="..."` naming this namespace is accepted."""
    for option in re.findall(r'(?:[^,"]|"[^"]*")+', text):
        name, _eq, value = option.partition("=")
        if name.lower() == "namespaces":
            if NAMESPACE not in value.strip('"').split(","):
                raise BuildError(f"namespaces={value} leaves out {NAMESPACE}: this key could sign no record", where)
        elif name.lower() == "cert-authority":
            raise BuildError("cert-authority is not accepted: list each signer's own key", where)
        elif name.lower() in ("valid-after", "valid-before"):
            raise BuildError(f"{name} is not accepted: a record's standing would depend on the day of the build", where)
        else:
            raise BuildError(f"unknown option {name[:40]!r} (only namespaces=\"{NAMESPACE}\" is accepted)", where)


def _string(blob: bytes, at: int) -> tuple[bytes, int]:
    """One SSH wire-format string at `at`: (its bytes, the offset after it); b'' when malformed."""
    if at + 4 > len(blob):
        return b"", len(blob) + 1
    size = int.from_bytes(blob[at:at + 4], "big")
    end = at + 4 + size
    return (blob[at + 4:end], end) if end <= len(blob) else (b"", len(blob) + 1)


def parse_signature(data: bytes) -> tuple[str, str] | str:
    """(base64 public key, namespace) of an armored SSH signature, or the reason it is not one."""
    if len(data) > MAX_SIG_BYTES:
        return f"is over {MAX_SIG_BYTES:,} bytes, which no SSH signature is"
    match = ARMOR.fullmatch(data.decode("ascii", "replace").replace("\r\n", "\n"))
    if match is None:
        return "is not an SSH signature (-----BEGIN SSH SIGNATURE-----)"
    try:
        blob = base64.b64decode(match.group(1).replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        return "is not an SSH signature (its body is not base64)"
    if blob[:6] != b"SSHSIG" or int.from_bytes(blob[6:10], "big") != 1:
        return "is not an SSH signature of version 1 (SSHSIG)"
    key, at = _string(blob, 10)
    namespace, at = _string(blob, at)
    if not key or at > len(blob):
        return "is a truncated SSH signature"
    return base64.b64encode(key).decode(), namespace.decode("utf-8", "replace")


def verify(record: Path, signature: Path, signers: dict[str, Signer], keygen: str,
           known: dict | None = None) -> Signature:
    """Whether `signature` is a good signature of `record`'s bytes by a listed signer. `known`
    ({key: principal}, see `GoodSignatures`) holds the signatures ssh-keygen already accepted:
    the same bytes, the same key and the same principal are not asked again."""
    data = signature.read_bytes()
    parsed = parse_signature(data)
    if isinstance(parsed, str):
        return Signature(problem=f"unverified: the signature {parsed}")
    key, namespace = parsed
    if namespace != NAMESPACE:
        return Signature(problem=f"unverified: signed for {namespace[:60]!r}, not {NAMESPACE}")
    signer = signers.get(key)
    if signer is None:
        return Signature(problem=f"unverified: signed by a key not in reproductions/{ALLOWED}")
    asked = _question(record.read_bytes(), data, signer)
    if known is not None and known.get(asked) == signer.principal:
        return Signature(signer=signer.principal, project=signer.project)
    with tempfile.TemporaryDirectory(prefix="signers-") as tmp:
        allowed = Path(tmp) / ALLOWED
        allowed.write_text(signer.allowed_line(), encoding="utf-8")
        sig = Path(tmp) / "record.sig"
        sig.write_bytes(data)
        try:
            with record.open("rb") as message:
                done = subprocess.run([keygen, "-Y", "verify", "-f", str(allowed), "-I", signer.principal,
                                       "-n", NAMESPACE, "-s", str(sig)], stdin=message, capture_output=True,
                                      timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return Signature(problem=f"unverified: ssh-keygen ran past {TIMEOUT_S} s")
    if done.returncode != 0:
        return Signature(problem=f"unverified: the signature by {signer.principal} does not match this record")
    if known is not None:
        known[asked] = signer.principal
    return Signature(signer=signer.principal, project=signer.project)


def _question(message: bytes, signature: bytes, signer: Signer) -> str:
    """What ssh-keygen is asked, as one digest: the record's bytes, the signature's, the allowed
    key's line and the namespace."""
    parts = [hashlib.sha256(message).hexdigest(), hashlib.sha256(signature).hexdigest(),
             signer.allowed_line(), signer.principal, NAMESPACE]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


class GoodSignatures(dict):
    """The signatures ssh-keygen accepted in earlier builds, kept in ROOT/.cache/honesty/ (a cache:
    deleting it only costs the next build one ssh-keygen run per signed record). Only acceptances
    are kept; a signature that failed is asked again every build."""

    PATH = Path(".cache") / "honesty" / "signatures.json"

    def __init__(self, root: Path):
        self.path = Path(root) / self.PATH
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        super().__init__({k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}
                         if isinstance(data, dict) else {})
        self.loaded = dict(self)

    def save(self) -> None:
        """Keep the acceptances for the next build, when this one added any."""
        if dict(self) == self.loaded:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps(dict(sorted(self.items())), indent=0))
        except OSError:
            pass   # only speed is lost


def keygen_path() -> str | None:
    """ssh-keygen (OpenSSH's openssh-client), or None when it is not installed."""
    return shutil.which("ssh-keygen")


def sign(record: Path, key: Path, keygen: str) -> Path:
    """Sign `record` with the private key file `key`; the signature is written beside it
    (`<record>.sig`). Raises BuildError with ssh-keygen's reason when it cannot."""
    done = subprocess.run([keygen, "-Y", "sign", "-q", "-f", str(key), "-n", NAMESPACE, str(record)],
                          capture_output=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise BuildError(f"ssh-keygen could not sign with {key}: {message[-1] if message else done.returncode}")
    return record.with_name(record.name + SIG_SUFFIX)
