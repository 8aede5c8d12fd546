"""The sections of a report, each from a jitted function's ``CompileStats`` (and its traces)."""

from __future__ import annotations

from collections import Counter
from html import escape
from typing import Any

from thunder.report.graph import trace_graph_svg
from thunder.report.memory import format_bytes, live_memory, memory_svg
from thunder.report.page import Html, bars, details, diff, pre, section, table
from thunder.report.profiling import RegionTime
from thunder_ir import BoundSymbol, Trace
from thunder_ir.tags import OpTag

__all__ = [
    "TITLES",
    "eager_section",
    "fusion_section",
    "graph_section",
    "guards_section",
    "history_section",
    "memory_section",
    "passes_section",
    "profile_section",
    "summary_section",
    "timing_section",
    "unavailable_section",
]

# The sections of the page, in order: id (an anchor, ``report.html#fusion``) -> title.
TITLES = {
    "summary": "Summary",
    "history": "Recompile history",
    "eager": "Where it ran, natively or eagerly",
    "timing": "Time of each stage",
    "profile": "Run time of each region",
    "passes": "Traces after each pass",
    "fusion": "Fusion regions",
    "guards": "Guards (the prologue)",
    "memory": "Live tensor memory",
    "graph": "The execution trace as a graph",
}


def _p(text: str, cls: str = "") -> str:
    return f"<p class='{cls}'>{text}</p>" if cls else f"<p>{text}</p>"


def _statements(trace: Trace) -> list[BoundSymbol]:
    skip = {OpTag.DELETE, OpTag.RETURN}
    return [b for b in trace.bound_symbols if not skip & set(b.sym.tags)]


def _execution_traces(stats: Any) -> dict[str, Trace]:
    out = {"forward": stats.last_traces[-1]}
    if stats.last_backward_traces:
        out["backward"] = stats.last_backward_traces[-1]
    return out


def unavailable_section(id_: str) -> str:
    """A section about the compiled program when there is none (every call ran eagerly)."""
    why = "No compiled program: every call so far ran eagerly or natively (see above)."
    return section(id_, TITLES[id_], _p(why, "muted"))


def summary_section(name: str, jfn: Any, stats: Any, versions: dict[str, str]) -> str:
    fn = getattr(jfn, "_thunder_function", jfn)
    executors = ", ".join(getattr(e, "name", str(e)) for e in getattr(fn, "executors", ()))
    options = getattr(fn, "options", None)
    rows: list[tuple[str, object]] = [
        ("function", name),
        ("compilations", stats.compilations),
        ("cache hits / misses", f"{stats.cache_hits} / {stats.cache_misses}"),
        ("calls run eagerly", stats.eager_fallbacks),
        ("last compile", f"{stats.last_compile_seconds:.3f} s"),
        ("fusion regions compiling so far", f"{stats.fusion_compile_seconds:.3f} s"),
        ("executors", executors or "?"),
        ("differentiated", "yes (a backward trace)" if stats.last_backward_traces else "no"),
    ]
    if options is not None:
        rows.append(("cache", getattr(options.cache, "value", str(options.cache))))
    rows += [(f"version of {k}", v) for k, v in versions.items()]
    return section("summary", TITLES["summary"], table(["", ""], rows))


def history_section(stats: Any) -> str:
    history = list(getattr(stats, "history", ()))
    if not history:
        return section("history", TITLES["history"], _p("No compilation recorded."))
    stages = list(dict.fromkeys(k for r in history for k in r.timings if k != "total"))
    rows = [
        (
            r.number,
            r.seconds,
            r.reason or "first compilation",
            r.call_site or "?",
            *(r.timings.get(s, 0.0) for s in stages),
        )
        for r in history
    ]
    intro = _p(
        f"{len(history)} compilation(s). Each one after the first says what differed from the "
        "programs compiled before (the arguments' metadata, a failed guard, a decision on data)."
    )
    headers = ["#", "seconds", "why", "call site", *(f"{s} s" for s in stages)]
    return section("history", TITLES["history"], intro + table(headers, rows))


