"""The torch executor: every prim as one torch call.

Prims with a 1:1 torch function print as that function (``torch.add(t0, t1)``); the others as a
small named function of ``thunder_executors.torch_impls`` (``torch_ex.broadcast_in_dim(...)``).
Arguments are converted once, when the execution trace is built: IR dtypes and devices become
torch's, the choice between variants (a number operand, an empty dim list, an integer dtype
that torch would promote) is made then, never per call.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import torch

from thunder_executors import distributed_impls, torch_impls
from thunder_executors.executor import (
    OperatorExecutor,
    Translator,
    register_executor,
    to_runtime_value,
)
from thunder_executors.torch_symbols import executor_symbol as _symbol
from thunder_executors.torch_symbols import helper_symbol, torch_symbol
from thunder_ir import BoundSymbol, PythonCode, Symbol, TensorProxy, prims
from thunder_ir.codegen import Printer, register_inline, type_comment
from thunder_ir.dtypes import to_torch_dtype
from thunder_ir.pytree import tree_flatten
from thunder_ir.tags import OpTag

__all__ = ["TorchExecutor", "helper_symbol", "torch_executor", "torch_symbol"]


class TorchExecutor(OperatorExecutor):
    """Runs prims with eager torch, one call each."""


torch_executor = TorchExecutor("torch")
register_executor(torch_executor)


def _call(
    sym: Symbol, bsym: BoundSymbol, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None
) -> BoundSymbol:
    return BoundSymbol(sym, args, kwargs or {}, bsym.output, header=bsym.header)


def _is_tensor(x: Any) -> bool:
    return isinstance(x, TensorProxy)


def _has_tensor(bsym: BoundSymbol) -> bool:
    return any(isinstance(a, TensorProxy) for a in bsym.flat_args)


def _number_symbol(prim: Symbol) -> Symbol:
    fn = torch_impls.NUMBER_FUNCTIONS[prim]
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__name__", "<lambda>")
    if module in ("operator", "math", "builtins", "_operator") and name.isidentifier():
        return _symbol("operator" if module == "_operator" else module, name, fn)
    return helper_symbol(f"number_{prim.name}", fn)


# Elementwise ------------------------------------------------------------------------------------

# prim -> the torch function that computes it.
_UNARY_TORCH_NAMES: dict[Symbol, str] = {
    prims.abs: "abs", prims.neg: "neg", prims.bitwise_not: "bitwise_not", prims.exp: "exp",
    prims.exp2: "exp2", prims.expm1: "expm1", prims.log: "log", prims.log1p: "log1p",
    prims.log2: "log2", prims.log10: "log10", prims.sqrt: "sqrt", prims.rsqrt: "rsqrt",
    prims.reciprocal: "reciprocal", prims.sin: "sin", prims.cos: "cos", prims.tan: "tan",
    prims.asin: "asin", prims.acos: "acos", prims.atan: "atan", prims.sinh: "sinh",
    prims.cosh: "cosh", prims.tanh: "tanh", prims.asinh: "asinh", prims.acosh: "acosh",
    prims.atanh: "atanh", prims.erf: "erf", prims.erfc: "erfc", prims.erfinv: "erfinv",
    prims.lgamma: "lgamma", prims.digamma: "digamma", prims.sigmoid: "sigmoid",
    prims.floor: "floor", prims.ceil: "ceil", prims.round: "round", prims.trunc: "trunc",
    prims.sign: "sign", prims.signbit: "signbit", prims.isfinite: "isfinite",
    prims.isnan: "isnan", prims.isinf: "isinf", prims.real: "real",
}  # fmt: skip

_BINARY_TORCH_NAMES: dict[Symbol, str] = {
    prims.add: "add", prims.sub: "sub", prims.mul: "mul", prims.floor_divide: "floor_divide",
    prims.remainder: "remainder", prims.fmod: "fmod", prims.pow: "pow", prims.atan2: "atan2",
    prims.maximum: "maximum", prims.minimum: "minimum", prims.copysign: "copysign",
    prims.bitwise_and: "bitwise_and", prims.bitwise_or: "bitwise_or",
    prims.bitwise_xor: "bitwise_xor", prims.shift_left: "bitwise_left_shift",
    prims.shift_right: "bitwise_right_shift", prims.eq: "eq", prims.ne: "ne", prims.lt: "lt",
    prims.le: "le", prims.gt: "gt", prims.ge: "ge",
}  # fmt: skip

# Comparisons with the number first: swap the operands and mirror the comparison.
_MIRRORED: dict[Symbol, Symbol] = {
    prims.eq: prims.eq, prims.ne: prims.ne, prims.lt: prims.gt, prims.le: prims.ge,
    prims.gt: prims.lt, prims.ge: prims.le,
}  # fmt: skip
# torch refuses a Python number here (as the first, or as either operand).
_NO_NUMBER_FIRST = frozenset(
    {prims.fmod, prims.atan2, prims.maximum, prims.minimum, prims.copysign}
)
_NO_NUMBER_AT_ALL = frozenset({prims.atan2, prims.maximum, prims.minimum})


def _elementwise_translator(prim: Symbol, tensor_translate: Translator) -> Translator:
    number_sym = _number_symbol(prim) if prim in torch_impls.NUMBER_FUNCTIONS else None

    def translate(bsym: BoundSymbol) -> BoundSymbol:
        if not _has_tensor(bsym):
            if number_sym is None:
                raise NotImplementedError(
                    f"prims.{prim.name} on numbers only has no implementation"
                )
            return _call(number_sym, bsym, bsym.args)
        return tensor_translate(bsym)

    return translate


def _unary(prim: Symbol, torch_name: str) -> Translator:
    sym = torch_symbol(torch_name)
    if prim is prims.sign:  # torch.sign refuses complex tensors; torch.sgn is its complex form
        sgn = torch_symbol("sgn")
        return _elementwise_translator(
            prim, lambda b: _call(sgn if b.args[0].dtype.is_complex else sym, b, b.args)
        )
    return _elementwise_translator(prim, lambda bsym: _call(sym, bsym, bsym.args))


# A CPU binary op with a Python number wraps the number into a new tensor on every call (about
# 1.5 us, as much as the op itself at small sizes). Where the number converts to the result dtype
# exactly as torch would convert it (the tensor's dtype, no promotion), the trace passes a
# 0-dim tensor of that dtype made once: torch runs the same kernel on the same value.
_SCALAR_CONSTANT_OPS = frozenset({prims.add, prims.sub, prims.mul})
_SCALAR_CONSTANT_DTYPES = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64"}
_scalar_constants: dict[str, PythonCode] = {}


def _scalar_operand(prim: Symbol, tensor: TensorProxy, number: Any, out: Any) -> Any:
    if prim not in _SCALAR_CONSTANT_OPS or type(number) not in (int, float):
        return number
    if not isinstance(out, TensorProxy) or out.dtype != tensor.dtype:
        return number
    if tensor.device.type != "cpu":
        return number
    dtype = to_torch_dtype(tensor.dtype)
    short = _SCALAR_CONSTANT_DTYPES.get(dtype) if dtype is not None else None
    if dtype is None or short is None or (type(number) is float and not dtype.is_floating_point):
        return number
    if type(number) is int and not (
        abs(number) <= 2**24 if dtype.is_floating_point else -(2**63) <= number < 2**63
    ):
        return number  # converted once here, rounding could differ from torch's one conversion
    if type(number) is float and not math.isfinite(number):
        return number
    # The name is the key: it tells 0.0 from -0.0 (equal as numbers) and 1 from 1.0.
    text = repr(number).replace("-", "m").replace(".", "_").replace("+", "")
    name = f"_{short}_{text}"  # _f32_1em06: 1e-06 as a float32 tensor
    constant = _scalar_constants.get(name)
    if constant is None:
        if not name.isidentifier():
            return number
        # Shared by every program: a plain CPU tensor whatever mode compiled the first of them
        # (one made under inference_mode could not be saved for backward by a later program).
        with torch.inference_mode(False):
            value = torch.tensor(number, dtype=dtype, device="cpu")
        constant = PythonCode(name, {name: value})
        _scalar_constants[name] = constant
    return constant


def _binary(prim: Symbol, torch_name: str) -> Translator:
    sym = torch_symbol(torch_name)
    wrapped = helper_symbol(
        f"{torch_name}_with_number", torch_impls.number_to_tensor_then(getattr(torch, torch_name))
    )

    def tensor_translate(bsym: BoundSymbol) -> BoundSymbol:
        a, b = bsym.args
        if _is_tensor(a) and _is_tensor(b):
            return _call(sym, bsym, (a, b))
        if _is_tensor(a):
            if prim in _NO_NUMBER_AT_ALL:
                return _call(wrapped, bsym, (a, b))
            return _call(sym, bsym, (a, _scalar_operand(prim, a, b, bsym.output)))
        if prim in _MIRRORED:
            return _call(torch_symbol(_BINARY_TORCH_NAMES[_MIRRORED[prim]]), bsym, (b, a))
        if prim in _NO_NUMBER_FIRST:
            return _call(wrapped, bsym, (a, b))
        return _call(sym, bsym, (_scalar_operand(prim, b, a, bsym.output), b))

    return _elementwise_translator(prim, tensor_translate)


def _divide(prim: Symbol, rounding_mode: str | None) -> Translator:
    div = torch_symbol("div")
    true_divide = torch_symbol("true_divide")

    def tensor_translate(bsym: BoundSymbol) -> BoundSymbol:
        out = bsym.output
        assert isinstance(out, TensorProxy)
        mode = rounding_mode
        if mode is None and out.dtype.is_exact:
            mode = "trunc"  # the prim keeps the dtype: integer division truncates, as in C
        if mode is None:
            return _call(true_divide, bsym, bsym.args)
        return _call(div, bsym, bsym.args, {"rounding_mode": mode})

    return _elementwise_translator(prim, tensor_translate)


def _convert_element_type(bsym: BoundSymbol) -> BoundSymbol:
    a, dtype = bsym.args
    if not isinstance(a, TensorProxy):
        from thunder_ir.dtypes import python_type_of

        typ = python_type_of(dtype)
        return _call(_symbol("builtins", typ.__name__, typ), bsym, (a,))
    return _call(helper_symbol("convert_element_type"), bsym, (a, to_torch_dtype(dtype)))


def _where(bsym: BoundSymbol) -> BoundSymbol:
    pred = bsym.args[0]
    if _is_tensor(pred):
        return _call(torch_symbol("where"), bsym, bsym.args)
    return _call(helper_symbol("where"), bsym, bsym.args)


# Reductions -------------------------------------------------------------------------------------


def _reduction(torch_name: str, *, keeps_dtype: bool) -> Translator:
    """sum/prod/amax/amin(a, dims): torch reads empty dims as "all"; sum and prod of integers
    would widen to int64 without an explicit dtype."""
    sym = torch_symbol(torch_name)

    def translate(bsym: BoundSymbol) -> BoundSymbol:
        a, dims = bsym.args
        kwargs: dict[str, Any] = {}
        if keeps_dtype and a.dtype.is_exact:
            kwargs["dtype"] = to_torch_dtype(a.dtype)
        if not dims:
            return _call(helper_symbol("reduce_no_dims"), bsym, (torch_name, a), kwargs)
        if _every_dim(a, dims):  # torch's full reduction, eager's kernel for x.sum(): faster
            return _call(sym, bsym, (a,), kwargs)
        if torch_name == "prod":  # torch.prod reduces one dim at a time
            if len(dims) == 1:
                return _call(sym, bsym, (a, dims[0]), kwargs)
            return _call(helper_symbol("prod_dims"), bsym, (a, tuple(dims)), kwargs)
        return _call(sym, bsym, (a, tuple(dims)), kwargs)

    return translate


def _every_dim(a: Any, dims: Sequence[int]) -> bool:
    """Whether ``dims`` names each dimension of ``a`` once (the result is 0-d)."""
    return len(dims) == a.ndim and sorted(dims) == list(range(a.ndim))


def _var(bsym: BoundSymbol) -> BoundSymbol:
    a, dims = bsym.args
    kwargs = dict(bsym.kwargs)
    if not dims:
        return _call(helper_symbol("reduce_no_dims"), bsym, ("var", a), kwargs)
    if _every_dim(a, dims):
        return _call(torch_symbol("var"), bsym, (a,), kwargs)
    return _call(torch_symbol("var"), bsym, (a, tuple(dims)), kwargs)


def _cumulative(torch_name: str) -> Translator:
    sym = torch_symbol(torch_name)

    def translate(bsym: BoundSymbol) -> BoundSymbol:
        a, dim = bsym.args
        kwargs = {"dtype": to_torch_dtype(a.dtype)} if a.dtype.is_exact else {}
        return _call(sym, bsym, (a, dim), kwargs)

    return translate


# Shapes, factories, indexing --------------------------------------------------------------------


def _slice(bsym: BoundSymbol) -> BoundSymbol:
    args = list(bsym.args) + [bsym.kwargs[k] for k in ("strides",) if k in bsym.kwargs]
    a, start, end = args[:3]
    strides = args[3] if len(args) > 3 else None
    # A symbolic stride (the backward's slices of a symbolic shape) is not known to be 1:
    # comparing it would record a prim outside of tracing.
    if strides is not None and all(type(s) is int and s == 1 for s in strides):
        strides = None
    if strides is None:
        # One dimension cut (a rotary half, a cache window): torch.narrow, a view as the slice
        # is, without building an index tuple on every call.
        cut = [
            d
            for d, (lo, hi, size) in enumerate(zip(start, end, a.shape))
            if not (type(lo) is int and lo == 0 and _same_size(hi, size))
        ]
        if len(cut) == 1 and type(start[cut[0]]) is int and type(end[cut[0]]) is int:
            d = cut[0]
            return _call(torch_symbol("narrow"), bsym, (a, d, start[d], end[d] - start[d]))
    call_args = (
        (a, tuple(start), tuple(end))
        if strides is None
        else (a, tuple(start), tuple(end), tuple(strides))
    )
    return _call(helper_symbol("slice_with_strides"), bsym, call_args)


def _same_size(a: Any, b: Any) -> bool:
    """Known equal without tracing a comparison (a symbolic size is equal to itself only)."""
    return a is b or (type(a) is int and type(b) is int and a == b)


def _convolution(bsym: BoundSymbol) -> BoundSymbol:
    a, weight, bias, stride, padding, dilation, transposed, output_padding, groups = bsym.args
    nd = weight.ndim - 2

    def per_dim(x: Any) -> tuple[Any, ...]:
        values = tuple(x)
        return values * nd if len(values) == 1 else values

    args = (
        a,
        weight,
        bias,
        per_dim(stride),
        per_dim(padding),
        per_dim(dilation),
        transposed,
        per_dim(output_padding),
        groups,
    )
    return _call(torch_symbol("convolution"), bsym, args)


# Inline forms of helpers whose body is one expression: the computation runs on every call, and a
# Python call per op costs as much as a small kernel's dispatch.


def _inline_shallow_copy(bsym: BoundSymbol, p: Printer) -> str | None:
    (a,) = bsym.args
    if not isinstance(a, TensorProxy) or not isinstance(bsym.output, TensorProxy):
        return None
    return f"{bsym.output.name} = {a.name}{type_comment(bsym)}"


def _inline_convert_element_type(bsym: BoundSymbol, p: Printer) -> str | None:
    a, dtype = bsym.args
    if not isinstance(a, TensorProxy) or not isinstance(bsym.output, TensorProxy):
        return None
    return f"{bsym.output.name} = {a.name}.to({p.value(dtype)}){type_comment(bsym)}"


def _inline_broadcast_in_dim(bsym: BoundSymbol, p: Printer) -> str | None:
    a, shape, dims = bsym.args
    if not isinstance(a, TensorProxy) or not isinstance(bsym.output, TensorProxy):
        return None
    source = a.name
    if a.ndim != len(shape):
        if not all(type(s) is int for s in a.shape):
            return None
        view: list[Any] = [1] * len(shape)
        for src, dst in enumerate(dims):
            view[dst] = a.shape[src]
        source = f"{a.name}.reshape({tuple(view)!r})"
    return f"{bsym.output.name} = {source}.expand({p.value(tuple(shape))}){type_comment(bsym)}"


def _inline_iota(bsym: BoundSymbol, p: Printer) -> str | None:
    (length,) = bsym.args
    start, step = bsym.kwargs["start"], bsym.kwargs["step"]
    dtype = bsym.kwargs["dtype"]
    if not (type(length) is int and type(start) is int and type(step) is int):
        return None
    if dtype.is_floating_point or dtype.is_complex:
        return None
    end = start + length * step
    place = f"device={p.value(bsym.kwargs['device'])}, dtype={p.value(dtype)}"
    return f"{bsym.output.name} = torch.arange({start}, {end}, {step}, {place}){type_comment(bsym)}"


def _matmul(bsym: BoundSymbol) -> BoundSymbol:
    """``torch.mm`` for two matrices, ``torch.bmm`` for two batches of the same size, as
    ``torch.matmul`` would call them, without its C++ wrapper's views around each call (a
    training step's backward makes dozens)."""
    a, b = bsym.args
    name = "matmul"
    if a.ndim == 2 and b.ndim == 2:
        name = "mm"
    elif a.ndim == 3 and b.ndim == 3 and _same_size(a.shape[0], b.shape[0]):
        name = "bmm"
    return _call(torch_symbol(name), bsym, to_runtime_value(bsym.args), {})


