"""The lookasides of the jit: torch callables to IR symbols, and IR internals run natively.

``jit_lookasides()`` is static data built once per process: every torch function, Tensor method
and ``torch.nn.functional`` function that an IR op mirrors maps to that op's symbol; every Python
function of ``thunder_ir`` (proxy methods, ``Symbol.__call__``) maps to itself so the interpreter
calls it natively instead of interpreting the IR's own code; ``isinstance`` answers for proxies
as it would for the tensors and numbers they stand for.
"""

from __future__ import annotations

import collections.abc
import contextlib
import functools
import os
import re
import sys
import sysconfig
import types
from typing import Any, NoReturn

import torch
import torch.utils._config_module

import thunder_interp
import thunder_ir
from thunder import tensor_patches
from thunder.errors import RunsEagerly, RunsNatively, RunsSplit
from thunder_ir import NumberProxy, Proxy, TensorProxy, dtypes, prims
from thunder_ir.ops import ALL_OPS, data_shapes, data_values, torch_symbol_map
from thunder_ir.prims import ALL_PRIMS

__all__ = [
    "AUTOGRAD_HOOKS",
    "LIBRARY_DIRS",
    "Lookaside",
    "SymbolicSize",
    "check_native_text",
    "check_no_proxy_text",
    "is_torch_callable",
    "jit_lookasides",
    "native_special",
    "query_is_allowed",
    "register_lookaside",
]


class Lookaside:
    """``thunder.jit(..., lookasides=[Lookaside(fn, replace_with)])``: while this jitted program
    is traced, calls of ``fn`` call ``replace_with`` instead.

    ``replace_with`` is interpreted like the program (its torch calls are traced, its reads of
    outside state guarded); an IR symbol (``thunder_ir.Symbol``) is recorded as that op. A
    lookaside belongs to the jitted program it is passed to: nothing is registered globally, so
    two programs in one process with different lookasides never see each other's.
    """

    __slots__ = ("fn", "replace_with")

    def __init__(self, fn: Any, replace_with: Any) -> None:
        if not callable(fn):
            raise TypeError(f"Lookaside: fn must be callable, got {fn!r}")
        if not callable(replace_with):
            raise TypeError(f"Lookaside: replace_with must be callable, got {replace_with!r}")
        self.fn = fn
        self.replace_with = replace_with

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Lookaside)
            and other.fn is self.fn
            and other.replace_with is self.replace_with
        )

    def __hash__(self) -> int:
        return hash((id(self.fn), id(self.replace_with)))

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", None) or repr(self.fn)
        return f"Lookaside({name} -> {getattr(self.replace_with, '__qualname__', self.replace_with)!r})"


@thunder_interp.opaque  # run natively: its sizes record their own constraints
class SymbolicSize(tuple):  # type: ignore[type-arg]
    """A tensor's shape with symbolic sizes (``cache="symbolic values"``): what user code sees
    as ``x.shape``. It behaves as a ``torch.Size`` in traced code (``isinstance``, ``type``,
    slices, ``+``, ``*``, text, ``numel``), and a returned or stored one is a ``torch.Size``
    again (``torch.Size`` itself holds only ints)."""

    __slots__ = ()

    def __getitem__(self, key: Any) -> Any:
        item = tuple.__getitem__(self, key)
        return SymbolicSize(item) if isinstance(key, slice) else item

    def __add__(self, other: Any) -> SymbolicSize:
        if not isinstance(other, tuple):
            raise TypeError(
                f"can only concatenate tuple (not {type(other).__name__}) to torch.Size"
            )
        return SymbolicSize(tuple.__add__(self, other))

    def __radd__(self, other: Any) -> Any:
        if not isinstance(other, tuple):
            return NotImplemented
        return SymbolicSize(tuple.__add__(other, self))

    def __mul__(self, n: Any) -> SymbolicSize:
        return SymbolicSize(tuple.__mul__(self, n))

    def __rmul__(self, n: Any) -> SymbolicSize:
        return SymbolicSize(tuple.__mul__(self, n))

    def numel(self) -> Any:
        out: Any = 1
        for d in self:
            out = out * d
        return out

    # The text holds each size's value (each guarded, as ``str`` of a size is).
    def __repr__(self) -> str:
        return f"torch.Size([{', '.join(repr(d) for d in self)}])"

    def __format__(self, spec: str) -> str:
        if spec:
            raise TypeError("unsupported format string passed to torch.Size.__format__")
        return repr(self)

    def __reduce__(self) -> Any:
        return (torch.Size, (tuple(self),))


