"""Proxies: the stand-ins for tensors, numbers, strings and collections while a trace is recorded.

Operators on a ``TensorProxy`` dispatch to the torch-language ops (registered by ``thunder_ir.ops``
through ``register_tensor_method``), so ``a + b`` inside traced code records ``ltorch.add``.
Operators on a ``NumberProxy`` record number prims and build the expression (``constraints.Expr``)
that produced the value; branching on one records a constraint in the trace.
"""

from __future__ import annotations

import functools
import operator
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from thunder_ir import constraints as C
from thunder_ir.devices import Device, to_device
from thunder_ir.dtypes import DType, to_dtype
from thunder_ir.errors import DataDependentError
from thunder_ir.sizes import note_constraint
from thunder_ir.tracectx import get_tracectx

if TYPE_CHECKING:
    from thunder_ir.trace import Trace

__all__ = [
    "CollectionProxy",
    "ComplexProxy",
    "FloatProxy",
    "FutureTensorProxy",
    "GeneratorProxy",
    "IntegerProxy",
    "NumberProxy",
    "Proxy",
    "StringProxy",
    "TensorProxy",
    "is_proxyable_number",
    "pyval",
    "register_tensor_method",
    "tensor_method",
]

# Torch-language functions for Tensor methods and operators, filled in when thunder_ir.ops is
# imported. Written once at import, read-only afterwards.
_TENSOR_METHODS: dict[str, Callable[..., Any]] = {}
# Number prims for NumberProxy operators, filled in by thunder_ir.prims.
_NUMBER_OPS: dict[str, Callable[..., Any]] = {}


# Tensor methods that return Python values computed from the data.
_DATA_METHODS = frozenset({"item", "numpy", "__array__", "__float__", "__int__"})


def _data_dependent(t: Any, what: str) -> DataDependentError:
    return DataDependentError(
        f"{what} of tensor {t.name} depends on its data, which is not known while tracing; "
        "compute it with tensor ops (torch.where) or pass it in as a Python value"
    )


def can_read_data() -> bool:
    """Whether a value read from tensor data can be recorded now (``Trace.read_data``, at the
    top level of the trace)."""
    trace = get_tracectx()
    return trace is not None and trace.read_data is not None and trace.at_top_level()


def _read_item(t: Any, what: str) -> Any:
    """``t.item()`` as a number read on this call, where tracing can read it; the number itself
    where the trace knows it (``thunder_ir.known_numbers``: no read of data)."""
    from thunder_ir.known_numbers import known_number

    known = known_number(t)
    if known is not None:
        return known
    if not can_read_data():
        raise _data_dependent(t, what)
    from thunder_ir.prims.data import item

    return item(t)


def _has_known_number(t: Any) -> bool:
    trace = get_tracectx()
    return trace is not None and t.name in trace.known_numbers


def _item_method(t: Any) -> Any:
    return _read_item(t, "Tensor.item()")


def register_tensor_method(name: str, fn: Callable[..., Any]) -> None:
    """Makes ``tensor.name(...)`` on a TensorProxy call ``fn(tensor, ...)``."""
    _TENSOR_METHODS[name] = fn


def tensor_method(name: str) -> Callable[..., Any]:
    try:
        return _TENSOR_METHODS[name]
    except KeyError:
        raise AttributeError(f"Tensor method {name!r} is not supported by the IR") from None


def _register_number_op(name: str, fn: Callable[..., Any]) -> None:
    _NUMBER_OPS[name] = fn


class Proxy:
    """A named stand-in for a value. Names are unique within the trace that created the proxy."""

    __slots__ = ("name",)
    prefix = "p"

    def __init__(self, name: str | None = None) -> None:
        trace = get_tracectx()
        if name is None:
            if trace is None:
                raise RuntimeError(f"{type(self).__name__} needs a name outside of tracing")
            name = trace.make_name(self.prefix)
        elif trace is not None:
            trace.add_name(name)
        self.name = name

    def type_string(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}: {self.type_string()}>"

    __hash__ = object.__hash__


def _fresh_name(trace: Trace | None, prefix: str) -> str | None:
    return None if trace is None else trace.make_name(prefix)


