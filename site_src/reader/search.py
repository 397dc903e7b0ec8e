"""Offline search: Pagefind (`pagefind[bin]` from PyPI, binary included) indexes the site's pages
into pagefind/ before the new tree is swapped into place. Only the content pages are indexed
(their <article data-pagefind-body>), not the line views of fixtures. The site's own script
(templates/static/site.js) loads pagefind/pagefind.js the first time a reader focuses the search
box, so no page pays for search before it is used.

Pagefind is given what it reads of each page (`read_by_search`) from memory, through its service
protocol, so it starts before the build folder is written and parses about half the bytes: the
same index, byte for byte, as Pagefind run over the written pages in the same order (checked by
the tests).

Pagefind makes ready-made UI bundles too; the site does not use them, so they are not written,
and the index is byte-identical for the same pages (checked by the tests).
"""
from __future__ import annotations

import base64
import importlib.util
import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path, PurePosixPath

from ..errors import BuildError

FOLDER = "pagefind"
UNUSED = ("pagefind-ui.js", "pagefind-ui.css", "pagefind-component-ui.js", "pagefind-component-ui.css",
          "pagefind-modular-ui.js", "pagefind-modular-ui.css", "pagefind-highlight.js")


class SearchError(BuildError, RuntimeError):
    """The search index could not be made."""


def available() -> bool:
    """Whether Pagefind is installed."""
    return importlib.util.find_spec("pagefind") is not None


def indexed(rel: str) -> bool:
    """Whether Pagefind is given the output file `rel`: the content and registration pages (every
    `index.html`), not the line views of fixtures (source/*.html)."""
    return rel == "index.html" or rel.endswith("/index.html")


_BODY = b"data-pagefind-body"
# the site's header (its navigation, most of a page's bytes) and footer, from templates/base.html
_CHROME = ((b'<header class="site-header">', b"</header>"), (b'<footer class="site-footer">', b"</footer>"))
# what Pagefind reads outside a page's data-pagefind-body element (pagefind/src/fossick/parser.rs):
# metadata, filters and sort keys (any data-pagefind- attribute but -ignore), the language, the
# first <h1>, <title> and <img> as a page's default title and image; a part holding any of them
# (or a nested <header>, which would end the cut early) is kept
_READ_OUTSIDE_BODY = (b"<h1", b"<title", b"<img", b"<html", b"<header", b"<footer")


def _read_outside_body(part: bytes) -> bool:
    part = part.lower()
    return (part.count(b"data-pagefind-") != part.count(b"data-pagefind-ignore")
            or any(tag in part for tag in _READ_OUTSIDE_BODY))


def read_by_search(pages: dict[str, bytes]) -> dict[str, bytes]:
    """What Pagefind reads of `pages` ({output path: HTML}), for the same index. Once any page marks
    its body with data-pagefind-body, Pagefind drops every page that does not and reads nothing
    else of one that does but what _READ_OUTSIDE_BODY names: so pages without the attribute are
    left out, and the site's header and footer are cut out of the others."""
    if not any(_BODY in html for html in pages.values()):
        return pages   # Pagefind reads every page whole
    out = {}
    for rel, html in pages.items():
        if _BODY not in html:
            continue
        for start, end in _CHROME:
            begin = html.find(start)
            stop = html.find(end, begin) if begin >= 0 else -1
            if stop >= 0 and not _read_outside_body(html[begin + len(start):stop]):
                html = html[:begin] + html[stop + len(end):]
        out[rel] = html
    return out


def _command() -> list[str]:
    # the binary itself when pagefind_bin can name it: `python -m pagefind` only finds and execs
    # it, at the cost of one more interpreter start
    try:
        from pagefind_bin import get_executable
        head = [str(get_executable())]
    except Exception:   # another layout of the package (or PAGEFIND_BINARY_PATH): let it find itself
        head = [sys.executable, "-m", "pagefind"]
    return [*head, "--service"]


def _message(number: int, payload: dict) -> bytes:
    """One request of Pagefind's service protocol: base64 of the JSON, then a comma."""
    return base64.b64encode(json.dumps({"message_id": number, "payload": payload}).encode()) + b","


