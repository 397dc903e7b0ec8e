"""The generator's structure, checked: the stages never touch the page cache (site.py owns it and
hands each stage one hook), and what docs/ARCHITECTURE.md says about the code stays true."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

from site_src.stages import bundle, number, publish, render, write

REPO = Path(__file__).resolve().parents[2]
STAGES = REPO / "site_src" / "stages"


def test_no_stage_knows_the_page_cache():
    """Only site.py holds the page cache (incremental.PageMemo); a stage gets at most one hook,
    `reuse`, and calls it the same way whether a result is made or replayed."""
    for path in sorted(STAGES.glob("*.py")):
        if path.name == "model.py":
            continue
        tree = ast.parse(path.read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        assert not any("incremental" in (m or "") for m in imported), f"{path.name} imports the page cache"
        assert not {"memo", "PageMemo"} & (names | attributes), f"{path.name} reaches for the page cache"
    hooks = {name: [p for p in inspect.signature(fn).parameters if p == "reuse"]
             for name, fn in [("number", number.number_figures), ("render", render.render_pages),
                              ("bundle", bundle.start_bundles), ("publish", publish.publish)]}
    assert all(found == ["reuse"] for found in hooks.values()), hooks
    assert "reuse" not in inspect.signature(write.write_and_swap).parameters