def eager_section(stats: Any, reference: Trace | None) -> str:
    parts = []
    if stats.eager_fallbacks:
        parts.append(
            _p(
                f"{stats.eager_fallbacks} call(s) ran eagerly (not compiled). Last reason: "
                f"<b>{escape(stats.last_eager_reason or '?')}</b>",
                "warn",
            )
        )
    else:
        parts.append(_p("Every call ran a compiled program (no call ran eagerly)."))
    split = getattr(stats, "split_calls", 0)
    if split:
        graphs = len(getattr(stats, "split_graphs", ()))
        parts.append(
            _p(
                f"{split} call(s) reached functions run natively and were split around them "
                f"({graphs} graphs compiled). Last reason: "
                f"{escape(str(getattr(stats, 'last_split_reason', '') or '?'))}",
                "warn",
            )
        )
    if reference is None:
        return section("eager", TITLES["eager"], "".join(parts))
    rows = []
    for phase, trace in _execution_traces(stats).items():
        counts = Counter(b.sym.module for b in _statements(trace))
        rows += [(phase, module, n) for module, n in counts.most_common()]
    parts.append("<h3>Who runs each statement of the execution traces</h3>")
    parts.append(table(["phase", "executor (module printed)", "statements"], rows))
    fallback = [b for b in reference.bound_symbols if OpTag.TORCH_FALLBACK in b.sym.tags]
    parts.append("<h3>Torch calls no thunder op mirrors (run by torch as they are)</h3>")
    if fallback:
        parts.append(
            table(
                ["torch callable", "where"],
                [(str(b.args[0]) if b.args else b.sym.name, b.location or "?") for b in fallback],
            )
        )
    else:
        parts.append(_p("None: every torch call has a thunder op."))
    reads = stats.last_data_reads
    parts.append("<h3>Reads of tensor data (checked on every call)</h3>")
    parts.append(pre("\n".join(reads)) if reads else _p("None."))
    return section("eager", TITLES["eager"], "".join(parts))


def timing_section(stats: Any) -> str:
    stages = [(k, v) for k, v in stats.last_timings.items() if k != "total"]
    stages.append(("fusion regions (compiled on first calls)", stats.fusion_compile_seconds))
    parts = [_p(f"Last compilation: {stats.last_compile_seconds:.3f} s."), bars(stages)]
    for phase, traces in (("forward", stats.last_traces), ("backward", stats.last_backward_traces)):
        if traces:
            passes = [(r.name, r.seconds) for r in traces[-1].history]
            parts.append(f"<h3>Passes of the {phase} trace</h3>" + bars(passes))
    return section("timing", TITLES["timing"], "".join(parts))


def profile_section(rows: list[RegionTime] | None, why_not: str | None) -> str:
    if rows is None:
        body = _p(why_not or "Not measured.", "muted")
    else:
        device = any(r.device_ms for r in rows)
        headers = ["phase", "region or op", "calls", "CPU ms", *(["device ms"] if device else [])]
        body = _p(
            "Per run of the program (forward, then backward with cotangents of ones), from "
            "torch.profiler; <code>total</code> is the whole phase."
        ) + table(
            headers,
            [
                (r.phase, r.label, r.calls, r.cpu_ms, *([r.device_ms] if device else []))
                for r in rows
            ],
        )
    return section("profile", TITLES["profile"], body)


def passes_section(stats: Any) -> str:
    parts = [
        _p(
            "The trace after each pass, with what the pass changed (a diff of the printed "
            "traces). The last trace of each list is what runs."
        )
    ]
    groups = (
        ("Computation (forward)", stats.last_traces),
        ("Backward", stats.last_backward_traces),
    )
    for title, traces in groups:
        if not traces:
            continue
        parts.append(f"<h3>{title}</h3>")
        before: str | None = None
        done: tuple[Any, ...] = ()
        for i, trace in enumerate(traces):
            text = trace.python(subsymbol_depth=0)
            # The passes since the trace before (a pass may record no trace of its own).
            new = trace.history[len(done) :] if trace.history[: len(done)] == done else ()
            new = new or trace.history[-1:]
            done = trace.history
            names = " → ".join(r.name for r in new)
            seconds = sum(r.seconds for r in new)
            stage = f"{names} ({seconds:.3f} s)" if new else "as recorded"
            head = f"{i}. {escape(stage)}: {len(_statements(trace))} statements"
            body = ""
            if before is not None:
                diff_html, added, removed = diff(before, text)
                body += details(f"what changed: +{added} &minus;{removed} lines", diff_html)
            body += details("the trace", pre(text))
            parts.append(details(head, body, open_=i == len(traces) - 1))
            before = text
    return section("passes", TITLES["passes"], "".join(parts), expandable=True)


def _regions(trace: Trace) -> list[BoundSymbol]:
    return list(getattr(trace, "fusion_regions", ()))


