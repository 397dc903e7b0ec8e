"""Large drawings and long data tables arrive when a reader needs them (figures.js, for page
weight): a drawing when its figure nears the viewport, in the box kept for it; the further rows of
a table when it is opened; and with scripts off, each large drawing shows as an image."""
from __future__ import annotations

import pytest

DESKTOP = {"width": 1280, "height": 900}   # conftest.DESKTOP (conftest is not importable under importlib mode)
PAGE = "studies/planted/"   # three specification curves: large drawings and long tables


@pytest.fixture
def context(browser):
    context = browser.new_context(viewport=DESKTOP)
    yield context
    context.close()


def _requested(page) -> list[str]:
    seen = []
    page.on("request", lambda r: seen.append(r.url))
    return seen


def test_a_large_drawing_arrives_near_the_viewport_in_the_box_kept_for_it(context, base_url, site_dir):
    assert 'data-figure-svg="' in (site_dir / PAGE / "index.html").read_text(), "no large drawing to check"
    page = context.new_page()
    seen = _requested(page)
    page.goto(base_url + PAGE, wait_until="load")
    page.wait_for_load_state("networkidle")
    slots = page.locator(".fig-svg-slot[data-figure-svg]")
    boxes = [slots.nth(i).bounding_box() for i in range(slots.count())]
    # a figure in a closed section (details.more) arrives when the section is opened
    shown = [slots.nth(i).evaluate("s => !s.closest('details:not([open])')") for i in range(slots.count())]
    far = [i for i, box in enumerate(boxes) if shown[i] and box["y"] > 3 * DESKTOP["height"]]
    assert far, "every large drawing is near the top of the page: nothing is left to load later"
    # every far drawing is checked before any scrolling: scrolling to one brings the next near
    for i in far:
        url = slots.nth(i).get_attribute("data-figure-svg").rsplit("/", 1)[1]
        assert not any(u.endswith(url) for u in seen), f"{url} was fetched before its figure came near"
    for i in far:
        box = slots.nth(i).bounding_box()
        slots.nth(i).scroll_into_view_if_needed()
        page.wait_for_function("s => s.getAttribute('data-figure-placed') === 'true'", arg=slots.nth(i).element_handle(),
                               timeout=20000)
        drawn = slots.nth(i).locator("svg.fig-svg").bounding_box()
        assert drawn and abs(drawn["height"] - box["height"]) < 2 and abs(drawn["width"] - box["width"]) < 2
    assert page.locator(".fig[data-figure-error]").count() == 0


def test_a_long_table_gets_its_other_rows_when_opened(context, base_url):
    page = context.new_page()
    page.goto(base_url + PAGE, wait_until="load")
    table = page.locator("details.fig-data[data-figure-rows]").first
    first = table.locator("tbody tr").count()
    table.locator("summary").click()
    page.wait_for_function("d => d.getAttribute('data-figure-rows-added') === 'true'", arg=table.element_handle(),
                           timeout=20000)
    total = int(table.locator("summary").inner_text().split("(")[1].split()[0])
    assert first < total == table.locator("tbody tr").count() and table.locator(".fig-more").count() == 0


def test_with_scripts_off_each_large_drawing_shows_as_an_image(browser, base_url):
    context = browser.new_context(java_script_enabled=False, viewport=DESKTOP)
    try:
        page = context.new_page()
        page.goto(base_url + PAGE, wait_until="load")
        images = page.locator(".fig-svg-slot img")
        assert images.count() == page.locator(".fig-svg-slot").count() > 0
        page.evaluate("() => document.querySelectorAll('details.more').forEach(d => { d.open = true; })")
        for i in range(images.count()):
            images.nth(i).scroll_into_view_if_needed()
            images.nth(i).evaluate("img => img.decode()")
            box = images.nth(i).bounding_box()
            assert images.nth(i).evaluate("img => img.naturalWidth > 0") and box["width"] > 100 and box["height"] > 50
    finally:
        context.close()