def _isinstance(obj: Any, classinfo: Any) -> bool:
    if isinstance(obj, SymbolicSize):
        return _any_class(classinfo, lambda c: c is torch.Size or isinstance(obj, c),
                          lambda c: isinstance(torch.Size(), c))  # fmt: skip
    if isinstance(obj, TensorProxy):
        return _isinstance_as(obj, classinfo, torch.Tensor)
    if isinstance(obj, NumberProxy):
        return isinstance(obj, classinfo) or isinstance(obj.value, classinfo)
    return isinstance(obj, classinfo)


def _isinstance_as(t: TensorProxy, classinfo: Any, tensor_type: type) -> bool:
    """``isinstance(t, classinfo)`` as eager answers it for the tensor ``t`` stands for, whose
    Python type is ``tensor_type`` (``torch.Tensor``, or an input's own: a Parameter)."""
    return _any_class(
        classinfo,
        lambda c: isinstance(t, c) or issubclass(tensor_type, c),
        lambda c: isinstance(_stand_in(t, tensor_type), c),
    )


def _any_class(classinfo: Any, of_class: Any, of_other: Any) -> bool:
    """Python's walk over ``classinfo``: tuples (nested) and ``X | Y`` unions are their members,
    in order, the first match winning. A class is asked ``of_class``; anything else Python
    accepts (``typing.Optional[...]``, ``typing.Iterable``, an object with ``__instancecheck__``)
    is asked ``of_other``, which also raises Python's own TypeError for what it refuses."""
    if type(classinfo) is types.UnionType:
        classinfo = classinfo.__args__
    if isinstance(classinfo, tuple):
        return any(_any_class(c, of_class, of_other) for c in classinfo)
    if isinstance(classinfo, type):
        return bool(of_class(classinfo))
    return bool(of_other(classinfo))


def _stand_in(t: TensorProxy, tensor_type: type) -> torch.Tensor:
    """A real tensor (on the meta device: nothing allocated) of ``tensor_type`` with ``t``'s
    dtype, shape and requires_grad, for checks that only a real one can answer (they call
    Python code that may read its metadata)."""
    shape = [d if isinstance(d, int) else int(d.value) for d in t.shape]
    dtype = dtypes.to_torch_dtype(t.dtype)
    real = torch.empty(shape, dtype=dtype, device="meta")
    if t.requires_grad and (real.dtype.is_floating_point or real.dtype.is_complex):
        real.requires_grad_(True)
    if tensor_type is torch.Tensor:
        return real
    return torch.Tensor._make_subclass(tensor_type, real, real.requires_grad)


def _group_tensors_by_device_and_dtype(
    tensorlistlist: Any, with_indices: bool = False
) -> dict[Any, Any]:
    """``torch._C._group_tensors_by_device_and_dtype`` (torch's foreach paths: ``clip_grad_norm_``,
    ``get_total_norm``, the optimizers) on proxies: it reads only devices and dtypes, which the
    program is specialized to. torch groups empty stand-ins of them (its checks and its order of
    groups), and each group holds the proxies they stand in for."""
    of_stand_in: dict[int, Any] = {}

    def stand_in(t: Any) -> Any:
        if not isinstance(t, TensorProxy):
            return t
        real = torch.empty(
            0,
            dtype=dtypes.to_torch_dtype(t.dtype),
            device=thunder_ir.devices.to_torch_device(t.device),
        )
        of_stand_in[id(real)] = t
        return real

    lists = [[stand_in(t) for t in tensors] for tensors in tensorlistlist]
    grouped = torch._C._group_tensors_by_device_and_dtype(lists, with_indices)  # type: ignore[attr-defined]
    return {
        key: ([[of_stand_in.get(id(t), t) for t in group] for group in groups], indices)
        for key, (groups, indices) in grouped.items()
    }


def _is_tensor(obj: Any) -> bool:
    return isinstance(obj, (torch.Tensor, TensorProxy))


def _is_tensor_like(obj: Any) -> bool:
    """``torch.overrides.is_tensor_like``: a proxy is a tensor (torch.distributions checks it)."""
    return isinstance(obj, TensorProxy) or bool(torch.overrides.is_tensor_like(obj))  # type: ignore[no-untyped-call]


