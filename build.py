#!/usr/bin/env python3
"""The site's one entry point: build, serve, check, and resolve a reference.

    python build.py                  build into public/ (atomic: a failed build leaves public/ as it was;
                                     incremental: unchanged pages are reused, --clean renders all)
    python build.py serve            build, serve public/ on 127.0.0.1, rebuild on changes
    python build.py check            build into a temporary directory and report; public/ untouched
    python build.py ref FILE:LINE [KEY]   print a reference's value and receipt
    python build.py verify-quoted PATH    check quoted/ against a copy of the file it quotes
    python build.py record STUDY --key KEY   a signed reproduction record of the built site's zip
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (`build.py: error: ...`) and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _matching(pattern: str, what: str):
    """An argparse type: the text when it matches `pattern`, else a one-line usage error."""
    import re

    def check(text: str) -> str:
        if not re.fullmatch(pattern, text):
            raise argparse.ArgumentTypeError(f"{what} {text[:40]!r} must match {pattern}")
        return text
    return check


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a port number (0 to 65535; 0 picks a free one)")
    return int(text)


def _existing_file(text: str) -> Path:
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not a file")
    return Path(text)


def _root_args(parser: argparse.ArgumentParser, top: bool = False) -> None:
    # subcommands must not reset what was given before the subcommand name
    parser.add_argument("--root", type=Path, default=HERE if top else argparse.SUPPRESS,
                        help="repository root holding content/, templates/, bundles/ (default: this repository)")
    parser.add_argument("--out", type=Path, default=None if top else argparse.SUPPRESS,
                        help="output directory (default: ROOT/public)")
    parser.add_argument("--clean", action="store_true", default=False if top else argparse.SUPPRESS,
                        help="ignore the incremental cache (.cache/incremental): render every page")


def _report(result, verb: str, out: Path | None) -> int:
    for line in result.errors.warning_lines() if hasattr(result.errors, "warning_lines") else ():
        print(f"warning: {line}", file=sys.stderr)
    if result.errors:
        for line in result.errors.lines():
            print(f"error: {line}", file=sys.stderr)
        print(f"{verb} failed: {len(result.errors)} error(s); "
              + ("public/ left as it was" if verb == "build" else "nothing written"), file=sys.stderr)
        return 1
    pages = sum(1 for name in result.files if name.endswith("index.html") and not name.startswith("source/"))
    where = f" into {out}" if out else ""
    note = f" ({result.note})" if getattr(result, "note", "") else ""
    print(f"{verb} ok: {pages} page(s), {len(result.files)} file(s){where}{note}")
    return 0


def cmd_build(args) -> int:
    out = Path(os.path.abspath(args.out or args.root / "public"))  # never resolve(): public is a link
    from safe_io import git_state_per_build
    from site_src.incremental import up_to_date
    with git_state_per_build():   # the up-to-date check and the build ask git once for the commit
        if not args.clean and up_to_date(args.root, out) is not None:   # before importing the generator
            print(f"build ok: up to date, nothing changed since the last build into {out}")
            return 0
        from site_src.site import build
        return _report(build(args.root, out, incremental=not args.clean, known_stale=not args.clean), "build", out)


def cmd_check(args) -> int:
    from site_src.site import build
    return _report(build(args.root, Path(tempfile.gettempdir()) / "site-check", keep=False), "check", None)


def cmd_serve(args) -> int:
    from site_src.serve import PortRefused, serve
    from site_src.site import build
    out = Path(os.path.abspath(args.out or args.root / "public"))

    def build_and_report():   # the result goes to the pages too: reload, or an overlay of its errors
        result = build(args.root, out, incremental=not args.clean)
        _report(result, "build", out)
        return result
    try:
        serve(args.root.resolve(), out, args.port, build_and_report)
    except PortRefused as exc:
        print(f"build.py serve: error: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_ref(args) -> int:
    from site_src.errors import FixtureProblem
    from site_src.paths import InputRefused
    from site_src.refgrammar import RefSyntaxError
    from site_src.resolve import Resolver

    text = args.reference
    if args.key:
        if "#" in text.split("|")[0]:
            print("error: give the key either after '#' or as the second argument, not both", file=sys.stderr)
            return 2
        head, _, tail = text.partition("|")
        text = f"{head.strip()}#{args.key}" + (f" | {tail.strip()}" if tail else "")
    resolver = Resolver(args.root, args.bundle, extra_dirs=(Path.cwd(),), allow_outside=True)
    try:
        resolved = resolver.resolve(text)
    except (RefSyntaxError, FixtureProblem, InputRefused) as exc:
        print(f"error: {{{{ {text} }}}}: {exc}", file=sys.stderr)
        return 1
    if resolved.is_block:
        print(f"block of {len(resolved.items)} entries  ({resolved.receipt})")
        for key, item in resolved.items:
            value = json.dumps(item.value, ensure_ascii=False) if item.is_block else item.display
            print(f"  {key}: {value}    {item.receipt}")
    else:
        print(resolved.display)
        print(f"raw value: {json.dumps(resolved.value, ensure_ascii=False)}")
        print(resolved.receipt)
    if resolved.href:
        print(_published(args, resolved.href))
    return 0


def _published(args, href: str) -> str:
    """Where the current build publishes the value's line, or that it does not: the build
    publishes a fixture only when a page cites it."""
    from urllib.parse import unquote
    out = Path(os.path.abspath(args.out or args.root / "public"))
    target = unquote(href.split("#", 1)[0])
    if (out / target).is_file():
        return f"published at: {os.path.relpath(out, args.root) if out.is_relative_to(args.root) else out}/{href}"
    return f"not published in {out.name}/: no page of the current build cites this file"


def cmd_verify_quoted(args) -> int:
    from site_src.errors import BuildError
    from site_src.quoted import load, verify_against
    fixture = args.fixture if args.fixture.is_absolute() else args.root / args.fixture
    try:
        problems = verify_against(load(fixture), args.source)
    except BuildError as exc:   # a file that cannot be read as JSON: bad input, one line
        print(f"build.py verify-quoted: error: {exc.format()}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:   # a fixture of another shape
        print(f"build.py verify-quoted: error: {fixture}: is not a fixture of quoted figures "
              f"({type(exc).__name__}: {str(exc)[:80]})", file=sys.stderr)
        return 2
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    if problems:
        print(f"verify-quoted failed: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"verify-quoted ok: {fixture.name} agrees with {args.source}")
    return 0


def cmd_record(args) -> int:
    from site_src.errors import BuildError
    from site_src.honesty.project_record import record_study
    out = Path(os.path.abspath(args.out or args.root / "public"))
    try:
        path, signer, status = record_study(args.root, out, args.study, args.key, args.name)
    except BuildError as exc:
        print(f"error: {exc.format()}", file=sys.stderr)
        return 1
    rel = path.relative_to(args.root)
    print(f"recorded {rel} (the check exited {status}) and signed it as {signer}: commit {rel} and {rel}.sig")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="build.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _root_args(parser, top=True)
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("build", help="build the site into public/ (the default command)")
    _root_args(p)
    p = sub.add_parser("check", help="build into a temporary directory and report; public/ is not touched")
    _root_args(p)
    p = sub.add_parser("serve", help="build, serve public/ on 127.0.0.1, rebuild on source changes")
    _root_args(p)
    p.add_argument("--port", type=_port, default=8000, help="port on 127.0.0.1 (0 picks a free one; default 8000)")
    p = sub.add_parser("ref", help="resolve one value reference and print its value and receipt",
                       description="Resolve a reference (FILE:LINE, FILE#KEY, FILE:LINE#KEY, or FILE | STAGES) "
                                   "against the repository (and the working directory), e.g. "
                                   "`build.py ref quoted/reward-lens-e04.json#mean_rho/ArmoRM-Llama3-8B-v0.1`.")
    _root_args(p)
    p.add_argument("reference", help="the reference, as written between {{ }} on a page")
    p.add_argument("key", nargs="?", help="a key path; the same as writing FILE:LINE#KEY")
    p.add_argument("--bundle", help="resolve FILE inside bundles/BUNDLE/ first, as on a study page")
    p = sub.add_parser("verify-quoted", help="check a fixture of quoted figures against a copy of the file it quotes",
                       description="Compare quoted/FIXTURE with a copy of the source file it cites (never committed): "
                                   "every recorded line and every quoted value must agree.")
    _root_args(p)
    p.add_argument("source", type=Path, help="a copy of the quoted project's file (e.g. reward-lens-golden.json)")
    p.add_argument("--fixture", type=Path, default=Path("quoted/reward-lens-e04.json"),
                   help="the fixture to check (default: quoted/reward-lens-e04.json)")
    p = sub.add_parser("record", help="a signed reproduction record of a study, made from the built site's zip",
                       description="Unzip public/bundles/STUDY.zip into a fresh folder, run `python3 -I -S "
                                   "reproduce.py --record` there as a reader does, write reproductions/STUDY/NAME.yaml "
                                   "and sign it with KEY (ssh-keygen -Y sign). See docs/honesty.md.")
    _root_args(p)
    p.add_argument("study", type=_matching(r"[a-z0-9][a-z0-9_-]*", "study"), help="the study (its bundle folder name)")
    p.add_argument("--key", type=_existing_file, required=True, help="the signer's private SSH key file")
    p.add_argument("--name", type=_matching(r"[a-z0-9][a-z0-9._-]*", "record name"),
                   help="the record's name (default: authors-DATE-TIME)")
    args = parser.parse_args(argv)
    args.root = args.root.resolve()
    command = args.command or "build"
    return {"build": cmd_build, "check": cmd_check, "serve": cmd_serve, "ref": cmd_ref,
            "verify-quoted": cmd_verify_quoted, "record": cmd_record}[command](args)


def _use_project_environment() -> None:
    """Run under the repository's .venv when this interpreter lacks the generator's dependencies,
    so `python build.py` works without activating anything; otherwise say what to install."""
    from importlib.util import find_spec
    # find_spec, not import: a no-op build must not pay for importing altair and vl-convert
    missing = [name for name in ("jinja2", "markdown_it", "mdit_py_plugins", "latex2mathml", "yaml", "altair",
                                 "vl_convert") if find_spec(name) is None]
    if missing:
        venv_python = HERE / ".venv" / "bin" / "python"
        in_venv = Path(sys.prefix).resolve() == (HERE / ".venv").resolve()
        if venv_python.is_file() and not in_venv:
            os.execv(str(venv_python), [str(venv_python), str(Path(__file__).resolve()), *sys.argv[1:]])
        sys.exit(f"build.py: missing dependency {missing[0]!r}; run `make site` (or `pip install -e .`) first")


if __name__ == "__main__":
    _use_project_environment()
    sys.exit(main())
