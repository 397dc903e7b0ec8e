"""The one wrapper every table of the site sits in: a box that scrolls sideways when the table is
wider than the screen, so the page itself never does. A box that scrolls must be reachable by
keyboard (axe: scrollable-region-focusable) and a focusable region needs a name, so the wrapper
is always a named region with tabindex 0. Markdown tables, ```table blocks and the templates'
tables (through the Jinja global `table_wrap`) all open it here."""
from __future__ import annotations

from markupsafe import Markup, escape

CLOSE = Markup("</div>")


def table_wrap(label: str | None = None, labelledby: str | None = None, columns=None) -> Markup:
    """The opening tag; name it by the id of a visible caption (`labelledby`), by `label`, or by
    the table's column headers (`columns`)."""
    if columns is not None and not label:
        label = columns_label(columns)
    if labelledby:
        name = Markup(' aria-labelledby="{}"').format(labelledby)
    else:
        name = Markup(' aria-label="{}"').format(" ".join(str(label or "Table").split()))
    return Markup('<div class="table-wrap" role="region" tabindex="0"{}>').format(name)


def columns_label(columns) -> str:
    """A name for a table without a caption: its column headers."""
    names = [" ".join(str(c).split()) for c in columns if str(c).strip()]
    return "Table: " + ", ".join(names) if names else "Table"


def install_markdown_rules(md) -> None:
    """Markdown pipe tables open and close the same wrapper, named by their header cells."""
    default_open = md.renderer.rules.get("table_open")
    default_close = md.renderer.rules.get("table_close")

    def render_default(rule, self, tokens, idx, options, env):
        return rule(tokens, idx, options, env) if rule else self.renderToken(tokens, idx, options, env)

    def table_open(self, tokens, idx, options, env):
        headers = []
        for token in tokens[idx + 1:]:
            if token.type == "thead_close":
                break
            if token.type == "inline":
                headers.append("".join(child.content for child in token.children or [] if child.type in ("text", "code_inline")) or token.content)
        return str(table_wrap(columns_label(headers))) + render_default(default_open, self, tokens, idx, options, env)

    def table_close(self, tokens, idx, options, env):
        return render_default(default_close, self, tokens, idx, options, env) + str(CLOSE)

    # A header cell left empty (the corner above a column of row labels) names nothing: a header
    # without text is announced as nothing by a screen reader (axe: empty-table-header), so it is
    # written as an ordinary empty cell.
    def th_open(self, tokens, idx, options, env):
        html = self.renderToken(tokens, idx, options, env)
        return html.replace("<th", "<td", 1) if _empty_cell(tokens, idx + 1) else html

    def th_close(self, tokens, idx, options, env):
        html = self.renderToken(tokens, idx, options, env)
        return html.replace("</th", "</td", 1) if _empty_cell(tokens, idx - 1) else html

    md.add_render_rule("table_open", table_open)
    md.add_render_rule("table_close", table_close)
    md.add_render_rule("th_open", th_open)
    md.add_render_rule("th_close", th_close)


def _empty_cell(tokens, at: int) -> bool:
    """Whether the inline token at `at` (a cell's content) holds no text."""
    return 0 <= at < len(tokens) and tokens[at].type == "inline" and not tokens[at].content.strip()
