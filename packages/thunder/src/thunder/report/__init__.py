"""``thunder.write_report``: one HTML page about a jitted function, to open in a browser.

It says why the function recompiled (each compilation and its reason), where its time goes
(each stage of compiling, each pass, and with ``profile=True`` each fusion region at run time),
what each pass did to the trace (a diff), the fusion regions and why they split, the guards of
the prologue, where calls ran eagerly or natively and why, the live tensor memory over the
forward and backward, and the execution trace drawn as a graph. The page is self-contained
(inline CSS, JS and SVG; its Content-Security-Policy forbids any network access).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from thunder.report import sections
from thunder.report.page import page
from thunder.report.profiling import RegionTime, profile_program

__all__ = ["SECTIONS", "write_report"]

# The ids of the page's sections, in order (each is an anchor: ``report.html#fusion``).
SECTIONS = tuple(sections.TITLES)


def write_report(
    jfn: Any,
    path: str | Path,
    *,
    args: tuple[Any, ...] | None = None,
    kwargs: dict[str, Any] | None = None,
    profile: bool = False,
    max_graph_nodes: int = 3000,
) -> Path:
    """Writes the report of ``jfn`` (a ``thunder.jit`` result that ran at least once) to
    ``path`` and returns it. When no call compiled (each ran eagerly), the page says why, and
    its sections about the compiled program say there is none.

    Args:
        args, kwargs: a call the last compiled program serves; with ``profile=True`` the
            program runs on it (a warm-up and three runs under ``torch.profiler``, forward and
            backward) and the page shows the time of each fusion region and kind of op.
        profile: measure the run time of each region (needs ``args``).
        max_graph_nodes: execution traces with more statements are not drawn.
    """
    from thunder import compile_stats
    from thunder.reproducer import program_name, reference_trace
    from thunder.reproducer.script import versions

    stats = compile_stats(jfn)
    compiled = bool(stats.last_traces)
    if not compiled and not (stats.eager_fallbacks or getattr(stats, "split_calls", 0)):
        raise ValueError("write_report: nothing ran yet; call the jitted function first")
    name = program_name(jfn)
    rows: list[RegionTime] | None = None
    why_not = "Not measured: pass profile=True and args (a call the program serves)."
    if profile:
        if args is None and kwargs is None:
            raise ValueError("write_report(profile=True) needs args (and kwargs) of a call")
        if compiled:
            rows = profile_program(stats, tuple(args or ()), dict(kwargs or {}))
    reference = reference_trace(stats.last_traces) if compiled else None
    body = [
        sections.summary_section(name, jfn, stats, versions()),
        sections.history_section(stats),
        sections.eager_section(stats, reference),
    ]
    if compiled:
        body += [
            sections.timing_section(stats),
            sections.profile_section(rows, why_not),
            sections.passes_section(stats),
            sections.fusion_section(stats),
            sections.guards_section(stats),
            sections.memory_section(stats),
            sections.graph_section(stats, max_graph_nodes),
        ]
    else:  # every call ran eagerly: the page says why, and has nothing compiled to show
        body += [sections.unavailable_section(s) for s in SECTIONS[3:]]
    intro = (
        f"<p class='muted'>Written {time.strftime('%Y-%m-%d %H:%M:%S')} by "
        "<code>thunder.write_report</code>. The traces are those of the last compilation.</p>"
    )
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page(f"thunder report: {name}", intro, body), encoding="utf-8")
    return out
