"""Parse the text of a value reference, `SOURCE [| STAGE]...`, into a `Ref` (see docs/references.md).

Parsing is separate from resolving so a malformed reference is reported without touching any file.
"""
from __future__ import annotations

import functools
import json
import re
import shlex
from dataclasses import dataclass, field

from .errors import BuildError

OPS = ("==", "!=", "<=", ">=", "<", ">")
AGGREGATES = ("count", "distinct", "mean", "min", "max", "sum")

_SOURCE = re.compile(r"^(?P<file>[^\s:#|]+)(?::(?P<line>[0-9]+))?(?:#(?P<key>[^\s|]+))?$")


class RefSyntaxError(BuildError, ValueError):
    """A reference that does not follow the grammar."""


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    value: object

    def text(self) -> str:
        """The condition as written in a reference."""
        return f"{self.field} {self.op} {json.dumps(self.value) if isinstance(self.value, str) and ' ' in self.value else _plain(self.value)}"


@dataclass(frozen=True)
class Aggregate:
    name: str                      # one of AGGREGATES
    field: str | None = None       # the field of distinct/mean/min/max/sum
    condition: Condition | None = None  # `count FIELD OP VALUE`

    def text(self) -> str:
        """The aggregate stage as written in a reference."""
        if self.condition:
            return f"count {self.condition.text()}"
        return f"{self.name} {self.field}" if self.field else self.name


@dataclass(frozen=True)
class Ref:
    text: str                       # as written, whitespace-normalized
    file: str
    line: int | None = None
    key: tuple = ()                 # key path: str keys, int list indices
    key_text: str = ""
    where: tuple = ()               # Conditions
    group: str | None = None
    aggregate: Aggregate | None = None
    spec: str = ""
    minus: bool = False
    has_fmt: bool = False
    stages: tuple = field(default=())   # stage texts (without fmt), for computed receipts

    @property
    def computed(self) -> bool:
        """Whether the value is computed by stages (not read from one place)."""
        return bool(self.where or self.group or self.aggregate)


def _plain(value: object) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def parse_value(text: str) -> object:
    """A comparison value: a JSON literal (number, true, false, null, "string") or a bare word."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_key_path(text: str) -> tuple:
    """A `/`-separated key path as a tuple (list indices as integers)."""
    parts = text.split("/")
    if any(p == "" for p in parts):
        raise RefSyntaxError(f"empty segment in key path {text!r}")
    return tuple(int(p) if re.fullmatch(r"[0-9]+", p) else p for p in parts)


def _condition(words: list[str], stage: str) -> Condition:
    if len(words) != 3 or words[1] not in OPS:
        raise RefSyntaxError(f"{stage!r}: expected FIELD OP VALUE with OP one of {' '.join(OPS)}")
    return Condition(words[0], words[1], parse_value(words[2]))


def _split_stage(stage: str) -> list[str]:
    try:
        words = shlex.split(stage, posix=True)
    except ValueError as exc:
        raise RefSyntaxError(f"{stage!r}: {exc}") from None
    # `margin<0` written without spaces: split around the operator.
    out: list[str] = []
    for word in words:
        match = re.fullmatch(r"([^<>=!]+)(==|!=|<=|>=|<|>)(.+)", word)
        out.extend(match.groups() if match and len(words) == 2 else [word])
    return out


def parse_ref(text: str) -> Ref:
    """Parse `SOURCE [| STAGE]...`; raises RefSyntaxError naming the offending part."""
    return _parse_ref(text)


# A Ref is frozen and made of tuples, so one parse serves every use of the same text: pages
# repeat their references, and shlex's tokenizer was a tenth of a page's rendering.
@functools.lru_cache(maxsize=8192)
def _parse_ref(text: str) -> Ref:
    parts = [p.strip() for p in text.split("|")]
    if not parts[0]:
        raise RefSyntaxError("empty reference: expected FILE, FILE:LINE, FILE#KEY or FILE:LINE#KEY")
    match = _SOURCE.match(parts[0])
    if not match:
        raise RefSyntaxError(
            f"{parts[0]!r} is not a source: expected FILE, FILE:LINE, FILE#KEY/PATH or FILE:LINE#KEY/PATH"
        )
    line = int(match["line"]) if match["line"] else None
    if line == 0:
        raise RefSyntaxError("line numbers start at 1")
    key = parse_key_path(match["key"]) if match["key"] else ()
    where: list[Condition] = []
    group = None
    aggregate = None
    spec, minus, has_fmt = "", False, False
    stage_texts: list[str] = []
    for stage in parts[1:]:
        if not stage:
            raise RefSyntaxError("empty stage between '|'")
        if has_fmt:
            raise RefSyntaxError(f"{stage!r} after fmt: fmt must be the last stage")
        words = _split_stage(stage)
        verb, args = words[0], words[1:]
        if verb == "fmt":
            has_fmt = True
            if args and args[-1] == "minus":
                minus, args = True, args[:-1]
            if len(args) > 1:
                raise RefSyntaxError(f"{stage!r}: expected fmt [SPEC] [minus]")
            spec = args[0] if args else ""
            _check_spec(spec, stage)
            continue
        if aggregate is not None:
            raise RefSyntaxError(f"{stage!r} after the aggregate {aggregate.text()!r}: only fmt may follow it")
        if verb == "where":
            if group is not None:
                raise RefSyntaxError(f"{stage!r}: where must come before group")
            where.append(_condition(args, stage))
        elif verb == "group":
            if len(args) != 1 or group is not None:
                raise RefSyntaxError(f"{stage!r}: expected a single `group FIELD`")
            group = args[0]
        elif verb == "count":
            if args:
                aggregate = Aggregate("count", condition=_condition(args, stage))
            else:
                aggregate = Aggregate("count")
        elif verb in AGGREGATES:
            if len(args) != 1:
                raise RefSyntaxError(f"{stage!r}: expected `{verb} FIELD`")
            aggregate = Aggregate(verb, field=args[0])
        else:
            raise RefSyntaxError(
                f"unknown stage {verb!r}: expected where, count, distinct, mean, min, max, sum, group or fmt"
            )
        stage_texts.append(aggregate.text() if verb in AGGREGATES else " ".join([verb, *args]) if verb == "group"
                           else f"where {where[-1].text()}")
    if group is not None and aggregate is None:
        raise RefSyntaxError(f"group {group} needs an aggregate after it (count, mean FIELD, ...)")
    normalized = " | ".join(parts)
    return Ref(normalized, match["file"], line, key, match["key"] or "", tuple(where), group, aggregate,
               spec, minus, has_fmt, tuple(stage_texts))


MAX_WIDTH = 40          # a format spec's width and precision set the size of what the page prints
_SPEC_PARTS = re.compile(r"(?:.?[<>=^])?[+\- ]?z?#?0?(?P<width>\d*)[,_]?(?:\.(?P<precision>\d*))?[a-zA-Z%]?")


def _check_spec(spec: str, stage: str) -> None:
    parts = _SPEC_PARTS.fullmatch(spec)
    for name in ("width", "precision"):
        if parts and parts[name] and int(parts[name]) > MAX_WIDTH:
            raise RefSyntaxError(f"{stage!r}: a format {name} of {int(parts[name]):,} is more than {MAX_WIDTH}")
    try:
        format(-1234.5, spec)
    except ValueError:
        try:
            format(-1234, spec)
        except ValueError as exc:
            raise RefSyntaxError(f"{stage!r}: bad format spec {spec!r} ({exc})") from None