def _same(sym: Symbol) -> Translator:
    def translate(bsym: BoundSymbol) -> BoundSymbol:
        return _call(sym, bsym, to_runtime_value(bsym.args), to_runtime_value(bsym.kwargs))

    return translate


def _register_all() -> None:
    reg = torch_executor.register_implementation
    for prim, torch_name in _UNARY_TORCH_NAMES.items():
        reg(prim, translate=_unary(prim, torch_name))
    imag_sym = helper_symbol("imag")
    reg(
        prims.imag,
        translate=_elementwise_translator(prims.imag, lambda b: _call(imag_sym, b, b.args)),
    )
    for prim, torch_name in _BINARY_TORCH_NAMES.items():
        reg(prim, translate=_binary(prim, torch_name))
    reg(prims.div, translate=_divide(prims.div, None))
    reg(prims.trunc_divide, translate=_divide(prims.trunc_divide, "trunc"))
    reg(prims.convert_element_type, translate=_convert_element_type)
    reg(prims.where, translate=_where)

    reg(prims.sum, translate=_reduction("sum", keeps_dtype=True))
    reg(prims.prod, translate=_reduction("prod", keeps_dtype=True))
    reg(prims.amax, translate=_reduction("amax", keeps_dtype=False))
    reg(prims.amin, translate=_reduction("amin", keeps_dtype=False))
    reg(prims.var, translate=_var)
    reg(prims.var_mean, translate=_same(helper_symbol("var_mean")))
    reg(prims.argmax, translate=_same(torch_symbol("argmax")))
    reg(prims.argmin, translate=_same(torch_symbol("argmin")))
    reg(prims.cumsum, translate=_cumulative("cumsum"))
    reg(prims.cumprod, translate=_cumulative("cumprod"))

    reg(prims.broadcast_in_dim, translate=_same(helper_symbol("broadcast_in_dim")))
    reg(prims.reshape, translate=_same(torch_symbol("reshape")))
    reg(prims.slice_prim, translate=_slice)
    reg(
        prims.squeeze,
        translate=lambda b: _call(torch_symbol("squeeze"), b, (b.args[0], tuple(b.args[1]))),
    )
    reg(prims.unsqueeze, translate=_same(torch_symbol("unsqueeze")))
    reg(prims.transpose, translate=_same(torch_symbol("permute")))
    reg(prims.cat, translate=_same(torch_symbol("cat")))
    reg(prims.pad, translate=_same(helper_symbol("pad")))
    reg(prims.flip, translate=_same(torch_symbol("flip")))
    shallow = helper_symbol("shallow_copy")
    reg(prims.shallow_copy, translate=_same(shallow))
    register_inline(shallow, _inline_shallow_copy)
    register_inline(helper_symbol("convert_element_type"), _inline_convert_element_type)
    register_inline(helper_symbol("broadcast_in_dim"), _inline_broadcast_in_dim)
    register_inline(helper_symbol("iota"), _inline_iota)
    reg(prims.clone, translate=_same(torch_symbol("clone")))
    reg(prims.clone_layout, translate=_same(helper_symbol("clone_layout")))
    reg(prims.stop_gradient, translate=_same(torch_symbol("detach")))
    reg(prims.written_without_grad, translate=_same(helper_symbol("written_without_grad")))
    reg(prims.device_put, translate=_same(helper_symbol("device_put")))

    reg(prims.full, translate=_same(torch_symbol("full")))
    reg(prims.iota, translate=_same(helper_symbol("iota")))
    reg(prims.tensor, translate=_same(helper_symbol("tensor")))
    reg(prims.uniform, translate=_same(helper_symbol("uniform")))
    reg(prims.normal, translate=_same(helper_symbol("normal")))
    reg(prims.copy_, translate=_same(helper_symbol("copy_")))
    _register_random()

    # Collectives: torch.distributed calls (thunder_executors.distributed_impls).
    for prim, fn in (
        (prims.all_reduce, distributed_impls.all_reduce),
        (prims.all_gather, distributed_impls.all_gather),
        (prims.reduce_scatter, distributed_impls.reduce_scatter),
        (prims.broadcast, distributed_impls.broadcast),
        (prims.wait, distributed_impls.wait),
    ):
        reg(prim, translate=_same(_symbol("torch_dist", fn.__name__, fn)))

    reg(prims.take, translate=_same(helper_symbol("take")))
    reg(prims.index_select, translate=_same(torch_symbol("index_select")))
    reg(prims.gather, translate=_same(torch_symbol("gather")))
    reg(prims.scatter_add, translate=_same(torch_symbol("scatter_add")))
    reg(prims.index_put, translate=_same(helper_symbol("index_put")))
    reg(prims.matmul, translate=_matmul)
    reg(prims.linear, translate=_same(helper_symbol("linear")))
    reg(prims.convolution, translate=_convolution)
    reg(prims.embedding, translate=_same(helper_symbol("embedding")))

    # Ops without a decomposition: as_strided reads memory, so only torch can run it.
    from thunder_executors.torch_views import torch_call
    from thunder_ir import ops

    def as_torch_runs_it(bsym: BoundSymbol) -> BoundSymbol:
        call = torch_call(bsym)
        assert call is not None, bsym.sym.id
        return call

    reg(ops.as_strided, translate=as_torch_runs_it)

    # Torch callables no op mirrors: the callable itself, printed by its qualified name.
    for sym in (ops.torch_fallback, ops.torch_fallback_view, ops.torch_fallback_random):
        reg(sym, translate=_torch_fallback)
    reg(ops.torch_fallback_random_replay, translate=_torch_fallback_replay)
    reg(ops.torch_fallback_vjp, translate=_torch_fallback_vjp)