class TensorProxy(Proxy):
    """A tensor's metadata: shape (ints or IntegerProxies), dtype, device, requires_grad."""

    # (__weakref__: programs take weak references to tensors, as eager allows)
    __slots__ = ("__weakref__", "device", "dtype", "requires_grad", "shape")
    prefix = "t"
    # numpy defers a binary operation with a numpy scalar on the left (``np.float64(2) * t``) to
    # the tensor's reflected method, as it does for torch tensors.
    __array_ufunc__ = None

    if TYPE_CHECKING:  # operators are attached below; declared here for type checkers

        def __add__(self, other: Any) -> Any: ...
        def __radd__(self, other: Any) -> Any: ...
        def __iadd__(self, other: Any) -> Any: ...
        def __sub__(self, other: Any) -> Any: ...
        def __rsub__(self, other: Any) -> Any: ...
        def __isub__(self, other: Any) -> Any: ...
        def __mul__(self, other: Any) -> Any: ...
        def __rmul__(self, other: Any) -> Any: ...
        def __imul__(self, other: Any) -> Any: ...
        def __truediv__(self, other: Any) -> Any: ...
        def __rtruediv__(self, other: Any) -> Any: ...
        def __itruediv__(self, other: Any) -> Any: ...
        def __floordiv__(self, other: Any) -> Any: ...
        def __rfloordiv__(self, other: Any) -> Any: ...
        def __ifloordiv__(self, other: Any) -> Any: ...
        def __mod__(self, other: Any) -> Any: ...
        def __rmod__(self, other: Any) -> Any: ...
        def __imod__(self, other: Any) -> Any: ...
        def __pow__(self, other: Any) -> Any: ...
        def __rpow__(self, other: Any) -> Any: ...
        def __ipow__(self, other: Any) -> Any: ...
        def __matmul__(self, other: Any) -> Any: ...
        def __rmatmul__(self, other: Any) -> Any: ...
        def __imatmul__(self, other: Any) -> Any: ...
        def __and__(self, other: Any) -> Any: ...
        def __rand__(self, other: Any) -> Any: ...
        def __iand__(self, other: Any) -> Any: ...
        def __or__(self, other: Any) -> Any: ...
        def __ror__(self, other: Any) -> Any: ...
        def __ior__(self, other: Any) -> Any: ...
        def __xor__(self, other: Any) -> Any: ...
        def __rxor__(self, other: Any) -> Any: ...
        def __ixor__(self, other: Any) -> Any: ...
        def __lshift__(self, other: Any) -> Any: ...
        def __rlshift__(self, other: Any) -> Any: ...
        def __ilshift__(self, other: Any) -> Any: ...
        def __rshift__(self, other: Any) -> Any: ...
        def __rrshift__(self, other: Any) -> Any: ...
        def __irshift__(self, other: Any) -> Any: ...
        def __lt__(self, other: Any) -> Any: ...
        def __le__(self, other: Any) -> Any: ...
        def __gt__(self, other: Any) -> Any: ...
        def __ge__(self, other: Any) -> Any: ...
        def __eq__(self, other: Any) -> Any: ...  # type: ignore[override]
        def __ne__(self, other: Any) -> Any: ...  # type: ignore[override]
        def __neg__(self) -> Any: ...
        def __pos__(self) -> Any: ...
        def __abs__(self) -> Any: ...
        def __getitem__(self, key: Any) -> Any: ...
        def __setitem__(self, key: Any, value: Any) -> None: ...
        def __invert__(self) -> Any: ...

    def __init__(
        self,
        name: str | None = None,
        *,
        shape: Sequence[int | IntegerProxy],
        dtype: DType | Any,
        device: Device | Any,
        requires_grad: bool = False,
    ) -> None:
        super().__init__(name)
        self.shape = tuple(shape)
        self.dtype = to_dtype(dtype).strong()
        self.device = to_device(device)
        self.requires_grad = bool(requires_grad)

    def replace(self, *, name: str | None = None, **changes: Any) -> TensorProxy:
        """A new proxy with some metadata changed (and a fresh name unless one is given)."""
        return TensorProxy(
            name,
            shape=changes.get("shape", self.shape),
            dtype=changes.get("dtype", self.dtype),
            device=changes.get("device", self.device),
            requires_grad=changes.get("requires_grad", self.requires_grad),
        )

    # Metadata queries that are not ops.
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    ndimension = dim

    def numel(self) -> int | IntegerProxy:
        n: int | IntegerProxy = 1
        for s in self.shape:
            n = n * s
        return n

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return self.shape
        from thunder_ir.utils import canonicalize_dim

        return self.shape[canonicalize_dim(self.ndim, dim)]

    nelement = numel

    def is_same_size(self, other: TensorProxy) -> bool:
        # symbolic sizes compared as numbers: a constraint between symbols, not one size each
        return len(self.shape) == len(other.shape) and all(
            a == b for a, b in zip(self.shape, other.shape)
        )

    def is_signed(self) -> bool:
        return self.dtype.kind != "bool" and self.dtype.name != "uint8"

    def get_device(self) -> int:
        return -1 if self.device.index is None else self.device.index

    def element_size(self) -> int:
        return self.dtype.bytes

    @property
    def itemsize(self) -> int:
        return self.dtype.bytes

    @property
    def nbytes(self) -> int | IntegerProxy:
        return self.numel() * self.dtype.bytes

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self.device.type == "cpu"

    @property
    def is_meta(self) -> bool:
        return self.device.type == "meta"

    @property
    def is_xpu(self) -> bool:
        return self.device.type == "xpu"

    @property
    def is_mps(self) -> bool:
        return self.device.type == "mps"

    # A proxy stands for a dense tensor (``tracing.proxy_for_tensor`` refuses other layouts; the
    # torch fallback runs a call whose result has another through torch: ``ops.fallback``), of a
    # dtype the IR has (no quantized dtypes).
    @property
    def layout(self) -> Any:
        import torch

        return torch.strided

    is_xla = property(lambda self: self.device.type == "xla")
    is_ipu = property(lambda self: self.device.type == "ipu")
    is_vulkan = property(lambda self: self.device.type == "vulkan")
    is_mtia = property(lambda self: self.device.type == "mtia")
    is_maia = property(lambda self: self.device.type == "maia")

    is_sparse = is_sparse_csr = is_nested = is_quantized = is_mkldnn = property(lambda self: False)

    @property
    def is_floating_point_dtype(self) -> bool:
        return self.dtype.is_float

    def is_floating_point(self) -> bool:
        return self.dtype.is_float

    def is_complex(self) -> bool:
        return self.dtype.is_complex

    def is_inference(self) -> bool:
        """Whether eager's tensor is an inference tensor, which depends on the
        ``torch.inference_mode`` blocks it was made in: the front end that records the program
        answers (it knows them); the proxy alone does not, and torch runs the program there."""
        from thunder_ir.ops.fallback import TorchRunsItError

        raise TorchRunsItError("torch.Tensor.is_inference", "the trace has no inference tensors")

    def type_string(self) -> str:
        dims = ", ".join(str(s) if isinstance(s, int) else s.name for s in self.shape)
        return f"{self.device} {self.dtype.shortname}[{dims}]"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        n = self.shape[0]
        return int(n)

    def __format__(self, spec: str) -> str:
        # object's: the jit looks this method aside (text of a tensor's values is torch's)
        return object.__format__(self, spec)

    # Python values of the data: read on this call where the recording program can
    # (``prims.item``), the decision recorded as a check of the computation.
    def __bool__(self) -> bool:
        n = self.numel
        if isinstance(n, int) and n != 1:
            raise RuntimeError(
                f"Boolean value of Tensor with {'no values' if not n else 'more than one value'} "
                "is ambiguous"
            )
        return bool(_read_item(self, "the truth value"))

    def __float__(self) -> float:
        return float(_read_item(self, "float()"))

    def __int__(self) -> int:
        return int(_read_item(self, "int()"))

    def __index__(self) -> int:
        if self.dtype.is_float or self.dtype.is_complex or self.dtype.is_boolean:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        try:
            return _read_item(self, "using it as an index or size").__index__()  # type: ignore[no-any-return]
        except DataDependentError as e:
            e.index_of = self  # an op's argument: its caller may read it first (the jit does)
            raise

    def __complex__(self) -> complex:
        return complex(_read_item(self, "complex()"))

    def __iter__(self) -> Any:
        return iter(tensor_method("unbind")(self, 0))

    def __dir__(self) -> list[str]:
        import torch

        return tensor_dir(self, torch.Tensor)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not slots or class attributes: the Tensor methods.
        if name.startswith("__"):
            if name in _TORCH_DUNDERS_TORCH_ANSWERS:
                # hasattr(x, "__array__") is True in eager: never a silent False here.
                from thunder_ir.ops.fallback import TorchRunsItError

                raise TorchRunsItError(
                    f"torch.Tensor.{name}", "a protocol attribute the trace does not model"
                )
            raise AttributeError(name)
        if name in _VIEW_BIT_QUERIES:
            return functools.partial(_view_bit, name, self)
        fn = _TENSOR_METHODS.get(name)
        if name == "requires_grad_":
            return _BoundTensorMethod(set_requires_grad, self)
        if fn is None:
            import torch

            if name == "item" and (can_read_data() or _has_known_number(self)):
                return _BoundTensorMethod(_item_method, self)
            if name in _DATA_METHODS:
                raise _data_dependent(self, f"Tensor.{name}()")
            if name == "layout":
                return torch.strided  # proxies stand for dense tensors only
            method = _fallback_method(self, name)
            if method is not None:
                return method
            if hasattr(torch.Tensor, name):
                # grad, is_leaf, grad_fn, _version, _base, ...: torch answers them, the program
                # runs through torch here (never a silent False from hasattr).
                from thunder_ir.ops.fallback import TorchRunsItError

                raise TorchRunsItError(
                    f"torch.Tensor.{name}",
                    "an attribute of autograd or memory bookkeeping, which the trace does not "
                    "model",
                )
            raise AttributeError(f"'Tensor' object has no attribute '{name}'")
        if name in _TENSOR_PROPERTIES:
            return fn(self)
        return _BoundTensorMethod(fn, self)


