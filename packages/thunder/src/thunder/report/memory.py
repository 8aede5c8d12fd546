"""Live tensor memory over a compiled program's forward and backward, estimated from the
execution traces: each statement's new tensors take ``numel * itemsize`` bytes from where they
are made until the ``del`` of their last name; a view (or an in-place op's result) shares the
memory of the tensor it is made from. What the forward saves for the backward stays live until
the backward frees it. An estimate: ``reshape`` is counted as a view, a kernel's scratch memory
and the allocator's rounding are not counted."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

from thunder_ir import BoundSymbol, Proxy, TensorProxy, Trace
from thunder_ir.tags import OpTag

__all__ = [
    "MemoryStep",
    "MemoryTimeline",
    "format_bytes",
    "live_memory",
    "memory_svg",
    "shares_memory",
]

# Executor calls whose result shares its first argument's memory.
_VIEWS = frozenset(
    {
        "reshape", "view", "view_as", "permute", "transpose", "t", "expand", "expand_as",
        "narrow", "select", "slice", "squeeze", "unsqueeze", "unflatten", "flatten", "split",
        "split_with_sizes", "chunk", "unbind", "as_strided", "diagonal", "movedim", "detach",
        "alias", "real", "imag", "unfold", "swapaxes", "swapdims", "mT", "mH", "T",
        "shallow_copy", "broadcast_in_dim", "expand_dims",
    }
)  # fmt: skip


@dataclass(frozen=True)
class MemoryStep:
    """Bytes live after one statement of a trace."""

    phase: str  # "forward" or "backward"
    label: str  # the statement, short
    inputs: int  # the program's inputs (parameters, arguments)
    saved: int  # what the forward saves for the backward
    other: int  # every other live tensor

    @property
    def total(self) -> int:
        return self.inputs + self.saved + self.other


@dataclass
class MemoryTimeline:
    """The steps of the forward then the backward (``backward_start``: index of its first)."""

    steps: list[MemoryStep] = field(default_factory=list)
    backward_start: int | None = None

    @property
    def peak(self) -> MemoryStep | None:
        return max(self.steps, key=lambda s: s.total, default=None)


def _nbytes(p: TensorProxy) -> int:
    n = 1
    for d in p.shape:
        n *= int(getattr(d, "value", d))
    return n * p.dtype.bytes


def shares_memory(bsym: BoundSymbol) -> bool:
    name = bsym.sym.name
    return name in _VIEWS or (name.endswith("_") and not name.startswith("_"))


class _Live:
    """Storages by id, the names pointing at each, and which are inputs or saved."""

    def __init__(self) -> None:
        self.storage_of: dict[str, int] = {}
        self.size: dict[int, int] = {}
        self.names: dict[int, set[str]] = {}
        self.kind: dict[int, str] = {}
        self._next = 0

    def new(self, name: str, nbytes: int, kind: str) -> None:
        sid = self._next
        self._next += 1
        self.storage_of[name] = sid
        self.size[sid] = nbytes
        self.names[sid] = {name}
        self.kind[sid] = kind

    def alias(self, name: str, of: str) -> bool:
        sid = self.storage_of.get(of)
        if sid is None:
            return False
        self.storage_of[name] = sid
        self.names[sid].add(name)
        return True

    def drop(self, name: str) -> None:
        sid = self.storage_of.pop(name, None)
        if sid is None:
            return
        names = self.names[sid]
        names.discard(name)
        if not names and self.kind[sid] != "inputs":
            del self.size[sid], self.names[sid], self.kind[sid]

    def totals(self) -> tuple[int, int, int]:
        out = {"inputs": 0, "saved": 0, "other": 0}
        for sid, nbytes in self.size.items():
            out[self.kind[sid]] += nbytes
        return out["inputs"], out["saved"], out["other"]


def _label(bsym: BoundSymbol) -> str:
    outs = ", ".join(p.name for p in bsym.flat_proxy_outs[:3])
    return f"{outs} = {bsym.sym.qualified_name}" if outs else bsym.sym.qualified_name


def _walk(trace: Trace, live: _Live, phase: str, steps: list[MemoryStep], saved: set[str]) -> None:
    for bsym in trace.bound_symbols:
        tags = bsym.sym.tags
        if OpTag.DELETE in tags:
            for p in bsym.flat_args:
                if isinstance(p, Proxy):
                    live.drop(p.name)
            continue
        if OpTag.RETURN in tags:
            continue
        outs = [p for p in bsym.flat_proxy_outs if isinstance(p, TensorProxy)]
        args = [p for p in bsym.flat_proxy_args if isinstance(p, TensorProxy)]
        for p in outs:
            if p.name in live.storage_of:
                continue  # an input returned as it is
            if shares_memory(bsym) and args and live.alias(p.name, args[0].name):
                continue
            live.new(p.name, _nbytes(p), "saved" if p.name in saved else "other")
        steps.append(MemoryStep(phase, _label(bsym), *live.totals()))


def live_memory(forward: Trace, backward: Trace | None = None) -> MemoryTimeline:
    """The live tensor memory after each statement of ``forward`` and then of ``backward``
    (execution traces of one program: the forward's second returned value is what it saves)."""
    live = _Live()
    for a in forward.args:
        if isinstance(a, TensorProxy):
            live.new(a.name, _nbytes(a), "inputs")
    saved: set[str] = set()
    ret: Any = forward.return_value
    if backward is not None and isinstance(ret, tuple) and len(ret) == 2:
        saved = {p.name for p in ret[1] if isinstance(p, TensorProxy)}
    timeline = MemoryTimeline()
    _walk(forward, live, "forward", timeline.steps, saved)
    if backward is None:
        return timeline
    # The forward's outputs stay live (the caller holds them until its backward).
    for a in backward.args:  # cotangents: new memory, given by autograd
        if isinstance(a, TensorProxy) and a.name not in live.storage_of:
            live.new(a.name, _nbytes(a), "other")
    timeline.backward_start = len(timeline.steps)
    _walk(backward, live, "backward", timeline.steps, saved)
    return timeline


def memory_svg(timeline: MemoryTimeline, *, width: int = 960, height: int = 260) -> str:
    """A stacked area chart of ``timeline``: inputs, saved for backward, the rest; the forward
    and backward split by a line, the peak marked; each step's numbers on hover."""
    steps = timeline.steps
    if not steps:
        return "<p>(no statements)</p>"
    left, bottom, top = 56, 22, 14
    plot_w, plot_h = width - left - 10, height - bottom - top
    highest = max(s.total for s in steps)
    peak = highest or 1
    n = len(steps)

    def x(i: float) -> float:
        return left + (i / max(n - 1, 1)) * plot_w

    def y(v: float) -> float:
        return top + plot_h - v / peak * plot_h

    def area(lower: list[int], upper: list[int], color: str) -> str:
        points = [f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(upper)]
        points += [f"{x(i):.1f},{y(v):.1f}" for i, v in reversed(list(enumerate(lower)))]
        return f'<polygon points="{" ".join(points)}" fill="{color}" stroke="none"/>'

    base = [0] * n
    inputs = [s.inputs for s in steps]
    saved = [s.inputs + s.saved for s in steps]
    total = [s.total for s in steps]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">',
        area(base, inputs, "#c6d4e1"),
        area(inputs, saved, "#f4a259"),
        area(saved, total, "#4c78a8"),
    ]
    for frac in (0.0, 0.5, 1.0):
        v = peak * frac
        parts.append(
            f'<text x="{left - 4}" y="{y(v) + 4:.0f}" text-anchor="end">{format_bytes(v)}</text>'
            f'<line x1="{left}" x2="{width - 10}" y1="{y(v):.0f}" y2="{y(v):.0f}" '
            'stroke="#e1e4e8"/>'
        )
    if timeline.backward_start is not None:
        bx = x(timeline.backward_start - 0.5)
        parts.append(
            f'<line x1="{bx:.0f}" x2="{bx:.0f}" y1="{top}" y2="{top + plot_h}" stroke="#333" '
            f'stroke-dasharray="4 3"/><text x="{bx + 4:.0f}" y="{top + 10}">backward</text>'
        )
    parts.append(f'<text x="{left}" y="{top + 10}">forward</text>')
    k = next(i for i, s in enumerate(steps) if s.total == highest)
    right = x(k) > width - 140  # the label on the side with room for it
    parts.append(
        f'<circle cx="{x(k):.1f}" cy="{y(peak):.1f}" r="3.5" fill="#c0392b"/>'
        f'<text x="{x(k) + (-6 if right else 6):.0f}" y="{y(peak) + 14:.0f}" fill="#c0392b" '
        f'text-anchor="{"end" if right else "start"}">peak {format_bytes(highest)}</text>'
    )
    # Hover targets: one per step, thinned out on long programs to keep the page small.
    stride = max(1, n // 600)
    w = max(plot_w / n * stride, 1.0)
    for i in range(0, n, stride):
        s = steps[i]
        tip = (
            f"{s.phase} {i}: {s.label}\ntotal {format_bytes(s.total)} (inputs {format_bytes(s.inputs)}, "
            f"saved {format_bytes(s.saved)}, other {format_bytes(s.other)})"
        )
        parts.append(
            f'<rect x="{x(i) - w / 2:.1f}" y="{top}" width="{w:.1f}" height="{plot_h}" '
            f'fill="transparent"><title>{escape(tip)}</title></rect>'
        )
    parts.append("</svg>")
    return "".join(parts)


def format_bytes(nbytes: float) -> str:
    if nbytes >= 1 << 30:
        return f"{nbytes / (1 << 30):.2f} GiB"
    if nbytes >= 1 << 20:
        return f"{nbytes / (1 << 20):.2f} MiB"
    return f"{nbytes / 1024:.1f} KiB"
