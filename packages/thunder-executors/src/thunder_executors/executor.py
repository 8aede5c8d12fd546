"""The executor interface: executors claim bound symbols (one at a time, or whole regions) and
say how to run them.

An ``OperatorExecutor`` runs single ops: for an IR symbol it holds an implementation (an executor
``Symbol`` whose ``impl`` is the callable that runs) and optionally a checker that can refuse a
particular call (a dtype or device it cannot handle). A ``FusionExecutor`` runs regions: it says
which bound symbols it can fuse and turns a region into one bound symbol. Executors register by
name at import time; ``get_executor`` finds them and ``get_available_executors`` says which can
run on this machine.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from thunder_ir import BoundSymbol, Proxy, Symbol
from thunder_ir.devices import Device, to_torch_device
from thunder_ir.dtypes import DType, to_torch_dtype

__all__ = [
    "Checker",
    "Executor",
    "FusionExecutor",
    "ImplInfo",
    "OperatorExecutor",
    "Translator",
    "executor_availability",
    "get_all_executors",
    "get_available_executors",
    "get_executor",
    "register_executor",
    "register_unavailable",
    "same_arguments",
    "to_runtime_value",
]

# checker(*args, **kwargs) -> whether this executor can run this particular call.
Checker = Callable[..., bool]
# translator(bsym) -> the bound symbol that runs it (an executor symbol, same output proxies).
Translator = Callable[[BoundSymbol], BoundSymbol]


class Executor:
    """Something that can run (parts of) a trace. ``name`` is how users and recipes refer to it."""

    def __init__(self, name: str) -> None:
        # The name becomes a module name in the traces' generated code.
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(
                f"an executor's name must be a Python identifier (letters, digits, '_'), "
                f"got {name!r}"
            )
        self.name = name

    def availability(self) -> tuple[bool, str]:
        """Whether this executor can run on this machine, and why not when it cannot."""
        return True, ""

    def is_available(self) -> bool:
        return self.availability()[0]

    def claim_of(self, sym: Symbol) -> str:
        """How this executor takes calls of ``sym``, in a few words, as far as it can say without
        a call (empty: it never does). For ``./dev ops`` (``thunder.op_table``)."""
        return ""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


@dataclass(frozen=True, slots=True)
class ImplInfo:
    """How an operator executor runs one IR symbol."""

    translate: Translator
    checker: Checker | None = None

    def translated(self, bsym: BoundSymbol) -> BoundSymbol:
        """The bound symbol that runs ``bsym``, at ``bsym``'s location: one op becomes one call,
        and an error about that call names the user's line as one about the op would."""
        call = self.translate(bsym)
        if call.location is None and bsym.location is not None:
            call = call.replace(location=bsym.location)
        return call


def to_runtime_value(x: Any) -> Any:
    """An IR argument as the runtime wants it: IR dtypes and devices become torch's (recursively
    inside tuples, lists and dicts). Done once, when the execution trace is built."""
    if isinstance(x, DType):
        return to_torch_dtype(x)
    if isinstance(x, Device):
        return to_torch_device(x)
    if type(x) is tuple:
        return tuple(to_runtime_value(v) for v in x)
    if type(x) is list:
        return [to_runtime_value(v) for v in x]
    if type(x) is dict:
        return {k: to_runtime_value(v) for k, v in x.items()}
    return x


