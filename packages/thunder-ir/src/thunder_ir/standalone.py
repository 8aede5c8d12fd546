"""Traces as programs that run on their own (``Trace.python(standalone=True)``).

A printed trace calls names its context binds when thunder compiles it (``torch_ops.linear``,
``torchcompile.fusion0``): an executor's symbol is bound to its implementation, which the text
alone does not name. A standalone program adds what binds them: imports, and each namespace
(``torch_ops = types.SimpleNamespace(linear=torch._C._nn.linear, ...)``) built from importable
paths of the implementations, found and checked here. A fusion region is re-created from its
source: an implementation with ``__thunder_standalone__()`` returns the plain function it runs
(a compiled trace) and how to wrap it (``torch.compile({fn}, dynamic=False)``). Nothing here is
on the path that runs traces: it reads the context that path built.
"""

from __future__ import annotations

import collections
import functools
import importlib
import importlib.util
import re
import sys
import types
from typing import TYPE_CHECKING, Any

import torch

from thunder_ir.codegen import SymbolNamespace, global_names
from thunder_ir.symbol import Symbol

if TYPE_CHECKING:
    from thunder_ir.trace import Trace

__all__ = ["StandaloneError", "importable_expression", "standalone_python"]


# Tensors up to this many elements are printed as their values.
_TENSOR_LITERAL_MAX = 256


class StandaloneError(ValueError):
    """A trace uses a value that has no importable path (a lambda, a closure, an object built
    while compiling), so no program can bind it without the process that compiled it."""


def standalone_python(trace: Trace, *, compile_regions: bool = True) -> str:
    """``trace`` as a Python module that runs on its own: the imports and bindings of every name
    the printed trace uses, region functions re-created from their source, then the trace's
    ``def``. ``compile_regions=False`` runs fusion regions as their plain torch calls (no
    ``torch.compile``). Raises ``StandaloneError`` naming what cannot be bound."""
    source, ctx = trace._source(subsymbol_depth=0)
    program = _Program(compile_regions, reserved={trace.fn_name})
    program.bind_context(ctx, rename=None)
    if program.errors:
        raise StandaloneError(
            f"trace {trace.fn_name!r} cannot be printed as a standalone program: "
            + "; ".join(program.errors)
        )
    return program.render(source)


def importable_expression(obj: Any) -> tuple[str, frozenset[str]] | None:
    """A Python expression that evaluates to ``obj`` (checked: the same object), and the modules
    it needs imported; None when there is none."""
    program = _Program(True, reserved=set())
    expr = program.expression(obj)
    return None if expr is None else (expr, frozenset(program.imports))


