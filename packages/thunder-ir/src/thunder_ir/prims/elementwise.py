"""Elementwise prims: inputs of one shape, device and dtype (numbers allowed); no broadcasting and
no type promotion here, the torch-language layer does both.

Applied to numbers only, a prim computes the value right away and, for NumberProxies, builds the
expression of the result (so a traced shape computation stays symbolic)."""

from __future__ import annotations

import builtins
import cmath
import math
import operator
from collections.abc import Callable
from typing import Any

from thunder_ir import constraints as C
from thunder_ir import dtypes
from thunder_ir.dtypes import DType
from thunder_ir.errors import UnsupportedOptionError
from thunder_ir.prims._common import (
    check_same_device,
    check_same_dtype,
    check_same_shape,
    is_number,
    make_prim,
)
from thunder_ir.proxies import (
    ComplexProxy,
    FloatProxy,
    IntegerProxy,
    NumberProxy,
    TensorProxy,
    _register_number_op,
)
from thunder_ir.symbol import Symbol
from thunder_ir.tags import OpTag
from thunder_ir.tracectx import get_tracectx
from thunder_ir.utils import check

# How the output dtype follows from the (common) input dtype.
SAME = "same"
BOOL = "bool"
REAL = "real"  # complex -> its real dtype (abs, real, imag)


def _number_result(value: Any, expr: C.Expr) -> NumberProxy:
    if isinstance(value, bool):
        return IntegerProxy(value=value, python_type=bool, expr=expr)
    if isinstance(value, int):
        return IntegerProxy(value=value, expr=expr)
    if isinstance(value, float):
        return FloatProxy(value=value, expr=expr)
    return ComplexProxy(value=complex(value), expr=expr)


def _expr(x: Any) -> C.Expr:
    return x.expr if isinstance(x, NumberProxy) else C.Const(x)


def _value(x: Any) -> Any:
    return x.value if isinstance(x, NumberProxy) else x


# (prim, which argument is the constant, the constant) whose result is the other int argument.
_INT_IDENTITIES = frozenset(
    {
        ("add", 1, 0),
        ("add", 0, 0),
        ("sub", 1, 0),
        ("mul", 1, 1),
        ("mul", 0, 1),
        ("floor_divide", 1, 1),
    }
)


def _integer_identity(name: str, args: tuple[Any, ...]) -> Any:
    """The int proxy argument of an int op that returns it unchanged (``i + 0``, ``i // 1``)."""
    if len(args) != 2:
        return None
    for k in (0, 1):
        const, other = args[k], args[1 - k]
        if (
            type(const) is int
            and isinstance(other, NumberProxy)
            and other.python_type is int
            and (name, k, const) in _INT_IDENTITIES
        ):
            return other
    return None


def _same_variable(expr: C.Expr) -> Any:
    """The int variable of the trace that integer arithmetic ``expr`` equals, if any."""
    trace = get_tracectx()
    if trace is None or not trace.int_variables:
        return None
    name = C.single_variable(expr)
    return None if name is None else trace.int_variables.get(name)