class OperatorExecutor(Executor):
    """Claims IR symbols one call at a time: ``implementations`` holds how it runs each symbol it
    claims, keyed by the symbol itself."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.implementations: dict[Symbol, ImplInfo] = {}

    def make_symbol(
        self, name: str, fn: Callable[..., Any], *, module: str | None = None
    ) -> Symbol:
        """An executor symbol printed as ``module.name`` (default: this executor's name) that runs ``fn``."""
        return Symbol(name, None, module=module or self.name, impl=fn, id=f"{self.name}::{name}")

    def register_implementation(
        self,
        symbol: Symbol,
        impl: Symbol | Callable[..., Any] | None = None,
        *,
        checker: Checker | None = None,
        translate: Translator | None = None,
    ) -> None:
        """Claims ``symbol``.

        ``impl`` is an executor symbol (or a plain callable, wrapped into one named after the IR
        symbol) called with the IR call's arguments, IR dtypes and devices translated to torch's.
        ``translate`` instead builds the executing bound symbol itself (to rearrange arguments).
        ``checker`` receives the IR call's arguments and may refuse it.
        """
        if not isinstance(symbol, Symbol):
            raise TypeError(
                f"register_implementation takes the IR symbol it claims, not {symbol!r}"
            )
        if translate is None:
            if impl is None:
                raise TypeError("register_implementation needs impl or translate")
            exsym = impl if isinstance(impl, Symbol) else self.make_symbol(symbol.name, impl)
            translate = same_arguments(exsym)
        self.implementations[symbol] = ImplInfo(translate, checker)

    def implementation_for(self, bsym: BoundSymbol) -> ImplInfo | None:
        """The implementation that would run ``bsym``, or None when this executor does not claim it."""
        info = self.implementations.get(bsym.sym)
        if info is None:
            return None
        if info.checker is not None and not info.checker(*bsym.args, **bsym.kwargs):
            return None
        return info

    def claims(self, bsym: BoundSymbol) -> bool:
        return self.implementation_for(bsym) is not None

    def claim_of(self, sym: Symbol) -> str:
        info = self.implementations.get(sym)
        if info is None:
            return ""
        if info.checker is None:
            return "runs"
        return f"runs if {getattr(info.checker, '__name__', 'its checker')}"

    def translate(self, bsym: BoundSymbol) -> BoundSymbol:
        info = self.implementation_for(bsym)
        if info is None:
            raise ValueError(f"executor {self.name} does not claim {bsym.sym.id}")
        return info.translated(bsym)


def same_arguments(exsym: Symbol) -> Translator:
    """A translator that calls ``exsym`` with the IR call's arguments (converted for the runtime)."""

    def translate(bsym: BoundSymbol) -> BoundSymbol:
        args = to_runtime_value(bsym.args)
        kwargs = to_runtime_value(bsym.kwargs)
        return BoundSymbol(exsym, args, kwargs, bsym.output, header=bsym.header)

    return translate


class FusionExecutor(Executor):
    """Claims regions: ``can_fuse`` says which bound symbols may join a region, ``fuse`` turns a
    region (bound symbols in a valid order, with its inputs and outputs) into one bound symbol."""

    def can_fuse(self, bsym: BoundSymbol) -> bool:
        raise NotImplementedError

    def fuse(
        self,
        region: Sequence[BoundSymbol],
        inputs: Sequence[Proxy],
        outputs: Sequence[Proxy],
        *,
        index: int,
    ) -> BoundSymbol:
        """One bound symbol running ``region``; ``index`` numbers the regions of one trace."""
        raise NotImplementedError

    def min_region_size(self) -> int:
        """Regions of fewer prims than this are not worth a fusion; their symbols go to operator
        executors."""
        return 1


# The executors, by name. Filled at import time (by the modules defining them), read-only after.
_EXECUTORS: dict[str, Executor] = {}
# Executors whose module failed to load (an optional dependency is missing), with the reason.
_UNAVAILABLE: dict[str, str] = {}


def register_executor(ex: Executor) -> Executor:
    if ex.name in _EXECUTORS:
        raise ValueError(f"an executor named {ex.name!r} is already registered")
    _EXECUTORS[ex.name] = ex
    _UNAVAILABLE.pop(ex.name, None)
    return ex


def register_unavailable(name: str, reason: str) -> None:
    """Records that executor ``name`` could not be loaded here, and why."""
    if name not in _EXECUTORS:
        _UNAVAILABLE[name] = reason


def get_executor(name: str) -> Executor:
    """The executor called ``name``; a clear error for unknown or unavailable ones."""
    ex = _EXECUTORS.get(name)
    if ex is not None:
        return ex
    if name in _UNAVAILABLE:
        raise RuntimeError(f"executor {name!r} is not available here: {_UNAVAILABLE[name]}")
    raise KeyError(
        f"unknown executor {name!r}; known: {', '.join(sorted({*_EXECUTORS, *_UNAVAILABLE}))}"
    )


def get_all_executors() -> tuple[Executor, ...]:
    return tuple(_EXECUTORS.values())


def executor_availability() -> dict[str, tuple[bool, str]]:
    """Every known executor name -> (available here, why not)."""
    out = {name: ex.availability() for name, ex in _EXECUTORS.items()}
    out.update({name: (False, why) for name, why in _UNAVAILABLE.items()})
    return out


def get_available_executors() -> tuple[Executor, ...]:
    """The executors that can run on this machine."""
    return tuple(ex for ex in _EXECUTORS.values() if ex.is_available())