# Dunder attributes torch.Tensor has and a proxy lacks (not __torch_function__ and the like,
# which torch's own dispatch probes while tracing): asking an instance for one runs the program
# through torch there.
_TORCH_DUNDERS_TORCH_ANSWERS = frozenset(
    {
        "__array__", "__array_priority__", "__array_wrap__", "__contains__",
        "__cuda_array_interface__", "__deepcopy__", "__dlpack__", "__dlpack_device__",
        "__reversed__", "__setstate__",
    }
)  # fmt: skip


# Whether a tensor is a lazy conjugate or negative view (``x.conj()``, ``x.conj().imag``): the
# trace computes values, not these view bits; only a complex tensor has the conjugate bit.
_VIEW_BIT_QUERIES = frozenset({"is_conj", "is_neg"})


def _view_bit(name: str, t: TensorProxy) -> bool:
    """``t.is_conj()`` / ``t.is_neg()``: False where no such view can be (a real tensor has no
    conjugate bit); otherwise torch answers it (the program runs through torch there)."""
    if name == "is_conj" and not t.dtype.is_complex:
        return False
    from thunder_ir.ops.fallback import TorchRunsItError

    raise TorchRunsItError(
        f"torch.Tensor.{name}", "a conjugate or negative view bit, which the trace does not model"
    )


