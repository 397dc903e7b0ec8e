"""What a reader expects of a documentation site, beyond the pages themselves: the commit the site
was built from, heading and figure permalinks, a "Cite this study" block with BibTeX and a
CITATION.cff, OpenGraph metadata with a preview image of a study's main figure, and offline
search (Pagefind, run on the finished output).

The generator calls four things, each a thin call site:

- `site_facts(root)` once per build: the commit and its date (`Facts`);
- `start_preview(...)` per rendered page: its preview image starts drawing in a second process;
- `page_extras(...)` per content page: template context (`og`, `cite`) and extra files;
- `add_permalinks(html)` on each page body;
- `breakable_code(html)` on each page: break opportunities in long inline code;
- `word_boundaries(html)` on each page: whitespace where search would run two elements' words together;
- `unindexed_blocks(html)` on each page body: code and program output left out of search;
- `provenance_page(...)` per content page: every value it shows, on a page of its own;
- `Indexing()`, given the pages (`search_reads(rel)` names them) from memory as publish makes
  them (`add`), and finished into the build folder before it is swapped into place
  (`finish(folder)`; `index_search(folder)` indexes the pages written in a folder).
"""
from __future__ import annotations

from .cite import cite_context
from .facts import Facts, site_facts
from .permalinks import add_permalinks
from .preview import og_context, start_preview
from .provenance import NAME as PROVENANCE_PAGE, provenance_page
from .search import Indexing, SearchError, index_search
from .search import indexed as search_reads
from .wrapping import breakable_code, unindexed_blocks, word_boundaries

__all__ = ["Facts", "site_facts", "page_extras", "start_preview", "add_permalinks", "index_search", "Indexing", "search_reads", "SearchError",
           "provenance_page", "breakable_code", "unindexed_blocks", "word_boundaries"]


def page_extras(root, config, page, rendered, bundle, prefix: str, facts: Facts) -> tuple[dict, dict]:
    """(template context, {path under public/: bytes}) for one content page; `rendered` is the
    page's render result (its body `html` and the `files` its figures wrote)."""
    files: dict[str, bytes] = {}
    og, og_files = og_context(root, config, page, rendered.html, rendered.files, prefix)
    files.update(og_files)
    cite = None
    if bundle is not None:
        cite, cite_files = cite_context(config, page, bundle, facts)
        files.update(cite_files)
    provenance_href = PROVENANCE_PAGE if rendered.values else ""
    return {"og": og, "cite": cite, "provenance_href": provenance_href}, files
