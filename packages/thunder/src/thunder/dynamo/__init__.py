"""Thunder through ``torch.compile``: ``torch.compile(model, backend="thunder")``,
``ThunderCompiler`` (the backend, with thunder's options) and ``thunderfx`` (both at once).

Dynamo splits the program at what it cannot hold and runs that natively; thunder compiles each
graph (``thunder/dynamo/compiler.py``). ``thunder.jit`` takes this route itself for a call that
reaches a ``torch.compiler.disable`` function (``thunder.run_natively``).
"""

from __future__ import annotations

from typing import Any

import torch

from thunder.dynamo.compiler import FALLBACKS, Subgraph, ThunderCompiler, thunder_backend

__all__ = ["FALLBACKS", "Subgraph", "ThunderCompiler", "subgraphs", "thunder_backend", "thunderfx"]


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
    """The graphs ``thunderfx``'s result (or a ``ThunderCompiler``) compiled so far."""
    compiler = compiled if isinstance(compiled, ThunderCompiler) else None
    if compiler is None:
        compiler = getattr(compiled, "_thunder_compiler", None)
    if compiler is None:
        raise TypeError(
            f"expected thunderfx's result or a ThunderCompiler, got {type(compiled).__name__}"
        )
    return list(compiler.subgraphs)
