"""Writes into ``out=`` and in-place ops whose operands overlap the written tensor give eager's
results, also where the call runs split (``torch.compile`` with thunder's backend): eager resizes
``out`` (a transposed or stepped view, a too small or empty tensor), casts into it, or ``out``
overlaps an argument. Dynamo's own rewrites of ``addcmul_``/``addcdiv_`` with ``value`` (and
``add_`` with a tensor ``alpha``) read all operands before writing and round with fma; eager's
kernels read an operand that overlaps ``self`` as they write it, so split calls must keep
torch's ops. Values, strides, storage offsets, which tensor is returned and the caller's memory
are compared with eager on fresh inputs over several calls, for both caches."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch._dynamo

import thunder

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*such calls run split:UserWarning"),
    pytest.mark.filterwarnings("ignore:.*was resized since:UserWarning"),
]

CACHES = [{}, {"cache": "symbolic values"}]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield


def _layout_of(value: Any) -> Any:
    """What the caller can see of a result: for a tensor its dtype, shape, strides, offset and
    values; containers element by element."""
    if isinstance(value, torch.Tensor):
        return (value.dtype, tuple(value.shape), value.stride(), value.storage_offset(), value)
    if isinstance(value, (tuple, list)):
        return [_layout_of(v) for v in value]
    return value


def _assert_same(got: Any, want: Any, exact: bool) -> None:
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            _assert_same(g, w, exact)
    elif isinstance(want, tuple) and isinstance(want[-1], torch.Tensor):
        assert got[:-1] == want[:-1]
        if exact:
            assert torch.equal(got[-1], want[-1]), (got[-1], want[-1])
        else:
            torch.testing.assert_close(got[-1], want[-1])
    else:
        assert got == want


def _like_eager(
    fn: Callable[..., Any],
    make: Callable[[int], tuple[list[torch.Tensor], tuple[Any, ...]]],
    *,
    exact: bool = True,
    calls: int = 4,
    **jit_kw: Any,
) -> thunder.CompileStats:
    """Runs ``fn`` eagerly and jitted on the same fresh inputs (``make(i)`` returns the caller's
    base tensors and the arguments) and compares results, the caller's memory and whether the
    result is an argument itself."""
    jitted = thunder.jit(fn, **jit_kw)
    for i in range(calls):
        seen = []
        for run in (fn, jitted):
            torch.manual_seed(i)
            bases, args = make(i)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    result = run(*args)
                except (RuntimeError, TypeError) as error:  # eager refuses some casts
                    seen.append((type(error), _layout_of(bases), None))
                    continue
            returned = result if isinstance(result, tuple) else (result,)
            identity = [[r is a for a in args] for r in returned]
            seen.append((_layout_of(returned), _layout_of(bases), identity))
        (want, want_bases, want_identity), (got, got_bases, got_identity) = seen
        _assert_same(got, want, exact)
        _assert_same(got_bases, want_bases, exact)
        assert got_identity == want_identity
    return thunder.compile_stats(jitted)


# -- the reported case: an overlapping addcmul_ before a resized out= ---------------------------


def _input_in(layout: str, shape: tuple[int, int], dtype: torch.dtype, seed: int):
    n = math.prod(shape)

    def values(m: int) -> torch.Tensor:
        signs = torch.where(torch.arange(m) % 3 == 0, -1.0, 1.0).to(dtype)
        return (torch.arange(m, dtype=dtype) * 0.25 - 1.0 + seed) * signs

    if layout == "transposed":
        base = values(n).reshape(shape[::-1])
        return base, base.t()
    base = values(2 * n).reshape(2 * shape[1], shape[0])  # transposed and stepped
    return base, base[::2].t()


@pytest.mark.parametrize("layout", ["transposed", "transposed_stepped"])
@pytest.mark.parametrize("jit_kw", CACHES)
def test_overlapping_addcmul_then_resized_out(layout, jit_kw):
    def f(a):
        v1 = a.t()
        v2 = v1[:, 2:3:2]
        a.addcmul_(v2, v2, value=0.5)  # v2 is a column of a: eager reads it as it writes
        torch.add(v2, 1, out=v1)  # eager resizes v1 (and warns)
        v3 = v2.t()
        v1.copy_(v1.flip(0))
        return v1, v2, v3

    def make(i):
        dtype = torch.float32 if i % 2 else torch.float64
        base, a = _input_in(layout, (3, 3), dtype, i)
        return [base], (a,)

    _like_eager(f, make, reshape_inplace="warn", **jit_kw)


# -- dynamo's rewrites of in-place ops in split calls -------------------------------------------


@torch.compiler.disable
def _native(t: torch.Tensor) -> torch.Tensor:
    return t + 1


def _addcmul_overlapping(a):
    v = a.t()[:, 2:3]
    a.addcmul_(v, v, value=0.5)
    return _native(a)


def _addcdiv_overlapping(a):
    v = a.t()[:, 2:3]
    a.addcdiv_(v, v.abs() + 1, value=0.5)
    return _native(a)


def _add_tensor_alpha(a, alpha):
    v = a.t()[:, 2:3]
    a.add_(v * v, alpha=alpha)
    return _native(a)


def _addcmul_disjoint(a, b, c):
    a.addcmul_(b, c, value=0.3)  # fma rounds once where eager rounds twice
    a.addcdiv_(b, c.abs() + 1, value=0.7)
    return _native(a)


@pytest.mark.parametrize(
    "fn, arity",
    [
        (_addcmul_overlapping, 1),
        (_addcdiv_overlapping, 1),
        (_add_tensor_alpha, 2),
        (_addcmul_disjoint, 3),
    ],
)
@pytest.mark.parametrize("jit_kw", CACHES)
def test_split_calls_keep_torch_inplace_ops(fn, arity, jit_kw):
    def make(i):
        base = torch.randn(5, 5)
        a = base.t()
        rest = [torch.tensor(0.7), torch.randn(5, 5)][: arity - 1]
        if arity == 3:
            rest = [torch.randn(5, 5), torch.randn(5, 5)]
        return [base], (a, *rest)

    stats = _like_eager(fn, make, **jit_kw)
    assert stats.split_calls == 4


@pytest.mark.parametrize("jit_kw", CACHES)
def test_split_calls_keep_torch_inplace_ops_with_gradients(jit_kw):
    def f(w, b, c):
        a = w * 1
        a.addcmul_(b, c, value=0.5)
        a.addcdiv_(b, c.abs() + 1, value=0.25)
        return _native(a).sum()

    jitted = thunder.jit(f, **jit_kw)
    for i in range(3):
        torch.manual_seed(i)
        w = torch.randn(4, 4, requires_grad=True)
        b, c = torch.randn(4, 4), torch.randn(4, 4)
        want = f(w, b, c)
        (want_grad,) = torch.autograd.grad(want, w)
        got = jitted(w, b, c)
        (got_grad,) = torch.autograd.grad(got, w)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(got_grad, want_grad)


# -- out= of several ops: resized, cast, overlapping, non-contiguous ----------------------------


def _out_tensor(kind: str, shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """A tensor for ``out=`` and the base tensor whose memory the caller sees."""
    if kind == "contiguous":
        base = torch.zeros(shape)
        return base, base
    if kind == "transposed":
        base = torch.zeros(shape[::-1])
        return base, base.t()
    if kind == "stepped":
        base = torch.zeros(shape[0], 2 * shape[1])
        return base, base[:, ::2]
    if kind == "too_small":
        base = torch.zeros(2, 2)
        return base, base
    if kind == "too_small_transposed":
        base = torch.zeros(2, 3)
        return base, base.t()
    if kind == "too_big_transposed":
        base = torch.zeros(5, 4)
        return base, base.t()
    if kind == "empty":
        base = torch.zeros(0)
        return base, base
    base = torch.zeros(shape, dtype=torch.float64 if kind == "float64" else torch.int64)
    return base, base


OUT_KINDS = [
    "contiguous",
    "transposed",
    "stepped",
    "too_small",
    "too_small_transposed",
    "too_big_transposed",
    "empty",
    "float64",
    "int64",
]

OPS = {
    "add": (lambda x, y, o: torch.add(x, y, alpha=2, out=o), (3, 4)),
    "mul": (lambda x, y, o: torch.mul(x, y, out=o), (3, 4)),
    "matmul": (lambda x, y, o: torch.matmul(x, y.t(), out=o), (3, 3)),
    "cat": (lambda x, y, o: torch.cat([x, y], 0, out=o), (6, 4)),
    "sum": (lambda x, y, o: torch.sum(x, 1, keepdim=True, out=o), (3, 1)),
    "clamp": (lambda x, y, o: torch.clamp(x, -0.5, 0.5, out=o), (3, 4)),
    "where": (lambda x, y, o: torch.where(x > 0, x, y, out=o), (3, 4)),
    "index_select": (
        lambda x, y, o: torch.index_select(x, 1, torch.tensor([0, 2, 1, 1]), out=o),
        (3, 4),
    ),
}


@pytest.mark.parametrize("op_name", list(OPS))
@pytest.mark.parametrize("out_made", ["by_caller", "in_program"])
@pytest.mark.parametrize("jit_kw", CACHES)
def test_out_of_any_layout_like_eager(op_name, out_made, jit_kw):
    op, shape = OPS[op_name]
    for kind in OUT_KINDS:
        if out_made == "by_caller":

            def f(x, y, o):
                result = op(x * 1, y + 0, o)
                return result, o * 1

            def make(i, kind=kind):
                base, out = _out_tensor(kind, shape)
                return [base], (torch.randn(3, 4), torch.randn(3, 4), out)

        else:

            def f(x, y, kind=kind):
                base, out = _out_tensor(kind, shape)
                result = op(x, y, out)
                return result, out * 1, base

            def make(i):
                return [], (torch.randn(3, 4), torch.randn(3, 4))

        _like_eager(f, make, calls=3, **jit_kw)


@pytest.mark.parametrize("op_name", ["add", "mul", "clamp", "where", "index_select"])
@pytest.mark.parametrize("view", ["columns", "transposed_square", "stepped"])
@pytest.mark.parametrize("input_made", ["by_caller", "in_program"])
def test_out_overlapping_an_argument_like_eager(op_name, view, input_made):
    op, _ = OPS[op_name]

    def f(x0, y):
        x = x0 if input_made == "by_caller" else x0 * 1
        if view == "columns":
            out = x[:, :2]
        elif view == "transposed_square":
            out = x[:, :3].t()
        else:
            out = x[:, ::2]
        result = op(x, y, out)
        return result, out * 1, x * 1

    def make(i):
        x = torch.randn(3, 4)
        return [x], (x, torch.randn(3, 4))

    _like_eager(f, make, calls=3)