def _ir_functions() -> dict[Any, Any]:
    """Every Python function defined by thunder_ir modules and classes, mapped to itself."""
    out: dict[Any, Any] = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("thunder_ir") or module is None:
            continue
        for value in vars(module).values():
            if getattr(value, "__module__", None) != name:
                continue
            if isinstance(value, types.FunctionType):
                out[value] = value
            elif isinstance(value, type):
                for attr in vars(value).values():
                    func = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
                    # Only thunder_ir's own: a class also holds functions it inherits or is given
                    # (every 3.13 dataclass has __replace__ = dataclasses._replace), and those
                    # must stay interpreted for user objects, their reads guarded.
                    if isinstance(func, types.FunctionType) and _is_ir_module(func.__module__):
                        out[func] = func
    return out


def _is_ir_module(name: str | None) -> bool:
    return name is not None and (name == "thunder_ir" or name.startswith("thunder_ir."))


# Classes whose special methods keep running natively when the interpreter would otherwise
# interpret them: the binding reads modules and tensors through its own hooks on the values these
# methods return (a submodule, a parameter), not through their internals.
_NATIVE_DUNDER_CLASSES = (
    torch.Tensor,
    torch.nn.Module,
    torch.nn.ModuleList,
    torch.nn.ModuleDict,
    torch.nn.Sequential,
    torch.utils._config_module.ConfigModule,  # torch's config modules (torch._dynamo.config)
)
# Attribute machinery of nn.Module that must stay native for the same reason.
_NATIVE_MODULE_DUNDERS = frozenset(
    {"__getattr__", "__setattr__", "__delattr__", "__getitem__", "__setitem__", "__delitem__",
     "__iter__", "__len__", "__contains__", "__bool__", "__dir__", "__repr__", "__hash__",
     "__eq__", "__format__", "__reversed__", "__iadd__", "__add__", "__mul__", "__rmul__",
     "__imul__", "__rsub__", "__rdiv__", "__rtruediv__", "__rpow__", "__floordiv__",
     "__rfloordiv__", "__rlshift__", "__rrshift__", "__rmatmul__", "__pos__", "__neg__",
     "__abs__", "__index__", "__array__", "__deepcopy__", "__reduce_ex__", "__setstate__"}
)  # fmt: skip


def _mark_native_internals() -> None:
    """IR code and the special methods of torch's module and tensor classes run natively."""
    thunder_interp.opaque_package(thunder_ir)
    for cls in _NATIVE_DUNDER_CLASSES:
        for name, value in vars(cls).items():
            # Only undecorated ones: a decorator's wrapper shares its code with other functions.
            if (
                name in _NATIVE_MODULE_DUNDERS
                and isinstance(value, types.FunctionType)
                and value.__code__.co_name == name
            ):
                thunder_interp.opaque(value)
    # torch.backends flags (``torch.backends.cuda.matmul.allow_tf32``, ``mkldnn.enabled``) are
    # read natively and guarded by value (see binding.reads).
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith("torch.backends"):
            continue
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == name:
                for attr, member in vars(value).items():
                    if attr.startswith("__") and isinstance(member, types.FunctionType):
                        thunder_interp.opaque(member)


# Installed libraries and the standard library: where the attribute and mapping special methods
# below run natively (``os.environ[k]``, a library config's ``__getattribute__``, a registry's
# ``__getitem__``). The binder guards what they return as an attribute or item read; interpreting
# them would guard their internals instead (whole registries, every call), which costs more on
# every call and tells nothing more. ``__len__`` and ``__iter__`` are interpreted: what they
# return reaches no read hook (``k in config`` iterates it), so their internals are guarded.
# User code's special methods, and properties everywhere, are interpreted.
LIBRARY_DIRS = tuple(
    sorted(
        {
            os.path.join(os.path.abspath(path), "")
            for key in ("stdlib", "platstdlib", "purelib", "platlib")
            if (path := sysconfig.get_paths().get(key))
        }
    )
)
_NATIVE_LIBRARY_SPECIALS = frozenset(
    {"__getattr__", "__setattr__", "__delattr__", "__getitem__", "__setitem__", "__delitem__"}
)  # fmt: skip


