"""Traces: a Python function's worth of bound symbols, printable and executable."""

from __future__ import annotations

import builtins
import itertools
import linecache
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from thunder_ir import constraints as C
from thunder_ir.codegen import Printer, bound_symbol_lines, global_names
from thunder_ir.proxies import Proxy
from thunder_ir.sizes import note_constraint
from thunder_ir.symbol import BoundSymbol

__all__ = ["PassRecord", "Trace"]

_BUILTINS = frozenset(dir(builtins))
_trace_ids = itertools.count()  # only for unique file names of compiled traces


@dataclass(frozen=True, slots=True)
class PassRecord:
    """Which pass produced a trace and how long it took."""

    name: str
    seconds: float


class Trace:
    """A function: inputs (proxies), bound symbols in order, and the constraints the recording
    relied on. ``python()`` prints it; ``python_callable()`` compiles exactly that text."""

    def __init__(
        self,
        fn_name: str = "computation",
        *,
        args: Sequence[Proxy] = (),
        bound_symbols: Iterable[BoundSymbol] = (),
        names: Iterable[str] = (),
    ) -> None:
        self.fn_name = fn_name
        self.args: tuple[Proxy, ...] = tuple(args)
        self.bound_symbols: list[BoundSymbol] = list(bound_symbols)
        self.names: set[str] = set(names)
        self._counters: dict[str, int] = {}
        self.scopes: list[list[BoundSymbol]] = [self.bound_symbols]
        self.constraints: list[C.Expr] = []
        # Int NumberProxies that stand for themselves (inputs, fresh sizes), by name: arithmetic
        # that comes back to one of them returns it instead of a new name.
        self.int_variables: dict[str, Any] = {}
        self.history: tuple[PassRecord, ...] = ()
        self.docstring: str = ""
        # While False (a no-grad region of the recorded program), every tensor an op records
        # that would require grad is recorded through prims.stop_gradient: no gradient flows
        # through what the region computes, as in eager.
        self.grad_enabled = True
        # Called with every bound symbol recorded at the top level (a binding layer's checks).
        self.record_hook: Callable[[BoundSymbol], None] | None = None

    # Names ----------------------------------------------------------------------------------

    def make_name(self, prefix: str) -> str:
        n = self._counters.get(prefix, 0)
        while True:
            name = f"{prefix}{n}"
            n += 1
            if name not in self.names:
                break
        self._counters[prefix] = n
        self.names.add(name)
        return name

    def add_name(self, name: str) -> None:
        if name in self.names:
            raise ValueError(f"name {name!r} is already used in this trace")
        if not name.isidentifier():
            raise ValueError(f"{name!r} is not a valid Python identifier")
        self.names.add(name)

    # Recording -------------------------------------------------------------------------------

    def record(self, bsym: BoundSymbol) -> None:
        self.scopes[-1].append(bsym)
        if self.record_hook is not None and len(self.scopes) == 1:
            self.record_hook(bsym)

    def push_scope(self) -> None:
        self.scopes.append([])

    def pop_scope(self) -> list[BoundSymbol]:
        if len(self.scopes) == 1:
            raise RuntimeError("pop_scope without a matching push_scope")
        return self.scopes.pop()

    def add_constraint(self, expr: C.Expr) -> None:
        self.constraints.append(expr)
        note_constraint(expr)

    def constraint(self) -> C.Expr:
        """The simplified conjunction of everything the recording relied on."""
        return C.conjunction(self.constraints)

    # Deriving traces ------------------------------------------------------------------------

    def derive(
        self, bound_symbols: Iterable[BoundSymbol], *, pass_name: str, seconds: float = 0.0
    ) -> Trace:
        """A trace with the same signature, names and constraints and new bound symbols, recording
        which pass produced it."""
        t = Trace(self.fn_name, args=self.args, bound_symbols=bound_symbols, names=self.names)
        t._counters = dict(self._counters)
        t.constraints = list(self.constraints)
        t.history = (*self.history, PassRecord(pass_name, seconds))
        t.docstring = self.docstring
        return t

    @property
    def return_value(self) -> Any:
        from thunder_ir.tags import OpTag

        for bsym in reversed(self.bound_symbols):
            if OpTag.RETURN in bsym.sym.tags:
                return bsym.args[0] if bsym.args else None
        return None

    # Printing and running -------------------------------------------------------------------

    def _source(self, subsymbol_depth: int) -> tuple[str, dict[str, Any]]:
        printer = Printer()
        lines = []
        if self.history:
            lines.append(f"# produced by: {' -> '.join(r.name for r in self.history)}")
        lines.extend(self.function_lines(printer, 0, subsymbol_depth))
        return "\n".join(lines) + "\n", printer.ctx

    def function_lines(self, printer: Printer, indent: int, subsymbol_depth: int) -> list[str]:
        """The ``def`` of this trace, indented by ``indent`` levels (sub-traces of higher-order
        symbols are printed as local functions of the trace that calls them)."""
        pad = "  " * indent
        params = ", ".join(a.name for a in self.args)
        lines = [f"{pad}def {self.fn_name}({params}):"]
        if self.docstring:
            lines.append(f'{pad}  """{self.docstring}"""')
        for a in self.args:
            lines.append(f'{pad}  # {a.name}: "{a.type_string()}"')
        body_start = len(lines)
        for bsym in self.bound_symbols:
            lines.extend(bound_symbol_lines(bsym, indent + 1, subsymbol_depth, printer))
        if len(lines) == body_start or all(
            line.lstrip().startswith("#") for line in lines[body_start:]
        ):
            lines.append(f"{pad}  pass")
        return lines

    def python(self, *, subsymbol_depth: int = 1) -> str:
        """The trace as readable Python (subsymbols of composite ops as comments)."""
        return self._source(subsymbol_depth)[0]

    def python_callable(self, ctx: dict[str, Any] | None = None) -> Callable[..., Any]:
        """Compiles the printed trace. ``ctx`` adds or overrides global names the code uses."""
        source, needed = self._source(subsymbol_depth=0)
        filename = f"<thunder trace {self.fn_name} #{next(_trace_ids)}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        code = compile(source, filename, "exec")
        globs: dict[str, Any] = {"__builtins__": __builtins__, **needed, **(ctx or {})}
        unbound = sorted(n for n in global_names(code) if n not in globs and n not in _BUILTINS)
        if unbound:  # a bug of the code generator: say so now, not with a NameError at run time
            raise NameError(
                f"the generated code of trace {self.fn_name!r} uses names it does not bind: "
                f"{', '.join(unbound)}"
            )
        exec(code, globs)
        fn: Callable[..., Any] = globs[self.fn_name]
        fn.__thunder_source__ = source  # type: ignore[attr-defined]
        return fn

    def __repr__(self) -> str:
        return self.python()
