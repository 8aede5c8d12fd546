"""Printing traces as Python. What is printed is what runs: ``Trace.python_callable`` compiles the
same text, with a context that binds the names the text uses."""

from __future__ import annotations

import dis
import linecache
import math
import sys
import types
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from thunder_ir.devices import Device
from thunder_ir.dtypes import DType
from thunder_ir.proxies import IntegerProxy, Proxy, TensorProxy
from thunder_ir.tags import OpTag

if TYPE_CHECKING:
    from thunder_ir.symbol import BoundSymbol, Symbol

__all__ = [
    "Printer",
    "PythonCode",
    "SymbolNamespace",
    "bound_symbol_lines",
    "global_names",
    "keep_source",
    "register_inline",
    "type_comment",
    "value_to_python",
]


def keep_source(fn: Callable[..., Any], filename: str, source: str) -> None:
    """Registers ``source``, which ``fn`` was compiled from under ``filename``, with linecache
    while ``fn`` lives: tracebacks through it show its lines, and a program's lines go with it
    (a process that compiles on and on keeps only those of the programs it still has)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    weakref.finalize(fn, linecache.cache.pop, filename, None)


# The module higher-order symbols print under: their sub-trace arguments are local functions.
HIGHER_ORDER_MODULE = "higher_order"


class SymbolNamespace:
    """What a module name in printed code (``prims``, ``torch``...) resolves to when it runs: the
    symbols (or their executor implementations) used by the trace, falling back to the real module
    of that name for anything else (``torch.float32``)."""

    def __init__(self, module: str) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        real = sys.modules.get(self._module)
        if real is None:
            raise AttributeError(f"{self._module}.{name} is not bound in this trace's context")
        return getattr(real, name)


class Printer:
    """Turns values into Python source, collecting the context names the source needs."""

    def __init__(self) -> None:
        self.ctx: dict[str, Any] = {}
        self._object_names: dict[int, str] = {}

    def symbol(self, sym: Symbol) -> str:
        ns = self.ctx.get(sym.module)
        if not isinstance(ns, SymbolNamespace):
            ns = SymbolNamespace(sym.module)
            self.ctx[sym.module] = ns
        setattr(ns, sym.name, sym.impl if sym.impl is not None else sym)
        return f"{sym.module}.{sym.name}"

    def value(self, x: Any) -> str:
        return value_to_python(x, self)

    def opaque(self, x: Any) -> str:
        """A name for an object that has no literal form (bound in the context)."""
        key = id(x)
        name = self._object_names.get(key)
        if name is None:
            if isinstance(x, (tuple, list, set, frozenset)) and any(
                isinstance(v, Proxy) for v in x
            ):
                raise TypeError(
                    f"a {type(x).__name__} holding proxies cannot be a constant of the program "
                    "(it would keep the values of the traced call)"
                )
            name = f"_obj{len(self._object_names)}"
            self._object_names[key] = name
            self.ctx[name] = x
        return name


def value_to_python(x: Any, printer: Printer | None = None) -> str:
    if isinstance(x, Proxy):
        return x.name
    if isinstance(x, PythonCode):
        if printer is not None:
            printer.ctx.update(x.names)
        return x.text
    if x is None or x is Ellipsis or type(x) in (bool, int, str):
        return "..." if x is Ellipsis else repr(x)
    if isinstance(x, (int, str)) or (
        isinstance(x, (float, complex)) and type(x) not in (float, complex)
    ):
        if printer is None:  # a subclass (an IntEnum, numpy's complex128): its value
            base: Any = next(b for b in (bool, int, str, float, complex) if isinstance(x, b))
            return value_to_python(base(x))
        return printer.opaque(x)
    if type(x) is float:
        if math.isnan(x):
            return "float('nan')"
        if math.isinf(x):
            return "float('inf')" if x > 0 else "float('-inf')"
        return repr(x)
    if isinstance(x, complex):
        return f"complex({value_to_python(x.real)}, {value_to_python(x.imag)})"
    if isinstance(x, DType):
        _need(printer, "dtypes")
        return f"dtypes.{x.name}"
    if isinstance(x, Device):
        _need(printer, "devices")
        return repr(x)
    if isinstance(x, torch.dtype):
        _need(printer, "torch")
        return f"torch.{str(x).removeprefix('torch.')}"  # (also one the IR lacks: a constant)
    if isinstance(x, torch.device):
        _need(printer, "torch")
        return f"torch.device({str(x)!r})"
    if isinstance(x, slice):
        return f"slice({value_to_python(x.start, printer)}, {value_to_python(x.stop, printer)}, {value_to_python(x.step, printer)})"
    if type(x) is tuple:
        inner = ", ".join(value_to_python(v, printer) for v in x)
        return f"({inner},)" if len(x) == 1 else f"({inner})"
    if type(x) is list:
        return "[" + ", ".join(value_to_python(v, printer) for v in x) + "]"
    if type(x) is dict:
        items = (
            f"{value_to_python(k, printer)}: {value_to_python(v, printer)}" for k, v in x.items()
        )
        return "{" + ", ".join(items) + "}"
    if isinstance(x, torch.Size):
        _need(printer, "torch")
        return f"torch.Size({value_to_python(tuple(x), printer)})"
    if (
        isinstance(x, (tuple, list))
        and not hasattr(type(x), "_fields")
        and any(isinstance(v, Proxy) for v in x)
    ):
        # A shape with symbolic sizes (a tuple subclass), or another sequence of proxies: its
        # items by name. As an opaque constant it would hold the traced call's values.
        plain = value_to_python(tuple(x), printer)
        if all(type(v) is int or isinstance(v, IntegerProxy) for v in x):
            _need(printer, "torch")
            return f"torch.Size({plain})"
        return plain
    from thunder_ir.trace import Trace

    if isinstance(x, Trace):  # a sub-trace: defined as a local function before its use
        return x.fn_name
    if printer is None:
        raise TypeError(f"cannot print {type(x).__name__} value {x!r} as Python")
    return printer.opaque(x)


def _need(printer: Printer | None, module: str) -> None:
    if printer is None or module in printer.ctx:
        return
    if module == "torch":
        printer.ctx["torch"] = torch
    else:
        import thunder_ir

        printer.ctx[module] = getattr(thunder_ir, module)


def _target(out: Any, printer: Printer) -> str:
    """The left-hand side for an output tree: names for proxies, ``_`` for constants."""
    if isinstance(out, Proxy):
        return out.name
    if isinstance(out, (tuple, list)):
        inner = ", ".join(_target(o, printer) for o in out)
        return f"({inner},)" if len(out) == 1 else f"({inner})"
    return "_"


def _has_proxy(out: Any) -> bool:
    if isinstance(out, Proxy):
        return True
    if isinstance(out, (tuple, list)):
        return any(_has_proxy(o) for o in out)
    return False


def _call(bsym: BoundSymbol, printer: Printer) -> str:
    parts = [value_to_python(a, printer) for a in bsym.args]
    parts += [f"{k}={value_to_python(v, printer)}" for k, v in bsym.kwargs.items()]
    return f"{printer.symbol(bsym.sym)}({', '.join(parts)})"


def type_comment(bsym: BoundSymbol) -> str:
    """``  # t0: "cpu f32[2, 3]"``: the tensors a statement defines (empty when none)."""
    outs = [o for o in bsym.flat_outs if isinstance(o, TensorProxy)]
    if not outs:
        return ""
    return "  # " + ", ".join(f'{o.name}: "{o.type_string()}"' for o in outs)