def _elementwise_meta(
    name: str,
    arity: int,
    out: str,
    number_fn: Callable[..., Any] | None,
    expr_fn: Callable[..., C.Expr] | None,
) -> Callable[..., Any]:
    def meta(*args: Any) -> Any:
        check(
            len(args) == arity,
            lambda: f"prims.{name} takes {arity} inputs, got {len(args)}",
            TypeError,
        )
        tensors = [a for a in args if isinstance(a, TensorProxy)]
        for a in args:
            check(
                isinstance(a, TensorProxy) or is_number(a),
                lambda: f"prims.{name}: expected tensors or numbers, got {type(a).__name__}",
                TypeError,
            )
        if not tensors:
            check(number_fn is not None, lambda: f"prims.{name} does not accept only numbers")
            assert number_fn is not None and expr_fn is not None
            value = number_fn(*(_value(a) for a in args))
            if not any(isinstance(a, NumberProxy) for a in args):
                return value
            same = _integer_identity(name, args)
            if same is not None:
                return same  # x + 0, x - 0, x * 1, x // 1: the input itself, nothing recorded
            expr = expr_fn(*(_expr(a) for a in args))
            back = _same_variable(expr)
            if back is not None:
                return back  # (n + 1) - 1 is n again: no new name for it
            return _number_result(value, expr)
        check_same_shape(tensors, f"prims.{name}")
        device = check_same_device(tensors, f"prims.{name}")
        dtype = check_same_dtype(tensors, f"prims.{name}")
        assert dtype is not None
        out_dtype: DType = dtype
        if out == BOOL:
            out_dtype = dtypes.bool8
        elif out == REAL:
            out_dtype = dtypes.corresponding_real_dtype(dtype)
        t = tensors[0]
        return TensorProxy(
            shape=t.shape,
            dtype=out_dtype,
            device=device,
            # a comparison's bool result never requires grad (torch refuses the flag on it)
            requires_grad=out_dtype.is_inexact and any(x.requires_grad for x in tensors),
        )

    meta.__name__ = f"{name}_meta"
    return meta


def _unary_expr(op: str) -> Callable[[C.Expr], C.Expr]:
    return lambda a: C.UnaryOp(op, a)


def _call_expr(op: str) -> Callable[..., C.Expr]:
    return lambda *a: C.BinOp(op, *a)


def _compare_expr(op: str) -> Callable[[C.Expr, C.Expr], C.Expr]:
    return lambda a, b: C.Compare(op, a, b)


def _num1(
    fn: Callable[[float], Any], cfn: Callable[[complex], Any] | None = None
) -> Callable[[Any], Any]:
    def run(x: Any) -> Any:
        if isinstance(x, complex):
            check(cfn is not None, "complex numbers are not supported by this op")
            assert cfn is not None
            return cfn(x)
        return fn(x)

    return run


def _unary(
    name: str,
    number_fn: Callable[[Any], Any] | None = None,
    *,
    out: str = SAME,
    expr_op: str | None = None,
) -> Symbol:
    expr_fn = _unary_expr(expr_op) if expr_op else (_opaque_expr(name) if number_fn else None)
    return make_prim(
        name, _elementwise_meta(name, 1, out, number_fn, expr_fn), tags=(OpTag.ELEMENTWISE,)
    )


def _opaque_expr(name: str) -> Callable[..., C.Expr]:
    # Number functions without an expression form (math.exp) are recorded as constants of the
    # expression language would lose their input: refuse symbolic use instead.
    def fn(*args: C.Expr) -> C.Expr:
        raise UnsupportedOptionError(
            f"prims.{name} on a symbolic number is not supported; the value would be specialized"
        )

    return fn


def _binary(
    name: str,
    number_fn: Callable[[Any, Any], Any] | None = None,
    *,
    out: str = SAME,
    expr: Callable[..., C.Expr] | None = None,
) -> Symbol:
    if expr is None and number_fn is not None:
        expr = _opaque_expr(name)  # numbers are computed; a symbolic one is refused
    return make_prim(
        name, _elementwise_meta(name, 2, out, number_fn, expr), tags=(OpTag.ELEMENTWISE,)
    )


def _py_floordiv(a: Any, b: Any) -> Any:
    return a // b


