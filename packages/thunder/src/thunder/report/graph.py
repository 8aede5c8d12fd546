"""An execution trace as a picture: its statements as boxes, dataflow as edges, in layers (each
statement one layer below the deepest statement it reads from), fusion regions as wide boxes
that link to their section of the report. Inline SVG, made here: the page needs nothing else."""

from __future__ import annotations

from collections import defaultdict
from html import escape

from thunder.report.memory import shares_memory
from thunder_ir import BoundSymbol, Trace
from thunder_ir.tags import OpTag

__all__ = ["trace_graph_svg"]

_W, _H = 150, 26  # a statement's box
_FW, _FH = 200, 40  # a fusion region's box
_GAP_X, _GAP_Y = 14, 34
_COLORS = {
    "fusion": "#f4a259",
    "torch_ops": "#8cc084",
    "torch": "#9bb7d4",
    "torch.Tensor": "#9bb7d4",
    "torch_ex": "#b8c5d6",
    "view": "#e3e3e3",
}


def _is_region(bsym: BoundSymbol, regions: set[str]) -> bool:
    return bsym.sym.qualified_name in regions


def _color(bsym: BoundSymbol, region: bool) -> str:
    if region:
        return _COLORS["fusion"]
    if shares_memory(bsym):
        return _COLORS["view"]
    return _COLORS.get(bsym.sym.module, "#d9c2e9")


def trace_graph_svg(trace: Trace, *, max_nodes: int = 3000, anchor_prefix: str = "region-") -> str:
    """The SVG of ``trace`` (an execution trace); a short note instead when it has more than
    ``max_nodes`` statements (the picture would not be readable). A fusion region's box links
    to ``#<anchor_prefix><its name>``."""
    regions = {b.sym.qualified_name for b in getattr(trace, "fusion_regions", ())}
    nodes = [
        b
        for b in trace.bound_symbols
        if not ({OpTag.DELETE, OpTag.RETURN} & set(b.sym.tags)) and b.sym.module != "python"
    ]
    if not nodes:
        return "<p>(no statements)</p>"
    if len(nodes) > max_nodes:
        return f"<p>{len(nodes)} statements: too many to draw (max_nodes={max_nodes}).</p>"
    producer: dict[str, int] = {}
    preds: list[list[int]] = []
    for i, b in enumerate(nodes):
        preds.append(sorted({producer[p.name] for p in b.flat_proxy_args if p.name in producer}))
        for p in b.flat_proxy_outs:
            producer[p.name] = i
    layer = [0] * len(nodes)
    for i, ps in enumerate(preds):
        layer[i] = 1 + max((layer[p] for p in ps), default=-1)
    rows: dict[int, list[int]] = defaultdict(list)
    for i, lay in enumerate(layer):
        rows[lay].append(i)
    # Order each layer by the mean position of what it reads (fewer crossings), then place.
    slot: dict[int, float] = {}
    for lay in sorted(rows):
        row = rows[lay]
        row.sort(key=lambda i: sum(slot[p] for p in preds[i]) / len(preds[i]) if preds[i] else i)
        for k, i in enumerate(row):
            slot[i] = k
    widest = max(len(r) for r in rows.values())
    col = _FW + _GAP_X
    width = widest * col + _GAP_X
    row_h = _FH + _GAP_Y
    height = len(rows) * row_h + _GAP_Y
    pos: dict[int, tuple[float, float, float, float]] = {}  # x, y, w, h
    for lay, row in rows.items():
        offset = (widest - len(row)) * col / 2
        for k, i in enumerate(row):
            region = _is_region(nodes[i], regions)
            w, h = (float(_FW), float(_FH)) if region else (float(_W), float(_H))
            x = _GAP_X + offset + k * col + (_FW - w) / 2
            y = _GAP_Y / 2 + lay * row_h + (_FH - h) / 2
            pos[i] = (x, y, w, h)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{width:.0f}" '
        f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="img">'
    ]
    for i, ps in enumerate(preds):
        x, y, w, _ = pos[i]
        for k in ps:
            px, py, pw, ph = pos[k]
            x0, y0, x1, y1 = px + pw / 2, py + ph, x + w / 2, y
            mid = (y0 + y1) / 2
            parts.append(
                f'<path class="edge" d="M{x0:.0f},{y0:.0f} C{x0:.0f},{mid:.0f} {x1:.0f},{mid:.0f} '
                f'{x1:.0f},{y1:.0f}"/>'
            )
    for i, b in enumerate(nodes):
        parts.append(_node(b, pos[i], _is_region(b, regions), anchor_prefix))
    parts.append("</svg>")
    return "".join(parts)


def _node(
    b: BoundSymbol, box: tuple[float, float, float, float], region: bool, anchor_prefix: str
) -> str:
    x, y, w, h = box
    outs = ", ".join(p.name for p in b.flat_proxy_outs)
    title = f"{outs} = {b.sym.qualified_name}" if outs else b.sym.qualified_name
    if b.location:
        title += f"\n{b.location}"
    if region:
        ops = len(b.subsymbols)
        title += f"\n{ops} ops: " + ", ".join(sorted({s.sym.name for s in b.subsymbols}))[:400]
        label = f"{b.sym.name} · {ops} ops"
    else:
        label = b.sym.name if len(b.sym.name) <= 20 else b.sym.name[:19] + "…"
    rect = (
        f'<rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{h:.0f}" rx="4" '
        f'fill="{_color(b, region)}" class="{"region" if region else "op"}"/>'
    )
    text = (
        f'<text x="{x + w / 2:.0f}" y="{y + h / 2 + 4:.0f}" text-anchor="middle">'
        f"{escape(label)}</text>"
    )
    body = f"<g><title>{escape(title)}</title>{rect}{text}</g>"
    if region:
        return f'<a href="#{escape(anchor_prefix + b.sym.name)}">{body}</a>'
    return body