def fusion_section(stats: Any) -> str:
    parts = []
    any_region = False
    for phase, trace in _execution_traces(stats).items():
        regions = _regions(trace)
        notes = list(getattr(trace, "fusion_notes", ()))
        parts.append(f"<h3>{phase.capitalize()}: {len(regions)} fusion region(s)</h3>")
        if not regions:
            parts.append(_p("No fusion region (no fusion executor, or nothing to fuse).", "muted"))
            continue
        any_region = True
        rows = []
        for b in regions:
            impl = b.sym.impl
            split = b.header.partition("; ")[2] if b.header else ""
            ops = Counter(s.sym.name for s in b.subsymbols)
            anchor = f"region-{phase}-{b.sym.name}"
            rows.append(
                (
                    Html(f"<a id='{anchor}'></a><b>{escape(b.sym.name)}</b>"),
                    b.sym.module,
                    len(b.subsymbols),
                    len(b.args),
                    len(b.flat_proxy_outs),
                    str(getattr(impl, "status", "")),
                    float(getattr(impl, "compile_seconds", 0.0)),
                    ", ".join(f"{k} x{n}" for k, n in ops.most_common(8)),
                    split or "—",
                )
            )
        headers = ["region", "executor", "ops", "inputs", "outputs", "status", "compile s"]
        parts.append(table([*headers, "main ops", "why it starts here"], rows))
        if notes:
            parts.append(details(f"{len(notes)} split(s)", pre("\n".join(notes))))
        for b in regions:
            source = getattr(b.sym.impl, "source", None)
            if isinstance(source, str):
                parts.append(details(f"source of {escape(b.sym.name)}", pre(source)))
    intro = _p(
        "Each region runs as one compiled function. A region is split from another where a "
        "statement outside both lies on a dependency path between them."
    )
    if not any_region:
        intro = ""
    return section("fusion", TITLES["fusion"], intro + "".join(parts))


def guards_section(stats: Any) -> str:
    if not stats.last_prologue_traces:
        return section("guards", TITLES["guards"], _p("No prologue."))
    prologue = stats.last_prologue_traces[-1]
    counts = Counter(b.sym.name for b in prologue.bound_symbols if b.sym.module != "python")
    body = _p(
        "The prologue runs on every call before the program: it unpacks what the program reads "
        "and checks what tracing relied on beyond the cache key (the arguments' structure and "
        "tensor metadata). A failed check tries the next program, or compiles one."
    )
    body += table(["check or read", "count"], counts.most_common())
    body += details("the prologue trace", pre(prologue.python()))
    if stats.last_epilogue_source:
        body += details(
            "the epilogue (writes replayed, the result rebuilt)", pre(stats.last_epilogue_source)
        )
    return section("guards", TITLES["guards"], body)


def memory_section(stats: Any) -> str:
    traces = _execution_traces(stats)
    timeline = live_memory(traces["forward"], traces.get("backward"))
    peak = timeline.peak
    body = _p(
        "Live tensor memory after each statement, estimated from the execution traces "
        "(sizes and the <code>del</code> after each last use; views share memory): the "
        "program's inputs (parameters and arguments), what the forward saves for the "
        "backward, and the rest."
    )
    if peak is not None:
        body += _p(
            f"Peak {format_bytes(peak.total)} in the {peak.phase} at <code>{escape(peak.label)}</code> "
            f"(inputs {format_bytes(peak.inputs)}, saved {format_bytes(peak.saved)}, other {format_bytes(peak.other)})."
        )
    legend = (
        "<p><span class='bar' style='background:#c6d4e1;width:14px'></span> inputs "
        "<span class='bar' style='background:#f4a259;width:14px'></span> saved for backward "
        "<span class='bar' style='background:#4c78a8;width:14px'></span> other</p>"
    )
    return section("memory", TITLES["memory"], body + legend + memory_svg(timeline))


def graph_section(stats: Any, max_nodes: int) -> str:
    parts = [
        _p(
            "Each box is a statement of the execution trace (colour: who runs it; grey: a view); "
            "an edge goes from a value's statement to the statements reading it. Orange boxes "
            "are fusion regions (click for their details). Hover for the statement."
        )
    ]
    for phase, trace in _execution_traces(stats).items():
        svg = trace_graph_svg(trace, max_nodes=max_nodes, anchor_prefix=f"region-{phase}-")
        figure = f"<div class='scroll'>{svg}</div>"
        parts.append(
            details(
                f"{phase} ({len(_statements(trace))} statements)", figure, open_=phase == "forward"
            )
        )
    return section("graph", TITLES["graph"], "".join(parts))
