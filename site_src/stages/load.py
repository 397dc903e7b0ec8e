"""Stage 1, load the site: the path policy, site.yaml, every page and its front matter, the
navigation order, the templates. Nothing is rendered yet."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import jinja2

from .. import csp, reader, typography
from ..config import load_config, order_pages
from ..errors import BuildError, Errors
from ..fixtures import FixtureCache
from ..honesty import Honesty
from ..pages import discover, load_page
from ..paths import InputRefused, RepoFiles
from ..tablewrap import table_wrap
from .model import Site


class RepoLoader(jinja2.BaseLoader):
    """Templates under templates/, read through the path policy (tracked, no symbolic link)."""

    def __init__(self, files: RepoFiles):
        self.files = files

    def get_source(self, environment, template):
        """A template's text, if the path policy allows reading it."""
        rel = f"templates/{template}"
        try:
            text = self.files.read_bytes(rel).decode("utf-8")
        except (InputRefused, OSError, UnicodeDecodeError) as exc:
            raise jinja2.TemplateNotFound(f"{rel}: {exc}") from None
        return text, rel, lambda: True


class CompiledTemplates(jinja2.FileSystemBytecodeCache):
    """Compiled templates kept in .cache/jinja/ between builds, each under its name and checked
    against its source's checksum by Jinja: compiling the site's templates was a sixth of a
    one-page edit. The file names carry Jinja's version and the environment's options, which the
    compiled code depends on. A cache that cannot be written costs speed, never the build."""

    def __init__(self, root: Path, options: str):
        tag = hashlib.sha256(f"{jinja2.__version__}|{options}".encode()).hexdigest()[:16]
        super().__init__(str(Path(root) / ".cache" / "jinja"), f"%s.{tag}.cache")

    def load_bytecode(self, bucket) -> None:
        """Load a compiled template, if a readable one is kept (Jinja checks its source's checksum)."""
        try:
            super().load_bytecode(bucket)
        except Exception:  # noqa: BLE001 - anything unreadable: the template is compiled again
            bucket.reset()

    def dump_bytecode(self, bucket) -> None:
        """Keep a compiled template (written to a temporary file, then renamed, by Jinja)."""
        try:
            os.makedirs(self.directory, exist_ok=True)
            super().dump_bytecode(bucket)
        except OSError:
            pass


def make_env(files: RepoFiles) -> jinja2.Environment:
    """The site's Jinja environment: templates read through the path policy, autoescaped, strict."""
    options = dict(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env = jinja2.Environment(loader=RepoLoader(files), **options,
                             bytecode_cache=CompiledTemplates(files.root, repr(sorted(options.items()))))
    env.globals.update(table_wrap=table_wrap)  # the one table wrapper (site_src/tablewrap.py)
    env.filters["keep_units"] = typography.keep_units  # "80 %" never breaks (site_src/typography.py)
    env.tests["identifier"] = typography.is_identifier  # a name from code or data is set as code
    env.globals.update(csp.template_globals())  # every page's Content-Security-Policy (site_src/csp.py)
    return env


def load_site(root: Path, errors: Errors) -> Site | None:
    """The site as read from `root`; None when not even the path policy can be set up."""
    root = root.resolve()
    try:
        files = RepoFiles(root)
    except InputRefused as exc:
        errors.add(BuildError(str(exc)))
        return None
    config = load_config(files, errors)
    pages = {}
    by_url: dict[str, str] = {}
    for repo_rel in discover(files, errors):
        page = load_page(repo_rel, files, errors)
        if page is None:
            continue
        if page.url in by_url:
            errors.add(BuildError(f"page has the URL /{page.url} of {by_url[page.url]}: rename one of them",
                                  page.repo_rel))
            continue
        by_url[page.url] = page.repo_rel
        pages[page.rel] = page
    order = order_pages(config, pages, "content/site.yaml", errors)
    for number, name in enumerate(order, start=1):
        pages[name].number = number
    jinja = make_env(files)
    facts = reader.site_facts(root)
    jinja.globals.update(built=facts, og=None, cite=None, provenance_href="")  # reader features (site_src/reader)
    cache = FixtureCache(root)
    honesty = Honesty(root, errors, cache, files=files, jinja=jinja)
    honesty.study_urls = {p.meta["bundle"]: p.url for p in pages.values()
                          if p.is_study and isinstance(p.meta.get("bundle"), str)}
    return Site(root, files, errors, config, pages, order, jinja, facts, cache, honesty)