class Indexing:
    """One Pagefind service (`pagefind --service`, the protocol its Python package speaks, without
    that package's 0.1 s wait per reply) given `pages` ({output path: HTML}) straight from memory,
    its index written to `site`/pagefind/. It starts before the build folder is written and works
    on the second core while the build writes and checks everything else.

    Pages are added in the order of their paths: the index is the same for the same pages on any
    file system (Pagefind's own walk numbers them in the order the file system lists them)."""

    def __init__(self, site: Path, pages: dict[str, bytes]):
        if not available():
            raise SearchError("search: Pagefind is not installed; run `pip install 'pagefind[bin]'` (or `make site`)")
        self.site = Path(site)
        self.pages = pages
        self.problems: list[str] = []
        self.stderr = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self.stderr)
        except OSError as exc:
            self.stderr.close()
            raise SearchError(f"search: Pagefind did not run: {exc}") from None
        self.talk = threading.Thread(target=self._talk, daemon=True)
        self.talk.start()

    def _requests(self) -> list[bytes]:
        read = read_by_search(self.pages)
        requests = [_message(1, {"type": "NewIndex", "config": {}})]
        requests += [_message(n, {"type": "AddFile", "index_id": 0, "file_path": rel,
                                  "file_contents": read[rel].decode("utf-8")})
                     for n, rel in enumerate(sorted(read), start=2)]
        # the index's files in the reply, written here: the service's own WriteFiles returns before
        # its last writes are done, and the service exits as soon as its input closes
        requests.append(_message(len(requests) + 1, {"type": "GetFiles", "index_id": 0}))
        return requests

    def _talk(self) -> None:
        """Send every request, read every reply, then close the service's input, which ends it, and
        write the index's files (the last reply). Run beside the build's main thread, which
        meanwhile writes the site."""
        files = None
        try:
            requests = self._requests()
            self.proc.stdin.write(b"".join(requests))
            self.proc.stdin.flush()
            pending, replies = b"", 0
            while replies < len(requests):
                chunk = self.proc.stdout.read1(1 << 16)
                if not chunk:
                    self.problems.append("the service ended before it gave the index")
                    break
                *whole, pending = (pending + chunk).split(b",")
                for reply in whole:
                    replies += 1
                    payload = json.loads(base64.b64decode(reply)).get("payload", {})
                    if payload.get("type") == "Error":
                        self.problems.append(str(payload.get("message")))
                    elif payload.get("type") == "GetFiles":
                        files = payload.get("files")
        except (OSError, ValueError) as exc:   # a broken pipe, a page not UTF-8, a reply not JSON
            self.problems.append(f"{type(exc).__name__}: {exc}")
        finally:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        if files is not None and not self.problems:
            try:
                self._write(files)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                self.problems.append(f"the index could not be written: {type(exc).__name__}: {exc}")

    def _write(self, files: list) -> None:
        """Write the index's files ({path under pagefind/, base64 content}) but the UNUSED ones."""
        out = self.site / FOLDER
        for file in files:
            rel = PurePosixPath(file["path"])
            if rel.is_absolute() or ".." in rel.parts or not rel.parts:
                raise ValueError(f"a path outside the index: {file['path']!r}")
            if rel.as_posix() in UNUSED:
                continue
            path = out.joinpath(*rel.parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(base64.b64decode(file["content"]))

    def finish(self) -> int:
        """Wait for Pagefind; the number of files it wrote. Raises SearchError."""
        self.talk.join(timeout=120)
        if self.talk.is_alive():
            self.abandon()
            raise SearchError("search: Pagefind ran past 120 s")
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.abandon()
            raise SearchError("search: Pagefind did not stop once the index was written") from None
        self.stderr.seek(0)
        stderr = self.stderr.read().decode("utf-8", "replace")
        self.stderr.close()
        out = self.site / FOLDER
        if self.problems or self.proc.returncode != 0 or not (out / "pagefind.js").is_file():
            why = "; ".join(self.problems) or stderr
            raise SearchError(f"search: Pagefind failed (exit {self.proc.returncode}): {why[-2000:]}")
        return sum(1 for p in out.rglob("*") if p.is_file())

    def abandon(self) -> None:
        """Stop the indexer and wait for it (the build failed)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.talk.join(timeout=10)
        self.stderr.close()


def index_search(site: Path) -> int:
    """Index the pages written in `site`; returns the number of files Pagefind wrote. Raises SearchError."""
    site = Path(site)
    pages = {p.relative_to(site).as_posix(): p.read_bytes() for p in sorted(site.rglob("index.html"))
             if p.is_file() and not p.relative_to(site).as_posix().startswith(FOLDER + "/")}
    return Indexing(site, pages).finish()