# Symbols printed as a statement of their own instead of a call (see ``register_inline``).
InlinePrinter = Callable[["BoundSymbol", "Printer"], "str | None"]
# Read once: an enum member's lookup on its class is slow, and this runs per printed statement.
_HIGHER_ORDER = OpTag.HIGHER_ORDER
_INLINE: dict[Symbol, InlinePrinter] = {}


def register_inline(sym: Symbol, printer: InlinePrinter) -> None:
    """Prints bound symbols of ``sym`` as the one-line statement ``printer(bsym, printer)``
    returns (None: as the usual call). For the prologue's reads and checks, which run on every
    call: ``if x is not _obj0: prims.check_is(x, _obj0)`` tests inline and calls the prim only
    to fail with its message."""
    _INLINE[sym] = printer


def bound_symbol_lines(
    bsym: BoundSymbol, indent: int, subsymbol_depth: int, printer: Printer | None = None
) -> list[str]:
    printer = printer if printer is not None else Printer()
    pad = "  " * indent
    lines = [f"{pad}# {h}" for h in bsym.header.splitlines()] if bsym.header else []
    if OpTag.RETURN in bsym.sym.tags:
        value = bsym.args[0] if bsym.args else None
        lines.append(f"{pad}return {value_to_python(value, printer)}")
        return lines
    if OpTag.DELETE in bsym.sym.tags:
        lines.append(f"{pad}del {', '.join(value_to_python(a, printer) for a in bsym.args)}")
        return lines
    inline = _INLINE.get(bsym.sym)
    text = inline(bsym, printer) if inline is not None else None
    if text is not None:
        lines.append(f"{pad}{text}")
        return lines
    if _HIGHER_ORDER in bsym.sym.tags:
        from thunder_ir.trace import Trace

        for sub in bsym.flat_args:
            if isinstance(sub, Trace):  # a higher-order symbol's function: a local def
                lines.extend(sub.function_lines(printer, indent, subsymbol_depth))
    call = _call(bsym, printer)
    if _has_proxy(bsym.output):
        lines.append(f"{pad}{_target(bsym.output, printer)} = {call}{type_comment(bsym)}")
    else:
        lines.append(f"{pad}{call}")
    if subsymbol_depth > 0:
        for sub in bsym.subsymbols:
            for line in bound_symbol_lines(sub, 0, subsymbol_depth - 1, Printer()):
                lines.append(f"{pad}  # {line}")
    return lines


class PythonCode:
    """Source text printed verbatim as an argument (a constraint evaluated inline by a prologue),
    with the global names the text uses (bound in the context of the code that prints it)."""

    __slots__ = ("names", "text")

    def __init__(self, text: str, names: dict[str, Any] | None = None) -> None:
        self.text = text
        self.names = names or {}

    def __repr__(self) -> str:
        return self.text


_LOAD_GLOBAL = dis.opmap["LOAD_GLOBAL"]
_LOAD_NAME = dis.opmap["LOAD_NAME"]
_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]
# From 3.11 LOAD_GLOBAL's argument is the name index shifted left by one (bit 0: push NULL).
_GLOBAL_SHIFT = 1 if sys.version_info >= (3, 11) else 0


def global_names(code: types.CodeType) -> set[str]:
    """The global (or builtin) names ``code`` and the code objects nested in it load. A scan of
    the raw bytecode: ``dis`` is an order of magnitude slower on traces of thousands of lines."""
    out: set[str] = set()
    raw, names, ext = code.co_code, code.co_names, 0
    for i in range(0, len(raw), 2):
        op, arg = raw[i], raw[i + 1] | ext
        if op == _EXTENDED_ARG:
            ext = arg << 8
            continue
        ext = 0
        if op == _LOAD_GLOBAL:
            out.add(names[arg >> _GLOBAL_SHIFT])
        elif op == _LOAD_NAME:
            out.add(names[arg])
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out |= global_names(const)
    return out