def tensor_dir(t: TensorProxy, cls: type, instance_names: Iterable[str] = ()) -> list[str]:
    """``dir(t)`` as torch answers it for a tensor of type ``cls`` with these instance
    attributes (``torch.Tensor.__dir__``)."""
    names = [n for n in dir(cls) if n != "volatile"]
    if t.device.type != "cuda":
        names = [n for n in names if n != "__cuda_array_interface__"]
    return sorted([*names, *instance_names])


def set_requires_grad(t: TensorProxy, requires_grad: bool = True) -> TensorProxy:
    """``t.requires_grad_(flag)``: nothing to record where ``t`` already has that flag.
    Otherwise it changes a caller's tensor, or makes a computed tensor a leaf: the jit decides
    (``thunder.binding.calls``); the IR alone refuses."""
    if bool(requires_grad) == t.requires_grad:
        return t
    from thunder_ir.errors import UnsupportedInTracingError

    raise UnsupportedInTracingError(
        f"Tensor.requires_grad_({bool(requires_grad)}) on {t.name}, which "
        f"{'requires' if t.requires_grad else 'does not require'} grad, cannot be recorded"
    )


def _fallback_method(self: TensorProxy, name: str) -> Any:
    """``self.name`` for a Tensor method no op mirrors: a Python method of torch.Tensor bound to
    the proxy (the interpreter runs its code), or a C method recorded as a torch fallback op
    (``thunder_ir.ops.fallback``); None for other attributes (properties, data)."""
    import torch

    attr = torch.Tensor.__dict__.get(name)
    if attr is None:
        attr = getattr(torch.Tensor, name, None)
    if isinstance(attr, types.FunctionType):
        return types.MethodType(attr, self)
    if isinstance(attr, (types.MethodDescriptorType, types.WrapperDescriptorType)):
        return _BoundTensorMethod(functools.partial(_call_fallback_method, attr), self)
    return None


def _call_fallback_method(method: Any, tensor: TensorProxy, *args: Any, **kwargs: Any) -> Any:
    from thunder_ir.ops.fallback import call_torch_fallback

    return call_torch_fallback(method, (tensor, *args), kwargs)