def is_library_code(code: types.CodeType) -> bool:
    """Whether ``code`` belongs to an installed library or the standard library (not to the
    user's own modules, which tools such as IPython's autoreload patch in place)."""
    filename = code.co_filename
    return filename.startswith(LIBRARY_DIRS) or filename.startswith("<frozen ")


def native_special(fn: types.FunctionType) -> bool:
    """The jit's ``native_special`` predicate (see ``thunder_interp.interpret``): the attribute
    special methods of library classes run natively, and the item ones of library mappings (an
    item read is guarded by its path; a sequence's or a view's ``__getitem__`` is interpreted,
    which costs less on every call than running it again)."""
    if fn.__name__ not in _NATIVE_LIBRARY_SPECIALS or not is_library_code(fn.__code__):
        return False
    return fn.__name__ not in _ITEM_SPECIALS or _defined_on_a_mapping(fn)


_ITEM_SPECIALS = frozenset({"__getitem__", "__setitem__", "__delitem__"})


def _defined_on_a_mapping(fn: types.FunctionType) -> bool:
    """Whether ``fn`` is a method of a (module-level) Mapping class; unknown counts as one."""
    owner: Any = sys.modules.get(fn.__module__)
    for part in fn.__qualname__.split(".")[:-1]:
        owner = getattr(owner, part, None)
    return not isinstance(owner, type) or issubclass(owner, collections.abc.Mapping)


@functools.cache
def _static_lookasides() -> dict[Any, Any]:
    _mark_native_internals()
    table: dict[Any, Any] = _ir_functions()
    for sym in (*ALL_OPS.values(), *ALL_PRIMS.values()):
        table[sym] = sym
    table.update(torch_symbol_map())
    table[isinstance] = _isinstance
    table[torch.is_tensor] = _is_tensor
    table[torch.overrides.is_tensor_like] = _is_tensor_like
    for fn, name in ((torch.autograd.backward, "backward"), (torch.autograd.grad, "grad")):
        table[fn] = functools.partial(_differentiates_inside, name)
    table[torch._check_with] = _check_with
    table[torch._C._group_tensors_by_device_and_dtype] = _group_tensors_by_device_and_dtype  # type: ignore[attr-defined]
    # Metadata queries (and the view bits, answered or run by torch by the proxy): a torch
    # fallback would make each symbolic size of the tensor a constant (``F._canonical_mask`` asks
    # ``torch.is_floating_point(mask)``).
    for name in _METADATA_QUERIES:
        for query in (getattr(torch, name, None), tensor_patches.original(name)):
            if query is not None:
                table[query] = functools.partial(_metadata_query, name, query)
    table[torch.result_type] = _result_type
    table[print] = _prints
    table[Proxy.__repr__] = _proxy_text
    # A Python __str__/__repr__ is interpreted (its reads guarded, a tensor's text refused)
    table[str] = thunder_interp.text_lookaside(str, _no_tensor_text, check_no_proxy_text)
    table[repr] = thunder_interp.text_lookaside(repr, _no_tensor_text, check_no_proxy_text)
    table[TensorProxy.__format__] = _tensor_format
    # (a Python ``__int__``/``__float__``/``__index__`` interpreted, its reads guarded)
    table[int] = thunder_interp.number_lookaside(int, _int)
    table[float] = thunder_interp.number_lookaside(float, _float)
    table[torch.Size] = _size
    table[torch._C._dynamo.eval_frame.set_eval_frame] = _compiler_disabled
    table[torch.compile] = _compiles_inside
    table[torch.autograd.profiler.record_function] = _ProfilerLabel
    for name in AUTOGRAD_HOOKS:
        table[tensor_patches.original(name)] = functools.partial(_registers_hook, name)
    table.update(data_shaped_functions())
    table.update(_distributed_queries())
    return table


def _distributed_queries() -> dict[Any, Any]:
    """torch.distributed's rank and world size, answered natively: constants of the process
    (each process compiles its own program; its process group lives as long), so a forward that
    scales or branches by them compiles, where a distributed-prepared module cannot run
    eagerly. Reads no proxy: a group passed is a plain object."""
    import torch.distributed as dist

    if not dist.is_available():
        return {}
    return {
        fn: functools.partial(_native_query, fn)
        for fn in (dist.get_rank, dist.get_world_size, dist.is_initialized)
    }


