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
import queue
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
    return {rel: _cut_chrome(html) for rel, html in pages.items() if _BODY in html}


def _cut_chrome(html: bytes) -> bytes:
    """A marked page without the site's header and footer, where Pagefind reads nothing of them."""
    for start, end in _CHROME:
        begin = html.find(start)
        stop = html.find(end, begin) if begin >= 0 else -1
        if stop >= 0 and not _read_outside_body(html[begin + len(start):stop]):
            html = html[:begin] + html[stop + len(end):]
    return html


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
    that package's 0.1 s wait per reply), given each page from memory as the build makes it
    (`add`), and asked for the index when the build folder is written (`finish`). Pagefind reads
    each page on the second core while the build publishes and writes the rest.

    The index depends on the order of the pages (Pagefind numbers them as they come): `add` keeps
    the order it is given, which is the build's own (the same for the same site). What Pagefind
    reads of a page is `read_by_search`'s, decided page by page: a page without the body mark
    is held back until `finish`, and given whole only if no page had the mark."""

    def __init__(self):
        if not available():
            raise SearchError("search: Pagefind is not installed; run `pip install 'pagefind[bin]'` (or `make site`)")
        self.problems: list[str] = []
        self.files: list | None = None
        self.marked = False
        self.held: list[tuple[str, bytes]] = []
        self.sent = 0
        self.stderr = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self.stderr)
        except OSError as exc:
            self.stderr.close()
            raise SearchError(f"search: Pagefind did not run: {exc}") from None
        # requests go out through a thread of their own: a page larger than the pipe's buffer
        # waits there for Pagefind to read it, never the build's main thread
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.writer = threading.Thread(target=self._write_requests, daemon=True)
        self.reader = threading.Thread(target=self._read_replies, daemon=True)
        self.writer.start()
        self.reader.start()
        self._send({"type": "NewIndex", "config": {}})

    def _send(self, payload: dict) -> None:
        self.sent += 1
        self.outbox.put(_message(self.sent, payload))

    def add(self, pages: dict[str, bytes]) -> None:
        """Give Pagefind the pages among `pages` ({output path: HTML}) that it indexes, in order."""
        for rel, html in pages.items():
            if not indexed(rel):
                continue
            if not isinstance(html, bytes):   # a file copied from the repository (sources.CopiedFile)
                html = html.read_bytes()
            if _BODY in html:
                self.marked = True
                self._add_file(rel, _cut_chrome(html))
            else:
                self.held.append((rel, html))

    def _add_file(self, rel: str, html: bytes) -> None:
        try:
            text = html.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.problems.append(f"{rel} is not UTF-8 ({exc.reason})")
            return
        self._send({"type": "AddFile", "index_id": 0, "file_path": rel, "file_contents": text})

    def _write_requests(self) -> None:
        while (request := self.outbox.get()) is not None:
            try:
                self.proc.stdin.write(request)
                self.proc.stdin.flush()
            except (OSError, ValueError) as exc:   # the service is gone: the reader says why
                self.problems.append(f"{type(exc).__name__}: {exc}")
                return

    def _read_replies(self) -> None:
        """Read replies until the index's files come (the GetFiles reply), then close the service's
        input, which ends it: its own WriteFiles returns before its last writes are done."""
        try:
            pending = b""
            while self.files is None:
                chunk = self.proc.stdout.read1(1 << 16)
                if not chunk:
                    self.problems.append("the service ended before it gave the index")
                    break
                *whole, pending = (pending + chunk).split(b",")
                for reply in whole:
                    payload = json.loads(base64.b64decode(reply)).get("payload", {})
                    if payload.get("type") == "Error":
                        self.problems.append(str(payload.get("message")))
                    elif payload.get("type") == "GetFiles":
                        self.files = payload.get("files") or []
        except (OSError, ValueError) as exc:   # a reply not JSON, a page not UTF-8
            self.problems.append(f"{type(exc).__name__}: {exc}")
        finally:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def _write(self, site: Path, files: list) -> None:
        """Write the index's files ({path under pagefind/, base64 content}) but the UNUSED ones."""
        out = Path(site) / FOLDER
        for file in files:
            rel = PurePosixPath(file["path"])
            if rel.is_absolute() or ".." in rel.parts or not rel.parts:
                raise ValueError(f"a path outside the index: {file['path']!r}")
            if rel.as_posix() in UNUSED:
                continue
            path = out.joinpath(*rel.parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(base64.b64decode(file["content"]))

    def finish(self, site: Path) -> int:
        """Ask for the index, wait for it and write it under `site`/pagefind/; the number of files
        written. Raises SearchError."""
        if not self.marked:   # no page marks its body: Pagefind reads every page whole
            for rel, html in self.held:
                self._add_file(rel, html)
        self._send({"type": "GetFiles", "index_id": 0})
        self.outbox.put(None)
        self.reader.join(timeout=120)
        if self.reader.is_alive():
            self.abandon()
            raise SearchError("search: Pagefind ran past 120 s")
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.abandon()
            raise SearchError("search: Pagefind did not stop once the index was written") from None
        if self.files is not None and not self.problems:
            try:
                self._write(site, self.files)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                self.problems.append(f"the index could not be written: {type(exc).__name__}: {exc}")
        self.stderr.seek(0)
        stderr = self.stderr.read().decode("utf-8", "replace")
        self.stderr.close()
        out = Path(site) / FOLDER
        if self.problems or self.proc.returncode != 0 or not (out / "pagefind.js").is_file():
            why = "; ".join(self.problems) or stderr
            raise SearchError(f"search: Pagefind failed (exit {self.proc.returncode}): {why[-2000:]}")
        return sum(1 for p in out.rglob("*") if p.is_file())

    def abandon(self) -> None:
        """Stop the indexer and wait for it (the build failed)."""
        self.outbox.put(None)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.reader.join(timeout=10)
        if not self.stderr.closed:
            self.stderr.close()


def index_search(site: Path) -> int:
    """Index the pages written in `site`, in the order of their paths; returns the number of
    files Pagefind wrote. Raises SearchError."""
    site = Path(site)
    pages = {p.relative_to(site).as_posix(): p.read_bytes() for p in sorted(site.rglob("index.html"))
             if p.is_file() and not p.relative_to(site).as_posix().startswith(FOLDER + "/")}
    indexing = Indexing()
    indexing.add(pages)
    return indexing.finish(site)
