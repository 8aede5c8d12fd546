"""Thunder through ``torch.compile``: ``torch.compile(model, backend="thunder")``,
``ThunderCompiler`` (the backend, with thunder's options) and ``thunderfx`` (both at once).

Dynamo splits the program at what it cannot hold and runs that natively; thunder compiles each
graph (``thunder/dynamo/compiler.py``). ``thunder.jit`` takes this route itself for a call that
reaches a ``torch.compiler.disable`` function (``thunder.run_natively``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from thunder.dynamo.compiler import FALLBACKS, Subgraph, ThunderCompiler, thunder_backend

__all__ = [
    "FALLBACKS",
    "Subgraph",
    "ThunderCompiler",
    "subgraphs",
    "thunder_backend",
    "thunderfx",
    "write_reports",
]


def thunderfx(
    fn: Any, /, *, dynamic: bool | None = None, fullgraph: bool = False, **options: Any
) -> Any:
    """``torch.compile(fn, backend=ThunderCompiler(**options), dynamic=..., fullgraph=...)``:
    dynamo splits ``fn`` (a function or an ``nn.Module``) into graphs and thunder compiles each.
    ``options`` are ``thunder.jit``'s plus ``fallback=`` (see ``ThunderCompiler``). The result is
    torch.compile's (an ``OptimizedModule`` for a module); ``subgraphs(result)`` lists the graphs
    and thunder's program of each."""
    compiler = ThunderCompiler(**options)
    compiled = torch.compile(fn, backend=compiler, dynamic=dynamic, fullgraph=fullgraph)
    compiled._thunder_compiler = compiler  # type: ignore[attr-defined]
    return compiled


def subgraphs(compiled: Any) -> list[Subgraph]:
    """The graphs ``thunderfx``'s result (or a ``ThunderCompiler``) compiled so far; a graph
    split around nodes thunder refused is followed by its parts (``Subgraph.parts``)."""
    compiler = compiled if isinstance(compiled, ThunderCompiler) else None
    if compiler is None:
        compiler = getattr(compiled, "_thunder_compiler", None)
    if compiler is None:
        raise TypeError(
            f"expected thunderfx's result or a ThunderCompiler, got {type(compiled).__name__}"
        )
    out: list[Subgraph] = []
    for graph in compiler.subgraphs:  # each graph, then the parts thunder runs of a split one
        out += [graph, *graph.parts]
    return out


def write_reports(compiled: Any, folder: Any) -> list[Path]:
    """For each graph of ``compiled`` (``thunderfx``'s result or a ``ThunderCompiler``) that
    ran: ``folder/graph<i>/`` with the FX graph's code (``graph.py``), why it ran as it did
    (``runs.txt``), and, where thunder compiled it, its report (``report.html``,
    ``thunder.write_report``) and reproducer (``reproducer/``, ``thunder.write_reproducer``).
    Returns the graph folders."""
    from thunder import compile_stats, write_report, write_reproducer

    out = []
    for i, graph in enumerate(subgraphs(compiled)):
        where = Path(folder) / f"graph{i}"
        where.mkdir(parents=True, exist_ok=True)
        (where / "graph.py").write_text(graph.graph_module.code, encoding="utf-8")
        (where / "runs.txt").write_text(graph.runs + "\n", encoding="utf-8")
        if graph.runs == "thunder" and compile_stats(graph.function).compilations:
            write_report(graph.function, where / "report.html")
            write_reproducer(graph.function, where / "reproducer")
        out.append(where)
    return out