def _native_query(fn: Any, *args: Any, **kwargs: Any) -> Any:
    if any(isinstance(a, Proxy) for a in (*args, *kwargs.values())):
        raise RunsEagerly(f"calls {fn.__module__}.{fn.__name__} with a traced value")
    return fn(*args, **kwargs)


_METADATA_QUERIES = (
    "is_conj", "is_neg", "is_floating_point", "is_complex", "is_signed", "numel", "nelement",
    "is_same_size", "get_device",
)  # fmt: skip


def _result_type(*args: Any, **kwargs: Any) -> Any:
    """``torch.result_type``: it reads a tensor's dtype and whether it is 0-d and a number's
    kind, never sizes or values, so it runs on a meta tensor of each proxy's dtype and rank
    rather than as a fallback that would make the sizes constants."""

    def stand_in(x: Any) -> Any:
        if isinstance(x, TensorProxy):
            dtype = dtypes.to_torch_dtype(x.dtype)
            return torch.empty((1,) * x.ndim, dtype=dtype, device="meta")
        if isinstance(x, NumberProxy):  # a number's kind decides, not its value
            return x.python_type()
        return x

    return torch.result_type(*map(stand_in, args), **{k: stand_in(v) for k, v in kwargs.items()})


def _metadata_query(name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``torch.is_conj(t)``, ``torch.Tensor.is_neg(t)``, ``torch.numel(t)``: as ``t.numel()``
    asks the proxy."""
    others_given = all(isinstance(a, TensorProxy) for a in args[1:])
    if args and not kwargs and isinstance(args[0], TensorProxy) and others_given:
        return getattr(args[0], name)(*args[1:])
    return fn(*args, **kwargs)


def _prints(*args: Any, **kwargs: Any) -> Any:
    """``print`` writes to the console on every call, eager's values: torch runs it between the
    compiled parts (recorded once while tracing, it printed proxies, and only then)."""
    raise RunsSplit("calls print, which writes on every call; torch runs it", torch_op="print")


def _tensor_text() -> NoReturn:
    """Text of a tensor shows its values: torch makes it on every call (else it is the proxy's
    name, fixed in the program)."""
    raise RunsSplit(
        "makes text of a tensor's values (str, repr, an f-string); torch runs it",
        torch_op="torch.Tensor.__repr__",
    )


def _proxy_text(p: Proxy) -> str:
    if isinstance(p, TensorProxy):
        _tensor_text()
    return Proxy.__repr__(p)


def _tensor_format(t: TensorProxy, spec: str) -> str:
    _tensor_text()


def _holds_tensor(x: Any, depth: int = 0) -> bool:
    if isinstance(x, TensorProxy):
        return True
    if depth < 4 and type(x) in (list, tuple):
        return any(_holds_tensor(v, depth + 1) for v in x)
    if depth < 4 and type(x) is dict:
        return any(_holds_tensor(v, depth + 1) for v in x.values())
    return False


def _no_tensor_text(x: Any) -> None:
    if _holds_tensor(x):
        _tensor_text()


def check_str_formatting(method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """``"%s" % t``, ``"{}".format(t)``, ``"{a}".format_map(...)``: text of a tensor's values,
    which torch makes (as ``str(t)``); C code calls the proxy's own text otherwise."""
    if method in ("__mod__", "format", "format_map") and (
        _holds_tensor(args) or _holds_tensor(kwargs)
    ):
        _tensor_text()


# The text a tensor proxy shows of itself (``Proxy.__repr__``): in a value the program made, C
# code made text of a proxy (a ``re.sub`` callback, ``string.Template``, ``t.__str__()``).
_PROXY_TEXT = re.compile(r"<\w*TensorProxy ")
_PROXY_BYTES = re.compile(rb"<\w*TensorProxy ")
_SCANNED_ITEMS = 256  # a longer list or tuple of text is not looked into


def check_native_text(fn: Any, args: tuple[Any, ...]) -> None:
    """Before an opaque call: ``format(t, spec)``, ``ascii(t)`` of a tensor make text of its
    values, which torch makes (as ``str(t)``)."""
    if (fn is format or fn is ascii) and args and _holds_tensor(args[0]):
        _tensor_text()


def check_no_proxy_text(result: Any) -> None:
    """After an opaque call: text holding a tensor proxy's own text was made natively from a
    proxy, where eager shows the tensor's values. Never returned silently: torch runs it."""
    if _shows_proxy_text(result):
        _tensor_text()


def _shows_proxy_text(value: Any, depth: int = 0) -> bool:
    t = type(value)
    if t is str:
        return "TensorProxy" in value and _PROXY_TEXT.search(value) is not None
    if t is bytes or t is bytearray:
        return b"TensorProxy" in value and _PROXY_BYTES.search(value) is not None
    if depth < 2 and (t is list or t is tuple) and len(value) <= _SCANNED_ITEMS:
        return any(_shows_proxy_text(v, depth + 1) for v in value)
    return False


def _number_of(x: Any, python_type: type) -> Any:
    """``int(x)`` / ``float(x)`` of a tensor or of a number read from data (``t.item()``, a
    symbolic size): the result stays a symbol of the trace, as ``t.item()`` does, instead of
    this call's value fixed by a check (one program per value read). None where Python's own
    conversion applies."""
    if isinstance(x, TensorProxy) and not x.dtype.is_complex:
        x = x.item()
    if not isinstance(x, NumberProxy) or x.python_type is complex:
        return None
    if x.python_type is python_type:
        return x
    return prims.convert_element_type(x, dtypes.int64 if python_type is int else dtypes.float64)


def _int(*args: Any, **kwargs: Any) -> Any:
    if len(args) == 1 and not kwargs and (n := _number_of(args[0], int)) is not None:
        return n
    return NotImplemented


def _size(*args: Any, **kwargs: Any) -> Any:
    """``torch.Size(sizes)`` of symbolic sizes: a ``SymbolicSize`` (``torch.Size`` would make
    each one concrete)."""
    if len(args) == 1 and not kwargs and type(args[0]) in (tuple, list, SymbolicSize):
        items = tuple(args[0])
        if any(isinstance(d, NumberProxy) for d in items):
            for i, d in enumerate(items):
                if isinstance(d, NumberProxy) and d.python_type is not int:
                    raise TypeError(
                        f"torch.Size() takes an iterable of 'int' (item {i} is "
                        f"'{d.python_type.__name__}')"
                    )
            return SymbolicSize(items)
    return torch.Size(*args, **kwargs)


def _float(*args: Any, **kwargs: Any) -> Any:
    if len(args) == 1 and not kwargs and (n := _number_of(args[0], float)) is not None:
        return n
    return NotImplemented


def _check_with(error_type: Any, cond: Any, message: Any = None) -> None:
    """``torch._check_with`` (``torch._check``, ``_check_index``...), which torch's modules call on
    sizes (``nn.MultiheadAttention`` on its masks'): a symbolic condition (``cache="symbolic
    values"``) is decided as Python decides it, recording a constraint of the trace, where torch
    would ask its own symbolic shapes."""
    if isinstance(cond, NumberProxy):
        cond = bool(cond)
    torch._check_with(error_type, cond, message)


def data_shaped_functions() -> dict[Any, Any]:
    """Torch callables whose result's shape or Python value depends on data, mapped to the IR
    functions that record them at the top level of the trace (``thunder_ir/ops/data_shapes.py``,
    ``data_values.py``)."""
    return {
        torch.nonzero: data_shapes.nonzero,
        tensor_patches.original("nonzero"): data_shapes.nonzero,
        torch.argwhere: data_shapes.argwhere,
        tensor_patches.original("argwhere"): data_shapes.argwhere,
        torch.masked_select: data_shapes.masked_select,
        tensor_patches.original("masked_select"): data_shapes.masked_select,
        torch.equal: data_values.equal,
        tensor_patches.original("equal"): data_values.equal,
        torch.allclose: data_values.allclose,
        tensor_patches.original("allclose"): data_values.allclose,
        tensor_patches.original("tolist"): data_values.tolist,
    }


def _compiler_disabled(*args: Any, **kwargs: Any) -> Any:
    """``torch.compiler.disable`` / ``torch._dynamo.disable`` wrappers switch the frame evaluator
    off before calling the function they wrap: the function must run outside any compiler. (A
    function ``torch.compile`` made switches it too: torch.compile runs it, as in eager.)"""
    raise RunsNatively(
        "calls a function marked torch.compiler.disable (torch._dynamo.disable, "
        "thunder.run_natively) or made by torch.compile, which runs outside thunder's compiler"
    )


def _compiles_inside(*args: Any, **kwargs: Any) -> Any:
    """``torch.compile(fn)`` called in the program (``torch.compile(f)(x)``): what it makes runs
    under torch.compile, as in eager, where thunder's interpreter would run torch.compile's own
    machinery on proxies. The call runs split: torch.compile runs it, thunder compiles the
    graphs around it."""
    raise RunsSplit(
        "calls torch.compile inside the jitted function; torch.compile runs what it compiles"
    )


class _ProfilerLabel(contextlib.ContextDecorator):
    """``torch.profiler.record_function(name)`` (``Optimizer.step`` enters one) while tracing: a
    label for torch's profiler that the compiled program drops, as torch.compile does; entering
    it would record profiler calls and set torch's lazily imported globals."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> _ProfilerLabel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None


# Tensor methods that hand torch's autograd engine a function to run in the backward: the trace
# has no place for it, torch runs it (the call runs split there).
AUTOGRAD_HOOKS = ("register_hook", "retain_grad", "register_post_accumulate_grad_hook")


def _registers_hook(name: str, *args: Any, **kwargs: Any) -> Any:
    raise RunsSplit(
        f"calls torch.Tensor.{name}, which gives torch's backward a hook to run; torch runs it",
        torch_op=f"torch.Tensor.{name}",
    )


def _differentiates_inside(name: str, *args: Any, **kwargs: Any) -> Any:
    raise RunsEagerly(
        f"calls torch.autograd.{name} (loss.backward(), torch.autograd.grad) inside the jitted "
        "function, which thunder does not trace: it differentiates a program as a whole. Return "
        "the loss and differentiate the jitted function's result to compile the step"
    )


# Callables of thunder's own features mapped to the IR symbols that record them (the collectives
# of thunder.distributed.tensor_parallel): ``register_lookaside``.
_REGISTERED: dict[Any, Any] = {}


def register_lookaside(fn: Any, replacement: Any) -> None:
    """While any program is traced, calls of ``fn`` call ``replacement`` (an IR ``Symbol`` is
    recorded as that op). For a feature of thunder whose functions run eagerly outside the jit
    and are ops of the trace inside it."""
    global _registrations
    _REGISTERED[fn] = replacement
    _registrations += 1


_registrations = 0  # how many register_lookaside calls: what a table derived from this one is of


def jit_lookasides() -> dict[Any, Any]:
    """The lookaside table of a jit tracing run (a fresh copy the caller may extend)."""
    table = dict(_static_lookasides())
    table.update(_REGISTERED)
    return table


def jit_lookasides_version() -> int:
    """Changes whenever ``jit_lookasides`` would give another table."""
    return _registrations


def is_torch_callable(fn: Any) -> bool:
    """Whether ``fn`` is a torch operation (a function of a torch module or a Tensor method)."""
    if isinstance(fn, Proxy):
        return False
    owner = getattr(fn, "__objclass__", None)
    if owner is not None and isinstance(owner, type) and issubclass(owner, torch._C.TensorBase):
        return True
    if isinstance(getattr(fn, "__self__", None), torch.Tensor):
        return True
    module = getattr(fn, "__module__", None)
    return isinstance(module, str) and (module == "torch" or module.startswith("torch."))


# Torch queries that are safe to evaluate while tracing (they read no tensor data).
_ALLOWED_QUERIES = {
    "_get_tracing_state",
    "_has_torch_function",
    "_has_torch_function_unary",
    "_has_torch_function_variadic",
    "has_torch_function",
    "has_torch_function_unary",
    "has_torch_function_variadic",
    "is_scripting",
    "is_tracing",
    "_is_tracing",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "get_default_dtype",
    "is_autocast_enabled",
    "is_autocast_cpu_enabled",
    "_is_torch_function_mode_enabled",
    "is_compiling",
    "_is_any_autocast_enabled",
    "finfo",
    "iinfo",
    "device",
    "Size",
    "_get_cpp_backtrace",
    "_log_api_usage_once",
    "_get_privateuse1_backend_name",  # (torch's foreach paths ask which devices have kernels)
    "is_available",
    # Pure functions of dtypes.
    "promote_types",
    "can_cast",
}


def query_is_allowed(fn: Any) -> bool:
    """Whether a torch callable may run (opaquely, with no proxy arguments) while tracing."""
    # By name, types included: constructing a torch._C class can enter process state (an
    # _InferenceMode guard left inference mode on after tracing).
    return getattr(fn, "__name__", None) in _ALLOWED_QUERIES