def _fallback_symbol(qualified: str) -> Symbol:
    """The executor symbol printed as ``qualified`` (``torch.special.polygamma``) that runs it;
    one run under ``torch.autocast`` (``thunder_ir.ops.fallback.autocast_name``) prints as a
    function of ``torch_ex`` named after the callable and the autocast state (so does one run
    under backend flags: ``thunder_ir.ops.backend_flags``)."""
    from thunder_ir.ops import resolve_torch_name
    from thunder_ir.ops.fallback import resolve_fallback, runs_under_state

    if runs_under_state(qualified):
        name = re.sub(r"\W+", "_", qualified.removeprefix("torch.")).strip("_")
        return _symbol("torch_ex", name, resolve_fallback(qualified))
    module, _, name = qualified.partition(".")  # thunder's own (a custom op's functional form)
    return _symbol(module, name, resolve_torch_name(qualified))


def _torch_fallback(bsym: BoundSymbol) -> BoundSymbol:
    qualified, *args = bsym.args
    return _call(
        _fallback_symbol(qualified),
        bsym,
        to_runtime_value(tuple(args)),
        to_runtime_value(bsym.kwargs),
    )


def _torch_fallback_vjp(bsym: BoundSymbol) -> BoundSymbol:
    """The backward's re-run differentiates only the arguments that required grad in the
    forward, as eager's autograd does: torch picks some kernels by that (attention with a mask
    that requires grad runs its math kernel, which refuses a mask together with is_causal)."""
    from thunder_ir.pytree import tree_iter

    _qualified, args, kwargs = bsym.args[:3]
    requires_grad = tuple(
        isinstance(x, TensorProxy) and x.requires_grad for x in tree_iter((args, kwargs))
    )
    return _call(
        helper_symbol("torch_fallback_vjp"),
        bsym,
        to_runtime_value(bsym.args),
        {**to_runtime_value(bsym.kwargs), "requires_grad": requires_grad},
    )