class _BoundTensorMethod:
    __slots__ = ("fn", "tensor")

    def __init__(self, fn: Callable[..., Any], tensor: TensorProxy) -> None:
        self.fn, self.tensor = fn, tensor

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(self.tensor, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<method {getattr(self.fn, '__name__', self.fn)} of {self.tensor.name}>"


# Tensor attributes that are computed by an op rather than called (t.T, t.mT, t.real).
_TENSOR_PROPERTIES = frozenset({"T", "mT", "H", "mH", "real", "imag", "data"})

_BINARY_DUNDERS = {
    "add": "add",
    "sub": "sub",
    "mul": "mul",
    "truediv": "true_divide",
    "floordiv": "floor_divide",
    "mod": "remainder",
    "pow": "pow",
    "matmul": "matmul",
    "and": "bitwise_and",
    "or": "bitwise_or",
    "xor": "bitwise_xor",
    "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift",
}
_COMPARE_DUNDERS = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
_UNARY_DUNDERS = {"neg": "neg", "pos": "positive", "abs": "abs", "invert": "bitwise_not"}


def _refuse_numpy_array(op: str, other: Any) -> None:
    """An operator with a NumPy array: torch.Tensor's returns NotImplemented and NumPy computes
    it on the tensor's data (a float64 result for ``t + np.array(2.5)``, or an error)."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(other, numpy.ndarray):
        raise DataDependentError(
            f"{op} of a tensor and a NumPy array, which NumPy computes on the tensor's data"
        )


def _tensor_binary(op: str) -> Callable[[Any, Any], Any]:
    def method(self: Any, other: Any) -> Any:
        _refuse_numpy_array(op, other)
        return _TENSOR_METHODS[op](self, other)

    return method


def _tensor_reflected(op: str) -> Callable[[Any, Any], Any]:
    def method(self: Any, other: Any) -> Any:
        _refuse_numpy_array(op, other)
        return _TENSOR_METHODS[op](other, self)

    return method


def _tensor_inplace(op: str) -> Callable[[Any, Any], Any]:
    def method(self: Any, other: Any) -> Any:
        _refuse_numpy_array(op, other)
        return _TENSOR_METHODS[op + "_"](self, other)

    return method


def _tensor_unary(op: str) -> Callable[[Any], Any]:
    def method(self: Any) -> Any:
        return _TENSOR_METHODS[op](self)

    return method


for _d, _op in _BINARY_DUNDERS.items():
    setattr(TensorProxy, f"__{_d}__", _tensor_binary(_op))
    setattr(TensorProxy, f"__r{_d}__", _tensor_reflected(_op))
    setattr(TensorProxy, f"__i{_d}__", _tensor_inplace(_op))


def _reflected_true_divide(self: Any, other: Any) -> Any:
    # torch.Tensor.__rtruediv__ is ``self.reciprocal() * other``: two roundings, as there
    return _TENSOR_METHODS["mul"](_TENSOR_METHODS["reciprocal"](self), other)


TensorProxy.__rtruediv__ = _reflected_true_divide  # type: ignore[method-assign,assignment]


def _reflected_mul(self: Any, other: Any) -> Any:
    # torch.Tensor.__rmul__ is ``self.mul(other)``: the number second, which a low-precision CPU
    # mul reads unrounded (first it would be rounded)
    _refuse_numpy_array("mul", other)
    return _TENSOR_METHODS["mul"](self, other)


TensorProxy.__rmul__ = _reflected_mul  # type: ignore[method-assign,assignment]


def _tensor_compare(op: str) -> Callable[[Any, Any], Any]:
    def method(self: Any, other: Any) -> Any:
        if other is None or isinstance(other, (str, bytes)):
            # torch.Tensor's operators return NotImplemented for these: Python then answers
            # ``==`` by identity (False) and raises TypeError for ``<``, as in eager.
            return NotImplemented
        _refuse_numpy_array(op, other)
        return _TENSOR_METHODS[op](self, other)

    return method


for _d, _op in _COMPARE_DUNDERS.items():
    setattr(TensorProxy, f"__{_d}__", _tensor_compare(_op))
for _d, _op in _UNARY_DUNDERS.items():
    setattr(TensorProxy, f"__{_d}__", _tensor_unary(_op))
setattr(TensorProxy, "__hash__", Proxy.__hash__)  # operators above replaced the default


def _tensor_getitem(self: TensorProxy, key: Any) -> Any:
    return _TENSOR_METHODS["__getitem__"](self, key)


def _tensor_setitem(self: TensorProxy, key: Any, value: Any) -> None:
    _TENSOR_METHODS["__setitem__"](self, key, value)


setattr(TensorProxy, "__getitem__", _tensor_getitem)
setattr(TensorProxy, "__setitem__", _tensor_setitem)


# Numbers ----------------------------------------------------------------------------------------


class NumberProxy(Proxy):
    """A Python number whose value may change between calls.

    It carries this call's concrete ``value`` and the ``expr`` that produced it (a ``Var`` for an
    input). Arithmetic records number prims; using the value for control flow (``bool``, ``int``,
    ``range``) records a constraint in the trace, which the prologue checks on later calls.
    """

    __slots__ = ("expr", "python_type", "value")
    prefix = "n"
    # numpy defers ``np.float32(2) * n`` to the reflected method (computed as numpy does, above)
    # instead of taking the proxy as an element of an object array.
    __array_ufunc__ = None

    if TYPE_CHECKING:  # operators are attached below; declared here for type checkers

        def __add__(self, other: Any) -> Any: ...
        def __radd__(self, other: Any) -> Any: ...
        def __sub__(self, other: Any) -> Any: ...
        def __rsub__(self, other: Any) -> Any: ...
        def __mul__(self, other: Any) -> Any: ...
        def __rmul__(self, other: Any) -> Any: ...
        def __truediv__(self, other: Any) -> Any: ...
        def __rtruediv__(self, other: Any) -> Any: ...
        def __floordiv__(self, other: Any) -> Any: ...
        def __rfloordiv__(self, other: Any) -> Any: ...
        def __mod__(self, other: Any) -> Any: ...
        def __rmod__(self, other: Any) -> Any: ...
        def __and__(self, other: Any) -> Any: ...
        def __rand__(self, other: Any) -> Any: ...
        def __or__(self, other: Any) -> Any: ...
        def __ror__(self, other: Any) -> Any: ...
        def __xor__(self, other: Any) -> Any: ...
        def __rxor__(self, other: Any) -> Any: ...
        def __lshift__(self, other: Any) -> Any: ...
        def __rlshift__(self, other: Any) -> Any: ...
        def __rshift__(self, other: Any) -> Any: ...
        def __rrshift__(self, other: Any) -> Any: ...
        def __lt__(self, other: Any) -> Any: ...
        def __le__(self, other: Any) -> Any: ...
        def __gt__(self, other: Any) -> Any: ...
        def __ge__(self, other: Any) -> Any: ...
        def __eq__(self, other: Any) -> Any: ...  # type: ignore[override]
        def __ne__(self, other: Any) -> Any: ...  # type: ignore[override]
        def __neg__(self) -> Any: ...
        def __pos__(self) -> Any: ...
        def __abs__(self) -> Any: ...
        def __invert__(self) -> Any: ...

    def __init__(
        self, name: str | None = None, *, value: Any, python_type: type, expr: C.Expr | None = None
    ) -> None:
        super().__init__(name)
        self.value = value
        self.python_type = python_type
        self.expr: C.Expr = (
            expr if expr is not None else C.Var(self.name, integer=python_type in (int, bool))
        )
        if expr is None and python_type is int:
            trace = get_tracectx()
            if trace is not None:
                trace.int_variables[self.name] = self

    def replace(self, *, name: str | None = None) -> NumberProxy:
        return type(self)(name, value=self.value, python_type=self.python_type)  # type: ignore[call-arg]

    @property
    def dtype(self) -> DType:
        return to_dtype(self.python_type)

    def type_string(self) -> str:
        return f"{self.python_type.__name__} {self.value!r}"

    def _constrain(self, expr: C.Expr) -> None:
        trace = get_tracectx()
        if trace is not None:
            trace.add_constraint(expr)
        else:  # a pass deciding on a value outside any trace: still checked by the prologue
            note_constraint(expr)

    def __bool__(self) -> bool:
        result = bool(self.value)
        e = self.expr if self.python_type is bool else C.Compare("!=", self.expr, C.Const(0))
        self._constrain(e if result else C.Not(e))
        return result

    def __index__(self) -> int:
        if self.python_type not in (int, bool):
            raise TypeError(f"{self.python_type.__name__} value cannot be used as an index")
        self._constrain(C.value_is(self.expr, self.value))
        return int(self.value)

    def __int__(self) -> int:
        self._constrain(C.value_is(self.expr, self.value))
        return int(self.value)

    def __float__(self) -> float:
        self._constrain(C.value_is(self.expr, self.value))
        return float(self.value)

    def __complex__(self) -> complex:
        self._constrain(C.value_is(self.expr, self.value))
        return complex(self.value)

    # Text made from the number bakes its value into the program: it holds only for this value.
    def __str__(self) -> str:
        self._constrain(C.value_is(self.expr, self.value))
        return str(self.value)

    def __repr__(self) -> str:
        self._constrain(C.value_is(self.expr, self.value))
        return repr(self.value)

    def __format__(self, spec: str) -> str:
        self._constrain(C.value_is(self.expr, self.value))
        return format(self.value, spec)

    def _fixed(self) -> Any:
        """The value, which the program then holds for only (as ``__int__``)."""
        self._constrain(C.value_is(self.expr, self.value))
        return self.value

    def fixed_value(self) -> Any:
        """The value, for code that takes it as it is (numpy): the program then holds for this
        value only (a check of the computation where it was read from data, a guard of the
        prologue where it is an input)."""
        return self._fixed()

    # A hash of the value (dict keys, sets) holds for that value only. (IR code keys proxies by
    # name, never by the proxy.)
    def __hash__(self) -> int:
        return hash(self._fixed())

    def _as_int(self) -> Any:
        return self if self.python_type is int else _NUMBER_OPS["int"](self)

    def _real_only(self, what: str) -> None:
        if self.python_type is complex:
            raise TypeError(f"type complex doesn't define {what} method")

    def __trunc__(self) -> Any:
        self._real_only("__trunc__")
        return self._as_int()

    def __floor__(self) -> Any:
        self._real_only("__floor__")
        return self._as_int() if self.python_type is not float else _NUMBER_OPS["floor"](self)

    def __ceil__(self) -> Any:
        self._real_only("__ceil__")
        return self._as_int() if self.python_type is not float else _NUMBER_OPS["ceil"](self)

    def __round__(self, ndigits: Any = None) -> Any:
        self._real_only("__round__")
        if ndigits is None:
            return self._as_int() if self.python_type is not float else _NUMBER_OPS["round"](self)
        return round(self._fixed(), ndigits)

    def __divmod__(self, other: Any) -> Any:
        if _is_numpy_scalar(other):
            return divmod(self._fixed(), other)
        if not isinstance(other, (int, float, NumberProxy)):
            return NotImplemented
        return self // other, self % other

    def __rdivmod__(self, other: Any) -> Any:
        if _is_numpy_scalar(other):
            return divmod(other, self._fixed())
        if not isinstance(other, (int, float, NumberProxy)):
            return NotImplemented
        return other // self, other % self

    def __pow__(self, other: Any, mod: Any = None) -> Any:
        if _is_numpy_scalar(other) and mod is None:
            return self._fixed() ** other
        if not isinstance(other, (int, float, complex, NumberProxy)):
            return NotImplemented
        return _NUMBER_OPS["pow"](self, other) if mod is None else _pow_mod(self, other, mod)

    def __rpow__(self, other: Any, mod: Any = None) -> Any:
        if _is_numpy_scalar(other) and mod is None:
            return other ** self._fixed()
        if not isinstance(other, (int, float, complex, NumberProxy)):
            return NotImplemented
        return _NUMBER_OPS["pow"](other, self) if mod is None else _pow_mod(other, self, mod)

    @property
    def real(self) -> Any:
        if self.python_type is complex:
            return _NUMBER_OPS["real"](self)
        return self._as_int() if self.python_type is bool else self

    @property
    def imag(self) -> Any:
        if self.python_type is complex:
            return _NUMBER_OPS["imag"](self)
        return 0.0 if self.python_type is float else 0

    def conjugate(self) -> Any:
        return self._fixed().conjugate() if self.python_type is complex else self.real


def _pow_mod(base: Any, exp: Any, mod: Any) -> Any:
    """``pow(base, exp, mod)``: ``base ** exp % mod`` for a small non-negative exponent, else
    computed from fixed values."""
    e = exp._fixed() if isinstance(exp, NumberProxy) else exp
    if all(pyval(x).__class__ in (int, bool) for x in (base, exp, mod)) and 0 <= e <= 64:
        if pyval(mod) == 0:
            raise ValueError("pow() 3rd argument cannot be 0")
        return _NUMBER_OPS["mod"](_NUMBER_OPS["pow"](base, e), mod)
    return pow(*(x._fixed() if isinstance(x, NumberProxy) else x for x in (base, e, mod)))


class IntegerProxy(NumberProxy):
    """An int (or bool: ``python_type`` says which)."""

    __slots__ = ()
    prefix = "i"

    def __init__(
        self,
        name: str | None = None,
        *,
        value: int,
        python_type: type = int,
        expr: C.Expr | None = None,
    ) -> None:
        super().__init__(name, value=value, python_type=python_type, expr=expr)

    def replace(self, *, name: str | None = None) -> IntegerProxy:
        return IntegerProxy(name, value=self.value, python_type=self.python_type)

    @property
    def numerator(self) -> Any:
        return self._as_int()

    @property
    def denominator(self) -> int:
        return 1

    def as_integer_ratio(self) -> tuple[Any, int]:
        return self._as_int(), 1

    # Without an expression form: computed from the fixed value.
    def bit_length(self) -> int:
        return int(self._fixed()).bit_length()

    def bit_count(self) -> int:
        return int(self._fixed()).bit_count()

    def to_bytes(self, *args: Any, **kwargs: Any) -> bytes:
        return int(self._fixed()).to_bytes(*args, **kwargs)


class FloatProxy(NumberProxy):
    __slots__ = ()
    prefix = "f"

    def __init__(
        self,
        name: str | None = None,
        *,
        value: float,
        python_type: type = float,
        expr: C.Expr | None = None,
    ) -> None:
        super().__init__(name, value=value, python_type=float, expr=expr)

    def replace(self, *, name: str | None = None) -> FloatProxy:
        return FloatProxy(name, value=self.value)

    def is_integer(self) -> Any:
        return _NUMBER_OPS["eq"](_NUMBER_OPS["mod"](self, 1.0), 0.0)  # inf % 1.0 is nan: False

    def as_integer_ratio(self) -> tuple[int, int]:
        return float(self._fixed()).as_integer_ratio()

    def hex(self) -> str:
        return float(self._fixed()).hex()


class ComplexProxy(NumberProxy):
    __slots__ = ()
    prefix = "c"

    def __init__(
        self,
        name: str | None = None,
        *,
        value: complex,
        python_type: type = complex,
        expr: C.Expr | None = None,
    ) -> None:
        super().__init__(name, value=value, python_type=complex, expr=expr)

    def replace(self, *, name: str | None = None) -> ComplexProxy:
        return ComplexProxy(name, value=self.value)


def _is_numpy_scalar(x: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(x, numpy.generic)


def _number_binary(op: str, reflected: bool) -> Callable[[Any, Any], Any]:
    python_op = getattr(operator, op if op not in ("and", "or") else f"{op}_")

    def method(self: Any, other: Any) -> Any:
        if _is_numpy_scalar(other):
            # numpy's arithmetic (float32 rounding, int8 wrapping, its result types) on the
            # value, which the program then holds for only
            return python_op(other, self._fixed()) if reflected else python_op(self._fixed(), other)
        if not isinstance(other, (int, float, complex, NumberProxy)):
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        return _NUMBER_OPS[op](a, b)

    return method


def _number_unary(op: str) -> Callable[[Any], Any]:
    def method(self: Any) -> Any:
        return _NUMBER_OPS[op](self)

    return method


_NUMBER_BINARY = (
    "add",
    "sub",
    "mul",
    "truediv",
    "floordiv",
    "mod",
    "pow",
    "and",
    "or",
    "xor",
    "lshift",
    "rshift",
)
for _op in _NUMBER_BINARY:
    if _op == "pow":
        continue  # (defined on the class: pow takes a modulo)
    setattr(NumberProxy, f"__{_op}__", _number_binary(_op, False))
    setattr(NumberProxy, f"__r{_op}__", _number_binary(_op, True))
for _op in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(NumberProxy, f"__{_op}__", _number_binary(_op, False))
for _op in ("neg", "pos", "abs", "invert"):
    setattr(NumberProxy, f"__{_op}__", _number_unary(_op))


# Asynchronous results ------------------------------------------------------------------------


class FutureTensorProxy(Proxy):
    """The pending result of an asynchronous collective (``prims.all_reduce(..., do_async=True)``):
    only ``prims.wait`` reads it, and returns the tensor it will be."""

    __slots__ = ("device", "dtype", "shape")
    prefix = "fut"

    def __init__(
        self,
        name: str | None = None,
        *,
        shape: Sequence[int | IntegerProxy],
        dtype: DType | Any,
        device: Device | Any,
    ) -> None:
        super().__init__(name)
        self.shape = tuple(shape)
        self.dtype = to_dtype(dtype).strong()
        self.device = to_device(device)

    def replace(self, *, name: str | None = None) -> FutureTensorProxy:
        return FutureTensorProxy(name, shape=self.shape, dtype=self.dtype, device=self.device)

    def type_string(self) -> str:
        dims = ", ".join(str(s) if isinstance(s, int) else s.name for s in self.shape)
        return f"future {self.device} {self.dtype.shortname}[{dims}]"


# Strings and collections --------------------------------------------------------------------


class StringProxy(Proxy):
    """A string input. Its value is known; the prologue checks it (strings steer control flow)."""

    __slots__ = ("value",)
    prefix = "s"

    def __init__(self, name: str | None = None, *, value: str) -> None:
        super().__init__(name)
        self.value = value

    def type_string(self) -> str:
        return f"str {self.value!r}"


class CollectionProxy(Proxy):
    """A tuple, list or dict input whose items are unpacked in the prologue."""

    __slots__ = ("collection",)
    prefix = "C"

    def __init__(self, name: str | None = None, *, collection: Any) -> None:
        super().__init__(name)
        self.collection = collection

    def type_string(self) -> str:
        return type(self.collection).__name__


class GeneratorProxy(Proxy):
    """A ``torch.Generator`` argument: an input of the computation, so one program draws from
    whichever generator of its device each call passes (it is keyed by type and device)."""

    __slots__ = ("device",)
    prefix = "gen"

    def __init__(self, name: str | None = None, *, device: Any) -> None:
        super().__init__(name)
        self.device = device  # the torch.device the generator draws on

    def type_string(self) -> str:
        return f"torch.Generator {self.device}"


def pyval(x: Any) -> Any:
    """The concrete value of a number (proxy or not)."""
    return x.value if isinstance(x, NumberProxy) else x


def is_proxyable_number(x: Any) -> bool:
    return isinstance(x, (bool, int, float, complex))
