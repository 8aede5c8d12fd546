"""Traces: a Python function's worth of bound symbols, printable and executable."""

from __future__ import annotations

import builtins
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from thunder_ir import constraints as C
from thunder_ir.codegen import Printer, bound_symbol_lines, global_names, keep_source
from thunder_ir.proxies import Proxy
from thunder_ir.sizes import note_constraint, note_data_fact
from thunder_ir.symbol import BoundSymbol
from thunder_ir.tracectx import tracectx

__all__ = ["PassRecord", "Trace"]

_BUILTINS = frozenset(dir(builtins))
_trace_ids = itertools.count()  # only for unique file names of compiled traces
_T = TypeVar("_T", bound="Trace")
_UNKNOWN = object()


@dataclass(frozen=True, slots=True)
class PassRecord:
    """Which pass produced a trace and how long it took."""

    name: str
    seconds: float


class Trace:
    """A function: inputs (proxies), bound symbols in order, and the constraints the recording
    relied on. ``python()`` prints it; ``python_callable()`` compiles exactly that text."""

    # The fields of a trace: what ``__init__`` takes and ``replace`` changes. The rest of its state
    # is the recording's (scopes, grad mode, hooks) or derived from the fields (name counters).
    FIELDS: ClassVar[tuple[str, ...]] = (
        "fn_name",
        "args",
        "bound_symbols",
        "names",
        "constraints",
        "history",
        "docstring",
    )

    def __init__(
        self,
        fn_name: str = "computation",
        *,
        args: Sequence[Proxy] = (),
        bound_symbols: Iterable[BoundSymbol] = (),
        names: Iterable[str] = (),
        constraints: Iterable[C.Expr] = (),
        history: Iterable[PassRecord] = (),
        docstring: str = "",
    ) -> None:
        self.fn_name = fn_name
        self.args: tuple[Proxy, ...] = tuple(args)
        self.bound_symbols: list[BoundSymbol] = list(bound_symbols)
        self.names: set[str] = set(names)
        self._counters: dict[str, int] = {}
        self.scopes: list[list[BoundSymbol]] = [self.bound_symbols]
        self.constraints: list[C.Expr] = list(constraints)
        # Int NumberProxies that stand for themselves (inputs, fresh sizes), by name: arithmetic
        # that comes back to one of them returns it instead of a new name.
        self.int_variables: dict[str, Any] = {}
        self.history: tuple[PassRecord, ...] = tuple(history)
        self.docstring = docstring
        # While False (a no-grad region of the recorded program), every tensor an op records
        # that would require grad is recorded through prims.stop_gradient: no gradient flows
        # through what the region computes, as in eager.
        self.grad_enabled = True
        # Called with every bound symbol recorded at the top level (a binding layer's checks).
        self.record_hook: Callable[[BoundSymbol], None] | None = None
        # Records each symbol call made at scope depth ``intercept_depth`` (the top level, or the
        # body of a checkpointed region there) in place of the symbol, where set:
        # ``intercept(sym, args, kwargs)`` returns what the call gives the program (the jit's
        # autocast, applied as eager's dispatcher applies it).
        self.intercept: Callable[[Any, tuple[Any, ...], dict[str, Any]], Any] | None = None
        self.intercept_depth = 1
        # torch's backend flags the recorded program changed, where they differ from the call's
        # (name and value, sorted): an op recorded now whose kernel reads one runs under them
        # (``thunder_ir.ops.backend_flags``).
        self.backend_flags: tuple[tuple[str, Any], ...] = ()
        # Scopes on top that hold a top-level call recorded provisionally (``intercept`` records
        # the call, then records it again as it computes): what is recorded there is the
        # program's own call, which may read tensor data.
        self.provisional = 0
        # Where the recorded program is now (the user's ``file:line``), or None where unknown:
        # set by whoever runs the program (the jit's binder); bound symbols recorded at the top
        # level carry it as their ``location``.
        self.locate: Callable[[], str | None] | None = None
        self._call_location: str | object | None = _UNKNOWN
        # Reads a traced tensor's values on this call (``prims.item``), where the recording
        # program can (the jit); the values read, by name: their constraints are checks the
        # computation makes (``prims.check_data``), not guards, recorded at the top level.
        self.read_data: Callable[[Any], Any] | None = None
        self.data_values: dict[str, Any] = {}
        # 0-dim tensors whose value is a known number, by name (``thunder_ir.known_numbers``).
        self.known_numbers: dict[str, Any] = {}
        self.data_sizes: set[str] = set()  # those that are sizes (never negative)
        # Integer tensors with no negative element (indices of nonzero elements): an index
        # tensor among them needs no wrapping of negative values.
        self.nonnegative: set[str] = set()
        # The symbolic numbers the program's inputs give (sizes and numbers passed in, under
        # ``cache="symbolic values"``), by name: a decision on data may compare with them.
        self.input_numbers: dict[str, Any] = {}
        self._data_checks: list[C.Expr] = []
        self._data_checked: set[str] = set()
        # The errors recorded ops raised (an op's check of its arguments), by id, with the op's
        # name: one the program catches and goes on from is a decision on an error eager's op
        # may not raise (the jit runs such a call eagerly).
        self.raised_by_ops: dict[int, tuple[BaseException, str]] = {}
        # Whether the recorded program would catch an error raised now (its ``try`` around the
        # call: the jit's interpreter answers), and the outputs of the top-level ops recorded
        # there whose kernels may raise on values (``raises_on_values``): the program may catch
        # their errors at run time, which tracing does not see (the jit runs such a call again
        # eagerly, so that nothing may take effect before them).
        self.in_handler: Callable[[], bool] | None = None
        self.caught_op_outputs: set[str] = set()
        # The devices whose generators the program draws from before such an op: the eager run
        # after its error starts from their states as the call found them.
        self.caught_after_draws_on: tuple[str, ...] = ()

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

    def merge_names(self, other: Trace) -> None:
        """The names ``other`` made (a pass's version of this trace) kept unique here too, in
        place: sub-traces sharing this namespace see them."""
        self.names |= other.names
        for prefix, n in other._counters.items():
            self._counters[prefix] = max(n, self._counters.get(prefix, 0))

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
        if self.in_handler is not None and len(self.scopes) == 1:
            from thunder_ir.symbol import raises_on_values

            if raises_on_values(bsym) and self.in_handler():
                self.caught_op_outputs.update(p.name for p in bsym.flat_proxy_outs)
        if self._data_checks and len(self.scopes) == 1:
            self._record_data_checks()

    def _record_data_checks(self) -> None:
        """The checks of decisions on values read from tensor data made inside the op just
        recorded (or at the top level): right after it, before anything reads its result."""
        from thunder_ir.prims.data import data_check, holds_for_sizes

        pending, self._data_checks = self._data_checks, []
        for expr in pending:
            note_data_fact(expr)  # checked below, so passes may rely on it
            text = expr.python()
            if text in self._data_checked or holds_for_sizes(expr, self.data_sizes):
                continue
            self._data_checked.add(text)
            # where the program decided (the user's line), when the recording program knows it
            check = data_check(
                expr,
                {**self.input_numbers, **self.data_values},
                self.call_location() if self.locate else None,
            )
            # Placed where the values it reads are known (after the checks already there): a
            # call whose decision differs stops before anything the decision led to runs.
            reads = {p.name for p in check.flat_proxy_args}
            body = self.bound_symbols
            at = 1 + max(
                (
                    i
                    for i, b in enumerate(body)
                    if not reads.isdisjoint(o.name for o in b.flat_proxy_outs)
                ),
                default=-1,
            )
            while at < len(body) and body[at].sym is check.sym:
                at += 1
            body.insert(at, check)

    def new_call(self) -> None:
        """A symbol is called at the top level: the location of what it records is looked up
        anew (by ``call_location``)."""
        self._call_location = _UNKNOWN

    def call_location(self) -> str | None:
        """Where the program made the top-level call being recorded (``locate``'s answer, asked
        once per call: the calls a composite decomposes into share it)."""
        loc = self._call_location
        if loc is _UNKNOWN:
            loc = self._call_location = self.locate() if self.locate is not None else None
        return loc  # type: ignore[return-value]

    def at_top_level(self) -> bool:
        """Whether a call recorded now is one the program made (not a composite's part)."""
        return len(self.scopes) - self.provisional == 1

    def push_scope(self) -> None:
        self.scopes.append([])

    def pop_scope(self) -> list[BoundSymbol]:
        if len(self.scopes) == 1:
            raise RuntimeError("pop_scope without a matching push_scope")
        return self.scopes.pop()

    def add_constraint(self, expr: C.Expr) -> None:
        if self.data_values and not expr.variables().isdisjoint(self.data_values):
            self._data_checks.append(expr)  # not a guard: the prologue cannot read the value
            if len(self.scopes) == 1:
                self._record_data_checks()
            return
        self.constraints.append(expr)
        note_constraint(expr)

    def constraint(self) -> C.Expr:
        """The simplified conjunction of everything the recording relied on."""
        return C.conjunction(self.constraints)

    # Deriving traces ------------------------------------------------------------------------

    @classmethod
    def like(cls: type[_T], trace: Trace, **fields: Any) -> _T:
        """A trace of this class with the fields of ``trace`` (see ``FIELDS``), those in
        ``fields`` changed, and its name counters: the names it makes stay unique in ``trace``'s
        namespace. Unknown field names are a TypeError. Nothing of the recording (scopes, grad
        mode, hooks) is carried over."""
        unknown = sorted(set(fields) - set(cls.FIELDS))
        if unknown:
            raise TypeError(
                f"{cls.__name__} has no field {', '.join(map(repr, unknown))} "
                f"(its fields: {', '.join(cls.FIELDS)})"
            )
        values = {f: getattr(trace, f) for f in cls.FIELDS if f not in fields and hasattr(trace, f)}
        values.update(fields)
        new = cls(**values)
        new._counters = dict(trace._counters)
        return new

    def replace(self: _T, **fields: Any) -> _T:
        """This trace with ``fields`` changed (``fn_name``, ``args``, ``bound_symbols``, ``names``,
        ``constraints``, ``history``, ``docstring``; a subclass may add its own): a new trace,
        with copies of the names and counters. Unknown field names are a TypeError."""
        return type(self).like(self, **fields)

    def derive(
        self, bound_symbols: Iterable[BoundSymbol], *, pass_name: str, seconds: float = 0.0
    ) -> Trace:
        """A trace with the same signature, names and constraints and new bound symbols, recording
        which pass produced it."""
        return Trace.like(
            self,
            bound_symbols=bound_symbols,
            history=(*self.history, PassRecord(pass_name, seconds)),
        )

    @contextmanager
    def rerecord(self, pass_name: str, *, start: float | None = None) -> Iterator[Trace]:
        """Records a pass's version of this trace: inside the block, the new trace (the fields of
        this one, its names and counters, no bound symbols) is the one symbols record into; when
        the block ends, its history names ``pass_name`` with the time since ``start`` (a
        ``time.perf_counter()`` reading; by default, when the block began)::

            with trace.rerecord("my_pass") as new:
                for bsym in trace.bound_symbols:
                    new.record(bsym)  # or call symbols: they record into ``new``
        """
        began = time.perf_counter() if start is None else start
        new = Trace.like(self, bound_symbols=())
        with tracectx(new):
            yield new
        new.history = (*self.history, PassRecord(pass_name, time.perf_counter() - began))

    def nested(self, fn_name: str) -> Trace:
        """A new, empty trace sharing this one's namespace (the same set of names and counters,
        not copies): a sub-trace recorded while this one is, whose names stay unique in both."""
        sub = Trace(fn_name)
        sub.names, sub._counters = self.names, self._counters
        sub.grad_enabled = self.grad_enabled
        sub.locate = self.locate
        return sub

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

    def python(self, *, subsymbol_depth: int = 1, standalone: bool = False) -> str:
        """The trace as readable Python (subsymbols of composite ops as comments). With
        ``standalone=True``, a module that runs on its own: the imports and bindings of the names
        the trace uses come first (``thunder_ir.standalone``; ``StandaloneError`` names a value
        without an importable path)."""
        if standalone:
            from thunder_ir.standalone import standalone_python

            return standalone_python(self)
        return self._source(subsymbol_depth)[0]

    def python_callable(self, ctx: dict[str, Any] | None = None) -> Callable[..., Any]:
        """Compiles the printed trace. ``ctx`` adds or overrides global names the code uses."""
        source, needed = self._source(subsymbol_depth=0)
        filename = f"<thunder trace {self.fn_name} #{next(_trace_ids)}>"
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
        keep_source(fn, filename, source)
        return fn

    def __repr__(self) -> str:
        return self.python()