def _torch_fallback_replay(bsym: BoundSymbol) -> BoundSymbol:
    # The state argument is for the backward's replay; the forward draws as eager.
    qualified, _state, _device, *args = bsym.args
    return _call(
        _fallback_symbol(qualified),
        bsym,
        to_runtime_value(tuple(args)),
        to_runtime_value(bsym.kwargs),
    )


def _register_random() -> None:
    from thunder_executors import torch_random
    from thunder_ir import ops

    reg = torch_executor.register_implementation
    for prim, draw in (
        (prims.bernoulli, torch_random.bernoulli),
        (prims.bernoulli_like, torch_random.bernoulli_like),
        (prims.randint, torch_random.randint),
    ):
        reg(prim, translate=_same(helper_symbol(draw.__name__, draw)))
    for op, fn in (
        (ops.get_rng_state, torch_random.get_rng_state),
        (ops.cuda_get_rng_state, torch_random.get_rng_state),
        (ops.set_rng_state, torch_random.set_rng_state),
        (ops.cuda_set_rng_state, torch_random.set_rng_state),
        (ops.manual_seed, torch_random.manual_seed),
    ):
        reg(op, translate=_same(helper_symbol(fn.__name__, fn)))
    # CUDA's fused dropout kernel and its backward: torch's own, as eager calls them.
    reg(ops.native_dropout, translate=_same(torch_symbol("native_dropout")))
    backward = _fallback_symbol("torch.ops.aten.native_dropout_backward.default")
    reg(ops.native_dropout_backward, translate=_same(backward))