class _Program:
    """What a standalone program binds before the trace's ``def``."""

    def __init__(self, compile_regions: bool, reserved: set[str]) -> None:
        self.compile_regions = compile_regions
        self.imports: set[str] = set()
        self.aliases: dict[str, str] = {}  # global name -> module it imports as that name
        self.namespaces: dict[str, dict[str, str]] = {}  # name -> attribute -> expression
        self.assignments: dict[str, str] = {}
        self.functions: list[str] = []
        self.errors: list[str] = []
        self.used = set(reserved)
        self._inlined: dict[int, str] = {}  # id of a compiled function -> its name here

    # -- the context of printed code --------------------------------------------------------

    def bind_context(self, ctx: dict[str, Any], rename: dict[str, str] | None) -> None:
        for name, value in ctx.items():
            if name == "__builtins__":
                continue
            target = rename.get(name, name) if rename is not None else name
            if isinstance(value, SymbolNamespace):
                self._bind_namespace(name, value)
            elif isinstance(value, types.ModuleType):
                self._bind_module(target, value)
            else:
                expr = self.expression(value)
                if expr is None:
                    self.errors.append(f"{name} ({_describe(value)}) has no importable path")
                elif self.assignments.get(target, expr) != expr:
                    self.errors.append(f"{target} is bound to two different values")
                else:
                    self.assignments[target] = expr
                    self.used.add(target)

    def _bind_module(self, name: str, module: types.ModuleType) -> None:
        if module.__name__ == name:
            self.imports.add(name)
        elif self.aliases.get(name, module.__name__) != module.__name__:
            self.errors.append(f"{name} names two different modules")
        else:
            self.aliases[name] = module.__name__
        self.used.add(name)

    def _bind_namespace(self, dotted: str, ns: SymbolNamespace) -> None:
        """``dotted`` (``torch_ops``, ``torch.Tensor``): the real module where every symbol the
        trace calls under it is that module's own attribute (``torch.add``), else a namespace
        of its own (an executor named like an installed package stands for itself)."""
        symbols = {k: v for k, v in vars(ns).items() if k != "_module"}
        top = dotted.partition(".")[0]
        real = _real_module(top)
        if real is not None and all(_attribute(real, dotted, k) is v for k, v in symbols.items()):
            self.imports.add(top)
            self.used.add(top)
            return
        # (a dotted symbol, ``special.bessel_j0``, is no keyword of a namespace: live code finds
        # it through the real module, so a program has no other way to bind it)
        if "." in dotted or any("." in k for k in symbols):
            self.errors.append(f"symbols under {dotted!r} are not that module's attributes")
            return
        attrs = self.namespaces.setdefault(dotted, {})
        self.used.add(dotted)
        for attr, impl in symbols.items():
            expr = self.expression(impl, name_hint=f"{dotted}_{attr}")
            if expr is None:
                self.errors.append(f"{dotted}.{attr} ({_describe(impl)}) has no importable path")
            elif attrs.get(attr, expr) != expr:
                self.errors.append(f"{dotted}.{attr} is bound to two different implementations")
            else:
                attrs[attr] = expr

    # -- values as expressions ---------------------------------------------------------------

    def expression(self, obj: Any, name_hint: str = "fn") -> str | None:
        """Python text that evaluates to ``obj``, recording the imports it needs."""
        literal = self._literal(obj)
        if literal is not None:
            return literal
        if isinstance(obj, types.ModuleType):
            self.imports.add(obj.__name__)
            return obj.__name__
        standalone = getattr(obj, "__thunder_standalone__", None)
        if standalone is not None and not isinstance(obj, type):
            fn, template = standalone()
            name = self._inline(fn, name_hint)
            if name is None:
                return None
            return template.format(fn=name) if template and self.compile_regions else name
        if isinstance(obj, Symbol):
            return self._symbol(obj)
        if isinstance(obj, functools.partial):
            return self._partial(obj)
        if isinstance(obj, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
            return self._op_overload(obj)
        if isinstance(obj, types.FunctionType) and hasattr(obj, "__thunder_source__"):
            return self._inline(obj, name_hint)
        return self._by_path(obj)

    def _literal(self, x: Any) -> str | None:
        if x is None or x is Ellipsis or type(x) in (bool, int, float, str, complex):
            text = repr(x)
            return (
                f"float({text!r})" if type(x) is float and text in ("nan", "inf", "-inf") else text
            )
        if isinstance(x, torch.dtype):
            self.imports.add("torch")
            return str(x)
        if isinstance(x, torch.device):
            self.imports.add("torch")
            return f"torch.device({str(x)!r})"
        if type(x) is torch.Tensor and x.numel() <= _TENSOR_LITERAL_MAX and not x.requires_grad:
            # A constant made once (a CPU scalar of the result dtype): its values, printed.
            values = self._literal(x.tolist())
            if values is None or x.layout != torch.strided:
                return None
            self.imports.add("torch")
            return f"torch.tensor({values}, dtype={x.dtype}, device={str(x.device)!r})"
        if type(x) is slice:
            parts = [self._literal(v) for v in (x.start, x.stop, x.step)]
            return None if None in parts else f"slice({', '.join(parts)})"  # type: ignore[arg-type]
        if type(x) in (tuple, list):
            items = [self.expression(v) for v in x]
            if None in items:
                return None
            inner = ", ".join(items)  # type: ignore[arg-type]
            if type(x) is list:
                return f"[{inner}]"
            return f"({inner},)" if len(items) == 1 else f"({inner})"
        if type(x) in (dict, collections.OrderedDict):
            pairs = [(self.expression(k), self.expression(v)) for k, v in x.items()]
            if any(k is None or v is None for k, v in pairs):
                return None
            inner = ", ".join(f"{k}: {v}" for k, v in pairs)
            if type(x) is dict:
                return "{" + inner + "}"
            self.imports.add("collections")
            return f"collections.OrderedDict({{{inner}}})"
        return None

    def _symbol(self, sym: Symbol) -> str | None:
        try:
            _, path = sym.__reduce__()
        except TypeError:
            return None
        module, *rest = path
        self.imports.add(module)
        if len(rest) == 1:
            return f"{module}.{rest[0]}"
        return f"{module}.{rest[0]}[{rest[1]!r}]"

    def _partial(self, p: functools.partial[Any]) -> str | None:
        parts = [self.expression(p.func)]
        parts += [self.expression(a) for a in p.args]
        keywords = {k: self.expression(v) for k, v in p.keywords.items()}
        if None in parts or None in keywords.values():
            return None
        self.imports.add("functools")
        args = [*parts, *(f"{k}={v}" for k, v in keywords.items())]
        return f"functools.partial({', '.join(args)})"  # type: ignore[arg-type]

    def _op_overload(self, op: Any) -> str | None:
        if isinstance(op, torch._ops.OpOverloadPacket):
            expr = "torch.ops." + op._qualified_op_name.replace("::", ".")
        else:
            expr = "torch.ops." + op._schema.name.replace("::", ".") + "." + op._overloadname
        try:
            found = functools.reduce(getattr, expr.split(".")[1:], torch)
        except AttributeError:
            return None
        if found is not op:
            return None
        self.imports.add("torch")
        return expr

    def _by_path(self, obj: Any) -> str | None:
        """``module.attr.path`` that gives ``obj`` back: its ``__module__`` and ``__qualname__``
        (or its class's, for a descriptor), or a module-level name or dict entry holding it."""
        candidates: list[tuple[str, str]] = []
        owner = getattr(obj, "__objclass__", None)
        name = getattr(obj, "__name__", None)
        if isinstance(owner, type) and isinstance(name, str):
            candidates.append((owner.__module__, f"{owner.__qualname__}.{name}"))
        module = getattr(obj, "__module__", None)
        if isinstance(module, str):
            for attr in (getattr(obj, "__qualname__", None), name):
                if isinstance(attr, str) and "<" not in attr:
                    candidates.append((module, attr))
        if module == "torch" and isinstance(name, str):  # torch's C functions: torch.add
            candidates.append(("torch", name))
        for mod, attr in candidates:
            found = _walk(mod, attr)
            if found is not None and found[1] is obj:
                self.imports.add(found[0])
                return f"{found[0]}.{found[2]}"
        return self._held_by_module(obj, module)

    def _held_by_module(self, obj: Any, module_name: Any) -> str | None:
        module = sys.modules.get(module_name) if isinstance(module_name, str) else None
        if module is None:
            return None
        for attr, value in vars(module).items():
            if value is obj:
                self.imports.add(module.__name__)
                return f"{module.__name__}.{attr}"
        for attr, value in vars(module).items():
            if type(value) is dict:
                for key, item in value.items():
                    if item is obj:
                        key_text = self.expression(key)
                        if key_text is not None:
                            self.imports.add(module.__name__)
                            return f"{module.__name__}.{attr}[{key_text}]"
        return None

    def _inline(self, fn: Any, name_hint: str) -> str | None:
        """A compiled trace's function (``__thunder_source__``), defined in the program under
        a fresh name, its own context bound beside the trace's."""
        known = self._inlined.get(id(fn))
        if known is not None:
            return known
        source = getattr(fn, "__thunder_source__", None)
        globs = getattr(fn, "__globals__", None)
        if not isinstance(source, str) or not isinstance(globs, dict):
            return None
        name = self._fresh(re.sub(r"\W", "_", name_hint))
        self._inlined[id(fn)] = name
        source = re.sub(
            rf"^def {re.escape(fn.__name__)}\(", f"def {name}(", source, count=1, flags=re.M
        )
        # Its opaque constants are numbered from 0 like the trace's: renamed apart.
        rename = {}
        for k in globs:
            if re.fullmatch(r"_obj\d+", k):
                rename[k] = self._fresh(f"{name}{k}")
        if rename:
            source = re.sub(r"\b_obj\d+\b", lambda m: rename.get(m[0], m[0]), source)
        # Only what its code reads: torch.compile adds its own entries to a function's globals.
        used = global_names(fn.__code__)
        ctx = {k: v for k, v in globs.items() if k in used and k != fn.__name__}
        self.bind_context(ctx, rename)
        self.functions.append(source)
        return name

    def _fresh(self, base: str) -> str:
        name, n = base, 1
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name

    # -- the program -------------------------------------------------------------------------

    def render(self, trace_source: str) -> str:
        imports = self.imports | ({"types"} if self.namespaces else set())
        blocks = [
            "\n".join(
                [f"import {m}" for m in sorted(imports)]
                + [f"import {m} as {a}" for a, m in sorted(self.aliases.items())]
            ),
            "\n".join(f"{k} = {v}" for k, v in self.assignments.items()),
            *(source.rstrip("\n") for source in self.functions),
            "\n".join(
                f"{ns} = types.SimpleNamespace(\n"
                + "".join(f"    {k}={v},\n" for k, v in attrs.items())
                + ")"
                for ns, attrs in sorted(self.namespaces.items())
            ),
            trace_source.rstrip("\n"),
        ]
        return "\n\n\n".join(b for b in blocks if b) + "\n"


def _describe(value: Any) -> str:
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    module = getattr(value, "__module__", None) or type(value).__module__
    return f"{module}.{name}"


def _real_module(name: str) -> types.ModuleType | None:
    """The importable module ``name`` (only a top-level package or module)."""
    module = sys.modules.get(name)
    if isinstance(module, types.ModuleType):
        return module
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return importlib.import_module(name) if spec is not None else None


def _attribute(module: types.ModuleType, dotted: str, attr: str) -> Any:
    try:
        return functools.reduce(getattr, [*dotted.split(".")[1:], *attr.split(".")], module)
    except AttributeError:
        return None


def _walk(module_name: str, path: str) -> tuple[str, Any, str] | None:
    """(the module to import, what ``module.path`` gives, the path from that module): the module
    itself where it imports by its name (``thunder_executors.torch_ops_executor``), else the
    attributes from its top-level package (``torch`` then ``_C._nn.linear``)."""
    parts = module_name.split(".")
    for i in range(len(parts), 0, -1):
        base = ".".join(parts[:i])
        try:
            module = importlib.import_module(base)
        except Exception:  # not importable by this name (a C extension's submodule)
            continue
        rest = [*parts[i:], *path.split(".")]
        try:
            return base, functools.reduce(getattr, rest, module), ".".join(rest)
        except AttributeError:
            return None
    return None
