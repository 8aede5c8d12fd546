"""The HTML of a report: one self-contained page (inline CSS and JS, a Content-Security-Policy
that forbids any network access) and the small pieces it is built from."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from html import escape

__all__ = ["bars", "details", "diff", "page", "pre", "section", "table"]

# Lines of one diff shown at most: a pass that rewrites every line is seen from its first lines.
MAX_DIFF_LINES = 2000

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#fafbfc}
nav{position:fixed;top:0;left:0;bottom:0;width:190px;overflow:auto;background:#1d2330;padding:12px}
nav a{display:block;color:#cfd8e3;text-decoration:none;padding:3px 6px;border-radius:4px}
nav a:hover,nav a.here{background:#33405a;color:#fff}
main{margin-left:214px;padding:8px 24px 60px;max-width:1400px}
section{background:#fff;border:1px solid #e1e4e8;border-radius:6px;padding:4px 18px 14px;margin:16px 0}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #eee;padding-bottom:4px}
h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;margin:6px 0}
td,th{border:1px solid #e1e4e8;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f5f8;cursor:pointer}
td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f6f8fa;padding:8px;overflow:auto;max-height:520px;font-size:12px;margin:4px 0}
.diff .add{background:#e6ffec;display:block}.diff .del{background:#ffebe9;display:block}
.diff .hunk{color:#6a737d;display:block}
details{margin:4px 0}details details{margin-left:18px}summary{cursor:pointer;color:#24527a}
.bar{background:#4c78a8;height:12px;display:inline-block;vertical-align:middle}
.muted{color:#6a737d}.warn{color:#b35900}.scroll{overflow:auto;max-height:900px;border:1px solid #eee}
svg text{font:11px system-ui,sans-serif}svg .edge{fill:none;stroke:#9aa5b1;stroke-width:1}
svg .region{stroke:#b35900;stroke-width:1.5}svg .op{stroke:#7a8699;stroke-width:.6}
#report-status{position:fixed;right:8px;bottom:6px;font-size:11px;color:#6a737d}
"""

# Errors are collected before anything else runs, so the page itself says whether it worked.
_HEAD_JS = """
window.__reportErrors=[];
window.addEventListener('error',function(e){window.__reportErrors.push(String(e.message));});
"""

_JS = """
(function(){
  var nav=document.getElementById('nav');
  document.querySelectorAll('main section').forEach(function(s){
    var a=document.createElement('a');a.href='#'+s.id;
    a.textContent=s.querySelector('h2').textContent;nav.appendChild(a);
  });
  var links=nav.querySelectorAll('a');
  window.addEventListener('scroll',function(){
    var y=window.scrollY+40,here=null;
    document.querySelectorAll('main section').forEach(function(s){if(s.offsetTop<=y)here=s.id;});
    links.forEach(function(a){a.className=(a.getAttribute('href')==='#'+here)?'here':'';});
  });
  document.querySelectorAll('th').forEach(function(th){
    th.addEventListener('click',function(){
      var table=th.closest('table'),i=Array.prototype.indexOf.call(th.parentNode.children,th);
      var rows=Array.prototype.slice.call(table.querySelectorAll('tbody tr'));
      var asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
      rows.sort(function(a,b){
        var x=a.children[i].textContent,y=b.children[i].textContent;
        var nx=parseFloat(x),ny=parseFloat(y);
        var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return asc?c:-c;
      });
      rows.forEach(function(r){r.parentNode.appendChild(r);});
    });
  });
  document.querySelectorAll('[data-expand]').forEach(function(b){
    b.addEventListener('click',function(){
      var open=b.dataset.expand==='open';
      b.closest('section').querySelectorAll('details').forEach(function(d){d.open=open;});
    });
  });
})();
(function(){
  var errors=window.__reportErrors,status=document.getElementById('report-status');
  status.setAttribute('data-errors',String(errors.length));
  status.textContent=errors.length?('page errors: '+errors.join('; ')):'ready';
  document.body.setAttribute('data-ready','1');
})();
"""


def page(title: str, intro: str, sections: Iterable[str]) -> str:
    """The whole page."""
    csp = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{csp}\">"
        f"<title>{escape(title)}</title><style>{_CSS}</style><script>{_HEAD_JS}</script>"
        "</head><body><nav id='nav'></nav><main>"
        f"<h1>{escape(title)}</h1>{intro}{''.join(sections)}</main>"
        "<div id='report-status' data-errors='-1'>loading</div>"
        f"<script>{_JS}</script></body></html>\n"
    )


def section(id_: str, title: str, body: str, *, expandable: bool = False) -> str:
    buttons = (
        "<p><button data-expand='open'>expand all</button> "
        "<button data-expand='close'>collapse all</button></p>"
        if expandable
        else ""
    )
    return f"<section id='{id_}'><h2>{escape(title)}</h2>{buttons}{body}</section>"


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for v in row:
            if isinstance(v, float) and v.is_integer() and abs(v) < 1e9 and v != 0.0:
                cells.append(f"<td class='num'>{int(v)}</td>")
            elif isinstance(v, float):
                cells.append(f"<td class='num'>{v:.3f}</td>")
            elif isinstance(v, int) and not isinstance(v, bool):
                cells.append(f"<td class='num'>{v}</td>")
            elif isinstance(v, Html):
                cells.append(f"<td>{v}</td>")
            else:
                cells.append(f"<td>{escape(str(v))}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


class Html(str):
    """Text that is already HTML (a table cell that is not escaped)."""


def pre(text: str) -> str:
    return f"<pre>{escape(text)}</pre>"


def details(summary: str, body: str, *, open_: bool = False) -> str:
    return f"<details{' open' if open_ else ''}><summary>{summary}</summary>{body}</details>"


def diff(before: str, after: str) -> tuple[str, int, int]:
    """The unified diff of two texts as HTML, with the counts of lines added and removed."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=2))[
        2:
    ]
    added = sum(1 for line in lines if line.startswith("+"))
    removed = sum(1 for line in lines if line.startswith("-"))
    shown = lines[:MAX_DIFF_LINES]
    out = []
    for line in shown:
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "")
        out.append(f"<span class='{kind}'>{escape(line)}</span>" if kind else escape(line))
    if len(lines) > len(shown):
        out.append(f"\n… {len(lines) - len(shown)} more diff lines not shown")
    text = "\n".join(out) if out else "(no change in the printed trace)"
    return f"<pre class='diff'>{text}</pre>", added, removed


def bars(items: Sequence[tuple[str, float]], unit: str = "s") -> str:
    """A horizontal bar per item, scaled to the largest."""
    top = max((v for _, v in items), default=0.0) or 1.0
    rows = [
        (name, Html(f"<span class='bar' style='width:{max(v / top * 300, 1):.0f}px'></span>"), v)
        for name, v in items
    ]
    return table(["", "", unit], rows)