def _register_data_reads() -> None:
    """Reads of tensor data and the checks of decisions on them (``thunder_ir/prims/data.py``,
    the sized fallback): each runs as its own implementation, a torch call and a number read."""
    from thunder_ir.ops.fallback import SIZED_SYMBOLS, check_in_place_allowed

    for prim in (prims.item, prims.nonzero, prims.tolist, prims.check_data, prims.check_values):
        torch_executor.register_implementation(prim, translate=lambda b: b)
    torch_executor.register_implementation(check_in_place_allowed, translate=lambda b: b)
    checked = helper_symbol("torch_fallback_sized")

    def sized(b: BoundSymbol) -> BoundSymbol:
        leaves = len(tree_flatten(b.output[0])[0])  # the result's structure, checked each call
        return _call(checked, b, (b.args[0], leaves, *b.args[1:]), dict(b.kwargs))

    for sym in SIZED_SYMBOLS:
        torch_executor.register_implementation(sym, translate=sized)


_register_all()
_register_data_reads()


def unclaimed_prims() -> list[str]:
    """Prims (other than prologue prims and the return) the torch executor does not claim."""
    return [
        name
        for name, sym in prims.ALL_PRIMS.items()
        if not (OpTag.PROLOGUE in sym.tags or OpTag.RETURN in sym.tags)
        and sym not in torch_executor.implementations
    ]
