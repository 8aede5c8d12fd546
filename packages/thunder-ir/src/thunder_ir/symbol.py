"""Symbols (ops) and bound symbols (one call of an op in a trace).

A ``Symbol`` is one declaration: its name, the module it prints under, its meta function, tags and
the torch callables it mirrors. Calling it while a trace is recorded runs the meta function (for
a composite op, the decomposition, whose calls are recorded as the bound symbol's subsymbols) and
appends a ``BoundSymbol`` to the trace.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from thunder_ir.errors import TracingError
from thunder_ir.float8_kernels import check_float8_kernel, has_float8_tensor
from thunder_ir.known_numbers import forget_written, note_prim_output, settle
from thunder_ir.proxies import NumberProxy, Proxy
from thunder_ir.pytree import tree_iter
from thunder_ir.tags import OpTag
from thunder_ir.tracectx import get_tracectx

__all__ = ["BoundSymbol", "Symbol", "leaf_prims", "raises_on_values"]


class Symbol:
    """An op. ``module`` is the name it prints under (``prims``, ``ltorch``, ``torch``...).

    ``meta`` computes the outputs from the inputs (proxies in, proxies out). For a prim it only
    infers metadata; for a composite op it is the decomposition, written with other symbols.
    ``torch_names`` are the qualified names of the torch callables the op mirrors
    (``"torch.add"``, ``"torch.Tensor.add"``); the map from torch callable to symbol is derived
    from them. ``impl`` is set on executor symbols: the callable that runs it.
    """

    __slots__ = (
        "__weakref__",
        "_stops_gradient",
        "_write",
        "id",
        "impl",
        "is_prim",
        "meta",
        "module",
        "name",
        "tags",
        "torch_names",
    )

    def __init__(
        self,
        name: str,
        meta: Callable[..., Any] | None,
        *,
        module: str,
        is_prim: bool = False,
        tags: Iterable[OpTag] = (),
        torch_names: Sequence[str] = (),
        impl: Callable[..., Any] | None = None,
        id: str | None = None,
    ) -> None:
        self.name = name
        self.module = module
        self.meta = meta
        self.is_prim = is_prim
        self.tags = frozenset(tags)
        # Two tags read on every call in a no-grad region (``__call__``), looked up once here.
        self._write = OpTag.WRITE in self.tags
        self._stops_gradient = OpTag.STOPS_GRADIENT in self.tags
        self.torch_names = tuple(torch_names)
        self.impl = impl
        self.id = id if id is not None else f"{module}.{name}"

    @property
    def qualified_name(self) -> str:
        return f"{self.module}.{self.name}"

    def __repr__(self) -> str:
        return f"<Symbol {self.id}>"

    # A symbol is its identity (executors, grad rules and traces key on it): a copy is the
    # symbol itself, and a pickle refers to the module-level name that holds it.
    def __copy__(self) -> Symbol:
        return self

    def __deepcopy__(self, memo: Any) -> Symbol:
        return self

    def __reduce__(self) -> Any:
        for fn in (self.meta, self.impl):
            module = sys.modules.get(getattr(fn, "__module__", None) or "")
            if module is None:
                continue
            for name, value in vars(module).items():
                if value is self:
                    return (_module_global, (module.__name__, name))
        for module_name, table in (
            ("thunder_ir.ops", "ALL_OPS"),
            ("thunder_ir.prims", "ALL_PRIMS"),
        ):
            registry = getattr(sys.modules.get(module_name), table, {})
            if registry.get(self.name) is self:  # generated ops (in-place variants)
                return (_module_global, (module_name, table, self.name))
        raise TypeError(
            f"cannot pickle {self!r}: a symbol pickles by the module-level name that holds it "
            "(in the module of its meta function), and it has none"
        )

    def bind(
        self, *args: Any, output: Any, subsymbols: Sequence[BoundSymbol] = (), **kwargs: Any
    ) -> BoundSymbol:
        """A bound symbol for a call whose output is already known (used by passes)."""
        return BoundSymbol(self, args, kwargs, output, tuple(subsymbols))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        trace = get_tracectx()
        if trace is None:
            if self.impl is not None:
                return self.impl(*args, **kwargs)
            raise RuntimeError(
                f"{self.qualified_name} was called outside of tracing. IR symbols only record; to "
                "run a trace, hand it to an executor (thunder_executors.transform_for_execution)"
            )
        try:
            return self._record(trace, args, kwargs)
        except TracingError:
            raise
        except Exception as e:
            # An error of the op (a check of its arguments): the recording program may catch it
            # and go on (``Trace.raised_by_ops``).
            trace.raised_by_ops.setdefault(id(e), (e, self.qualified_name))
            raise

    def _record(self, trace: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        numpy = sys.modules.get("numpy")
        returned = OpTag.RETURN in self.tags
        # (a returned numpy scalar or IntEnum member is the program's value, returned as it is)
        if numpy is not None and not returned:
            args, kwargs = _without_numpy_scalars(numpy.generic, args, kwargs)
        if not returned and (
            any(map(_has_number_subclass, args)) or any(map(_has_number_subclass, kwargs.values()))
        ):
            args, kwargs = _without_number_subclasses(args, kwargs)
        if any(_is_proxy_sequence(a) for a in args):
            args = tuple(tuple(a) if _is_proxy_sequence(a) else a for a in args)
        if any(_is_proxy_sequence(v) for v in kwargs.values()):
            kwargs = {k: tuple(v) if _is_proxy_sequence(v) else v for k, v in kwargs.items()}
        depth = len(trace.scopes)
        if depth == 1 and not self.is_prim:
            _check_int_operands(args, kwargs)
            if self.torch_names and has_float8_tensor(args, kwargs):
                check_float8_kernel(self.torch_names, self.tags, args, kwargs)
        if trace.intercept is not None and depth == trace.intercept_depth:
            return trace.intercept(self, args, kwargs)
        if trace.backend_flags and depth == 1 and not self.is_prim:
            from thunder_ir.ops.backend_flags import NOT_ROUTED, record_under_flags

            routed = record_under_flags(self, args, kwargs)
            if routed is not NOT_ROUTED:
                return routed
        if depth == 1 and trace.locate is not None:
            trace.new_call()
        keeps_grad = False
        if not trace.grad_enabled and self._write and len(args) > 1:
            # A write in a no-grad region writes a value without gradient history, as eager;
            # a tensor that requires grad keeps its place in the graph with the new values.
            value = _without_grad(args[0])
            if getattr(args[1], "requires_grad", False):
                from thunder_ir.prims import written_without_grad

                value = written_without_grad(args[1], value)
                keeps_grad = True
            args = (value, *args[1:])
        if self.is_prim or self.meta is None:
            known = len(trace.int_variables)
            try:
                out = self.meta(*args, **kwargs) if self.meta is not None else None
            except TypeError:
                _raise_for_out(self, kwargs)
                raise
            if isinstance(out, NumberProxy) and (
                any(out is a for a in args) or _existing_variable(trace, out, known)
            ):
                # An identity on a number (i + 0), or arithmetic that comes back to a number
                # already defined ((n + 1) - 1): nothing computed, nothing recorded.
                return out
            subsymbols: tuple[BoundSymbol, ...] = ()
        else:
            trace.push_scope()
            try:
                out = self.meta(*args, **kwargs)
            except TypeError:
                _raise_for_out(self, kwargs)
                raise
            finally:
                subsymbols = tuple(trace.pop_scope())
            if not subsymbols and _passes_input_through(args, kwargs, out):
                # The op computed nothing (dropout in eval mode, a reshape to the same shape):
                # its output is its input, and recording it would redefine that name.
                return out
        location = trace.call_location() if trace.locate is not None else None
        trace.record(BoundSymbol(self, args, kwargs, out, subsymbols, location=location))
        if self.is_prim:
            note_prim_output(self, args, kwargs, out)
        if trace.known_numbers:
            forget_written(self, args, kwargs)
            if trace.at_top_level():
                settle(out)
        if not trace.grad_enabled and not keeps_grad and not self._stops_gradient:
            return _without_grad(out)
        return out


def _raise_for_out(sym: Symbol, kwargs: dict[str, Any]) -> None:
    """A torch call with ``out=`` that the op does not take (its meta raised TypeError): torch
    runs it (``TorchRunsItError``: the front end runs the program through torch there)."""
    if kwargs.get("out") is not None:
        from thunder_ir.ops.fallback import TorchRunsItError

        raise TorchRunsItError(sym.qualified_name, "it writes into its out= argument") from None


def _module_global(module: str, name: str, key: str | None = None) -> Any:
    """A pickled ``Symbol``: the module-level value it was found under (or that registry's
    entry ``key``)."""
    import importlib

    found = getattr(importlib.import_module(module), name)
    return found if key is None else found[key]


# torch reads a Python int operand as an int64 or a uint64 and raises OverflowError beyond both.
_INT_OPERAND_MIN, _INT_OPERAND_MAX = -(2**63), 2**64 - 1


def _check_int_operands(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raises eager's OverflowError for a Python int operand no int64 or uint64 holds
    (``x * 2**70``), which the IR would otherwise compute with as a Python number."""
    for x in itertools.chain(args, kwargs.values()):
        if type(x) is int and not _INT_OPERAND_MIN <= x <= _INT_OPERAND_MAX:
            raise OverflowError(
                "int too big to convert" if x > 0 else "can't convert negative int to unsigned"
            )