def _trunc_div(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        q = builtins.abs(a) // builtins.abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    q = a / b
    return float(math.trunc(q)) if math.isfinite(q) else q  # a float stays a float


def _fmod(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return a - b * _trunc_div(a, b)  # an int stays an int
    return math.fmod(a, b)


def _sign(x: Any) -> Any:
    return (
        (x > 0) - (x < 0) if not isinstance(x, float) else math.copysign(1.0, x) if x != 0 else 0.0
    )


# Unary
abs = _unary("abs", operator.abs, out=REAL, expr_op="abs")
neg = _unary("neg", operator.neg, expr_op="-")
bitwise_not = _unary("bitwise_not", operator.invert, expr_op="~")
exp = _unary("exp", _num1(math.exp, cmath.exp))
exp2 = _unary("exp2", _num1(lambda x: 2.0**x))
expm1 = _unary("expm1", _num1(math.expm1))
log = _unary("log", _num1(math.log, cmath.log))
log1p = _unary("log1p", _num1(math.log1p))
log2 = _unary("log2", _num1(math.log2))
log10 = _unary("log10", _num1(math.log10))
sqrt = _unary("sqrt", _num1(math.sqrt, cmath.sqrt))
rsqrt = _unary("rsqrt", _num1(lambda x: 1.0 / math.sqrt(x)))
reciprocal = _unary("reciprocal", lambda x: 1.0 / x)
sin = _unary("sin", _num1(math.sin, cmath.sin))
cos = _unary("cos", _num1(math.cos, cmath.cos))
tan = _unary("tan", _num1(math.tan, cmath.tan))
asin = _unary("asin", _num1(math.asin))
acos = _unary("acos", _num1(math.acos))
atan = _unary("atan", _num1(math.atan))
sinh = _unary("sinh", _num1(math.sinh))
cosh = _unary("cosh", _num1(math.cosh))
tanh = _unary("tanh", _num1(math.tanh, cmath.tanh))
asinh = _unary("asinh", _num1(math.asinh))
acosh = _unary("acosh", _num1(math.acosh))
atanh = _unary("atanh", _num1(math.atanh))
erf = _unary("erf", _num1(math.erf))
erfc = _unary("erfc", _num1(math.erfc))
erfinv = _unary("erfinv")
lgamma = _unary("lgamma", _num1(math.lgamma))
digamma = _unary("digamma")
sigmoid = _unary("sigmoid", _num1(lambda x: 1.0 / (1.0 + math.exp(-x))))
floor = _unary("floor", math.floor, expr_op="floor")
ceil = _unary("ceil", math.ceil, expr_op="ceil")
round = _unary("round", _num1(builtins.round), expr_op="round")
trunc = _unary("trunc", math.trunc)
sign = _unary("sign", _sign)
signbit = _unary("signbit", lambda x: math.copysign(1.0, x) < 0, out=BOOL)
isfinite = _unary("isfinite", _num1(math.isfinite, cmath.isfinite), out=BOOL)
isnan = _unary("isnan", _num1(math.isnan, cmath.isnan), out=BOOL)
isinf = _unary("isinf", _num1(math.isinf, cmath.isinf), out=BOOL)
real = _unary("real", lambda x: x.real, out=REAL)
imag = _unary("imag", lambda x: x.imag, out=REAL)

# Binary
add = _binary("add", operator.add, expr=_call_expr("+"))
sub = _binary("sub", operator.sub, expr=_call_expr("-"))
mul = _binary("mul", operator.mul, expr=_call_expr("*"))
div = _binary("div", operator.truediv, expr=_call_expr("/"))
floor_divide = _binary("floor_divide", _py_floordiv, expr=_call_expr("//"))
trunc_divide = _binary("trunc_divide", _trunc_div)
remainder = _binary("remainder", operator.mod, expr=_call_expr("%"))  # Python's sign rule
fmod = _binary("fmod", _fmod)  # C's sign rule
pow = _binary("pow", operator.pow, expr=_call_expr("**"))
atan2 = _binary("atan2", math.atan2)
maximum = _binary("maximum", builtins.max)
minimum = _binary("minimum", builtins.min)
copysign = _binary("copysign", math.copysign)
bitwise_and = _binary("bitwise_and", operator.and_, expr=_call_expr("&"))
bitwise_or = _binary("bitwise_or", operator.or_, expr=_call_expr("|"))
bitwise_xor = _binary("bitwise_xor", operator.xor, expr=_call_expr("^"))
shift_left = _binary("shift_left", operator.lshift, expr=_call_expr("<<"))
shift_right = _binary("shift_right", operator.rshift, expr=_call_expr(">>"))
eq = _binary("eq", operator.eq, out=BOOL, expr=_compare_expr("=="))
ne = _binary("ne", operator.ne, out=BOOL, expr=_compare_expr("!="))
lt = _binary("lt", operator.lt, out=BOOL, expr=_compare_expr("<"))
le = _binary("le", operator.le, out=BOOL, expr=_compare_expr("<="))
gt = _binary("gt", operator.gt, out=BOOL, expr=_compare_expr(">"))
ge = _binary("ge", operator.ge, out=BOOL, expr=_compare_expr(">="))


def _where_meta(pred: Any, a: Any, b: Any) -> Any:
    check(
        isinstance(pred, (TensorProxy, bool, NumberProxy)),
        "prims.where: pred must be a tensor or a bool",
        TypeError,
    )
    tensors = [x for x in (pred, a, b) if isinstance(x, TensorProxy)]
    check(bool(tensors), "prims.where needs at least one tensor", TypeError)
    check_same_shape(tensors, "prims.where")
    device = check_same_device(tensors, "prims.where")
    if isinstance(pred, TensorProxy):
        check(
            pred.dtype == dtypes.bool8,
            lambda: f"prims.where: pred must be bool, got {pred.dtype.name}",
            TypeError,
        )
    values = [x for x in (a, b) if isinstance(x, TensorProxy)]
    dtype = check_same_dtype(values, "prims.where")
    if dtype is None:
        from thunder_ir.utils import result_type

        dtype = result_type(a, b)
    return TensorProxy(
        shape=tensors[0].shape,
        dtype=dtype,
        device=device,
        requires_grad=any(v.requires_grad for v in values),
    )


where = make_prim("where", _where_meta, tags=(OpTag.ELEMENTWISE,))


def _convert_element_type_meta(a: Any, dtype: DType) -> Any:
    check(
        isinstance(dtype, DType),
        lambda: f"prims.convert_element_type: expected a dtype, got {dtype!r}",
        TypeError,
    )
    if isinstance(a, TensorProxy):
        rg = a.requires_grad and dtype.is_inexact
        return TensorProxy(shape=a.shape, dtype=dtype, device=a.device, requires_grad=rg)
    check(
        is_number(a),
        lambda: (
            f"prims.convert_element_type: expected a tensor or a number, got {type(a).__name__}"
        ),
        TypeError,
    )
    typ = dtypes.python_type_of(dtype)
    value = typ(_value(a))
    if isinstance(a, NumberProxy):
        op = {bool: "bool", int: "int", float: "float"}.get(typ)
        check(op is not None, "symbolic conversion to complex is not supported")
        assert op is not None
        return _number_result(value, C.UnaryOp(op, a.expr))
    return value


convert_element_type = make_prim(
    "convert_element_type", _convert_element_type_meta, tags=(OpTag.ELEMENTWISE,)
)

# NumberProxy operators record these prims.
for _name, _sym in {
    "add": add,
    "sub": sub,
    "mul": mul,
    "truediv": div,
    "floordiv": floor_divide,
    "mod": remainder,
    "pow": pow,
    "and": bitwise_and,
    "or": bitwise_or,
    "xor": bitwise_xor,
    "lshift": shift_left,
    "rshift": shift_right,
    "eq": eq,
    "ne": ne,
    "lt": lt,
    "le": le,
    "gt": gt,
    "ge": ge,
    "neg": neg,
    "abs": abs,
    "invert": bitwise_not,
}.items():
    _register_number_op(_name, _sym)
_register_number_op("pos", lambda x: x)
_register_number_op("int", lambda x: convert_element_type(x, dtypes.int64))
for _sym in (floor, ceil, round, real, imag):
    _register_number_op(_sym.name, _sym)
