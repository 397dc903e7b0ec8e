"""The navigation is rendered once per folder depth, and each page's copy marks the current page
exactly as rendering the template for that page would (site_src/stages/publish.py `_nav`)."""
import jinja2

from generator_helpers import run, write_page

from site_src.errors import Errors
from site_src.stages import publish
from site_src.stages.load import load_site

SITE_YAML = ("title: Fixture site\nbase_url: ''\nnav:\n  - index.md\n  - Explainers:\n      - explainer.md\n"
             "  - Guides:\n      - guides.md\n      - guides/second.md\n      - guides/deeper/third.md\n")


def _site(site):
    write_page(site, "guides.md", "Text.\n", "title: All the guides\nnav_title: Guides & more\nsummary: S.\n")
    write_page(site, "guides/deeper/third.md", "Text.\n", "title: Third\nsummary: S.\n")
    (site / "content/site.yaml").write_text(SITE_YAML)
    return site


def _nav(html: str) -> str:
    start = html.index('<nav class="site-nav" aria-label="Site">') + len('<nav class="site-nav" aria-label="Site">')
    return html[start:html.index("</nav>", start)]


def test_the_navigation_is_rendered_once_per_folder_depth(site, monkeypatch):
    _site(site)
    rendered = []
    render = jinja2.Template.render

    def counted(self, *args, **kwargs):
        if self.name == "partials/nav.html":
            rendered.append(kwargs.get("rel"))
        return render(self, *args, **kwargs)
    monkeypatch.setattr(jinja2.Template, "render", counted)
    assert run(site, "--clean") == 0
    pages = list((site / "public").rglob("*.html"))
    assert len(pages) > 10 and len(rendered) == len(set(rendered)) <= 6, (len(pages), rendered)


def test_each_page_marks_itself_as_the_template_would(site):
    _site(site)
    assert run(site, "--clean") == 0
    loaded = load_site(site, Errors())
    pages = {p.url: p for p in loaded.pages.values()}
    marked = 0
    for url, page in pages.items():
        html = (site / "public" / page.out_path).read_text()
        expected = publish.render_nav(loaded, url, "../" * page.depth)
        assert _nav(html).strip() == expected.strip(), url
        marked += 'aria-current="page"' in expected
    assert marked == len(pages) >= 5   # every page is listed, and so marked