def _without_numpy_scalars(
    generic: type, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` with each numpy scalar (also in a list or tuple, a shape) as the
    Python number torch reads it as."""

    def has(x: Any) -> bool:
        return isinstance(x, generic) or (
            type(x) in (tuple, list) and any(isinstance(v, generic) for v in x)
        )

    def plain(x: Any) -> Any:
        if isinstance(x, generic):
            return _python_number(x)
        if type(x) in (tuple, list) and any(isinstance(v, generic) for v in x):
            return type(x)(_python_number(v) if isinstance(v, generic) else v for v in x)
        return x

    if any(map(has, args)):
        args = tuple(map(plain, args))
    if any(map(has, kwargs.values())):
        kwargs = {k: plain(v) for k, v in kwargs.items()}
    return args, kwargs


_NUMBER_TYPES = (bool, int, float, complex)


def _is_number_subclass(x: Any) -> bool:
    return type(x) not in _NUMBER_TYPES and isinstance(x, _NUMBER_TYPES)


def _has_number_subclass(x: Any) -> bool:
    return _is_number_subclass(x) or (type(x) in (tuple, list) and any(map(_is_number_subclass, x)))


def _as_base_number(x: Any) -> Any:
    if not _is_number_subclass(x):
        return x
    return next(t for t in (int, float, complex) if isinstance(x, t))(x)


def _without_number_subclasses(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` with each number of a subclass of int, float or complex (an
    IntEnum member; also in a list or tuple, a shape) as its base number, as torch reads it."""

    def plain(x: Any) -> Any:
        if type(x) in (tuple, list) and any(map(_is_number_subclass, x)):
            return type(x)(map(_as_base_number, x))
        return _as_base_number(x)

    return tuple(map(plain, args)), {k: plain(v) for k, v in kwargs.items()}


def _python_number(x: Any) -> Any:
    """A numpy scalar as torch reads it as an operand: integers as int, floating and bool as
    float (torch takes a numpy bool as a double), complex as complex; others (datetime64,
    str_) unchanged, for the op's own error."""
    kind = getattr(getattr(x, "dtype", None), "kind", None)
    if kind == "i" or kind == "u":
        return int(x)
    if kind == "f" or kind == "b":
        return float(x)
    if kind == "c":  # (torch reads a complex64 by its real part, as float() does)
        return complex(x) if isinstance(x, complex) else float(x)
    return x


def _existing_variable(trace: Any, out: Any, known: int) -> bool:
    """Whether ``out`` is one of the first ``known`` int variables of ``trace`` (defined before
    the call that returned it)."""
    variables = trace.int_variables
    if variables.get(out.name) is not out:
        return False
    return list(variables).index(out.name) < known


def _is_proxy_sequence(x: Any) -> bool:
    """A tuple subclass holding proxies (a shape with symbolic sizes): recorded as a plain tuple,
    so passes see the proxies in it."""
    t = type(x)
    if t is tuple or not isinstance(x, tuple) or hasattr(t, "_fields") or hasattr(t, "n_fields"):
        return False
    from thunder_ir.proxies import Proxy

    return any(isinstance(v, Proxy) for v in x)


def _without_grad(out: Any) -> Any:
    """``out`` with each tensor that requires grad passed through ``prims.stop_gradient``."""
    from thunder_ir.prims import stop_gradient
    from thunder_ir.proxies import TensorProxy

    if isinstance(out, TensorProxy):
        return stop_gradient(out) if out.requires_grad else out
    if type(out) in (tuple, list):
        return type(out)(_without_grad(o) for o in out)
    return out


class BoundSymbol:
    """One call of a symbol: its arguments, output and (for composites) the calls it decomposes into.

    ``location`` is where the program made the call, as the user's ``file:line``, when known
    (recorded into a trace whose ``locate`` is set; the calls a composite decomposes into share
    its location; ``replace`` keeps it): errors about the call name that line (``where()``).

    Immutable by convention: passes build new ones with ``replace``.
    """

    __slots__ = (
        "_flat_args",
        "_flat_outs",
        "args",
        "header",
        "kwargs",
        "location",
        "output",
        "subsymbols",
        "sym",
    )

    def __init__(
        self,
        sym: Symbol,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        output: Any,
        subsymbols: tuple[BoundSymbol, ...] = (),
        header: str = "",
        location: str | None = None,
    ) -> None:
        self.sym = sym
        self.args = tuple(args)
        self.kwargs = kwargs
        self.output = output
        self.subsymbols = subsymbols
        self.header = header
        self.location = location
        self._flat_args: tuple[Any, ...] | None = None
        self._flat_outs: tuple[Any, ...] | None = None

    def replace(self, **changes: Any) -> BoundSymbol:
        values = {
            "sym": self.sym,
            "args": self.args,
            "kwargs": self.kwargs,
            "output": self.output,
            "subsymbols": self.subsymbols,
            "header": self.header,
            "location": self.location,
        }
        unknown = set(changes) - set(values)
        if unknown:
            raise TypeError(f"BoundSymbol.replace got unknown fields {sorted(unknown)}")
        values.update(changes)
        return BoundSymbol(**values)

    @property
    def flat_args(self) -> tuple[Any, ...]:
        """Every leaf of args and kwargs."""
        if self._flat_args is None:
            self._flat_args = (*tree_iter(self.args), *tree_iter(self.kwargs))
        return self._flat_args

    @property
    def flat_proxy_args(self) -> tuple[Proxy, ...]:
        return tuple(a for a in self.flat_args if isinstance(a, Proxy))

    @property
    def flat_outs(self) -> tuple[Any, ...]:
        if self._flat_outs is None:
            self._flat_outs = tuple(tree_iter(self.output))
        return self._flat_outs

    @property
    def flat_proxy_outs(self) -> tuple[Proxy, ...]:
        return tuple(o for o in self.flat_outs if isinstance(o, Proxy))

    def has_tag(self, tag: OpTag) -> bool:
        return tag in self.sym.tags

    def where(self) -> str:
        """`` at file:line`` (the user's line that made the call), or "" where it is unknown: for
        the messages of errors about this call."""
        return f" at {self.location}" if self.location else ""

    def python(self, indent: int = 0, *, subsymbol_depth: int = 1) -> list[str]:
        from thunder_ir.codegen import bound_symbol_lines

        return bound_symbol_lines(self, indent, subsymbol_depth)

    def __repr__(self) -> str:
        return "\n".join(self.python(subsymbol_depth=0))


def raises_on_values(bsym: BoundSymbol) -> bool:
    """Whether ``bsym``'s kernels may raise for some values of its tensor inputs (an index out
    of range, a singular matrix): ``OpTag.VALUE_ERRORS`` on it or in its decomposition, or a torch
    callable no op mirrors that checks them (``ops.fallback.checks_values``). Eager raises there
    whether or not the result is used, and a handler of the program may catch it."""
    tags = bsym.sym.tags
    if OpTag.VALUE_ERRORS in tags:
        return True
    if (OpTag.TORCH_FALLBACK in tags or OpTag.READS_DATA in tags) and bsym.args:
        name = bsym.args[0]
        if isinstance(name, str):
            from thunder_ir.ops.fallback import checks_values

            if checks_values(name, bsym.kwargs):
                return True
    return any(raises_on_values(s) for s in bsym.subsymbols)


def leaf_prims(bsym: BoundSymbol) -> list[BoundSymbol]:
    """The calls ``bsym`` comes down to: itself where it has no subsymbols, else the leaves of
    its decomposition, in order."""
    if not bsym.subsymbols:
        return [bsym]
    return [leaf for s in bsym.subsymbols for leaf in leaf_prims(s)]


def _passes_input_through(args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> bool:
    """Whether every proxy in ``out`` is one of the inputs (and there is at least one)."""
    outs = [o for o in tree_iter(out) if isinstance(o, Proxy)]
    if not outs:
        return False
    inputs = {id(x) for x in (*tree_iter(args), *tree_iter(kwargs)) if isinstance(x, Proxy)}
    return all(id(o) in inputs for o in outs)


def call_again(bsym: BoundSymbol, args: Any, kwargs: Any, sym: Symbol | None = None) -> Any:
    """``(sym or bsym.sym)(*args, **kwargs)``, recorded into the current trace: how a pass records
    a bound symbol again on new arguments. A read of tensor data (``OpTag.READS_DATA``) is
    recorded with the outputs it had: its values were read on the call's tensors (a decision the
    program made on them is checked by the computation, whatever a pass changed before it)."""
    if OpTag.READS_DATA in bsym.sym.tags:
        from thunder_ir.tracectx import require_tracectx

        out = bsym.output
        require_tracectx("call_again").record(
            BoundSymbol(bsym.sym, tuple(args), dict(kwargs), out, location=bsym.location)
        )
        return out
    return (sym or bsym.sym)(*args, **kwargs)
