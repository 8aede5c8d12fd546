"""autograd.Function backwards that write in place, tensor subclasses thunder inspects, and
``out=`` tensors that are an operand of the call: as eager PyTorch."""

from __future__ import annotations

import warnings

import pytest
import torch

import thunder

CACHES = [None, "symbolic values"]


def _jit(fn, cache):
    return thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)


def _quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def _outcome(fn, *args):
    try:
        return _quiet(fn, *args)
    except Exception as e:  # noqa: BLE001 - compared with eager's
        return e


# -- a Function's backward writing in place ---------------------------------------------------


class _LinearAccum(torch.autograd.Function):
    """Megatron's gradient_accumulation_fusion: the weight gradient is added into main_grad."""

    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x @ weight.t()

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        weight.main_grad.add_(g.t() @ x)
        return g @ weight, None


class _ScaleGradInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        g.mul_(2)
        return g


class _SigmoidWritesSaved(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y.mul_(1 - y).mul_(g)


@pytest.mark.parametrize("cache", CACHES)
def test_backward_accumulates_into_main_grad(cache):
    w = torch.nn.Parameter(torch.randn(3, 4))
    w.main_grad = torch.zeros(3, 4)

    def f(x):
        return _LinearAccum.apply(x, w).sin().sum()

    jf = _jit(f, cache)
    for _ in range(3):
        x = torch.randn(2, 4, requires_grad=True)
        w.main_grad.zero_()
        f(x).backward()
        expected_main, expected_x = w.main_grad.clone(), x.grad.clone()
        w.main_grad.zero_()
        x.grad = None
        _quiet(jf, x).backward()
        torch.testing.assert_close(w.main_grad, expected_main)
        torch.testing.assert_close(x.grad, expected_x)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("function", [_ScaleGradInPlace, _SigmoidWritesSaved])
def test_backward_writes_incoming_gradient_or_saved_tensor(function, cache):
    def f(x):
        return function.apply(x * 1).sin()

    jf = _jit(f, cache)
    for _ in range(3):
        x = torch.randn(4, requires_grad=True)
        (expected,) = torch.autograd.grad(f(x).sum(), x)
        (got,) = torch.autograd.grad(_quiet(jf, x).sum(), x)
        torch.testing.assert_close(got, expected)


class _Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


@pytest.mark.parametrize("cache", CACHES)
def test_saved_output_written_in_program_raises_in_backward(cache):
    def f(x):
        y = _Exp.apply(x)
        y.add_(1)
        return y

    def g(x):  # saved, not written: differentiated
        return _Exp.apply(x).sin()

    jf, jg = _jit(f, cache), _jit(g, cache)
    for _ in range(3):
        x = torch.randn(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            f(x).sum().backward()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            _quiet(jf, x).sum().backward()
        (expected,) = torch.autograd.grad(g(x).sum(), x)
        (got,) = torch.autograd.grad(jg(x).sum(), x)
        torch.testing.assert_close(got, expected)


# -- tensor subclasses: thunder's own inspection of arguments ----------------------------------


class _Meters(torch.Tensor):
    """Allows only some torch functions (a unit-carrying tensor)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        if name not in {"mul", "__mul__", "add", "__add__", "sum"}:
            raise TypeError(f"Meters does not support {name}")
        return super().__torch_function__(func, types, args, kwargs or {})


_LOGGED: list[str] = []


class _Logged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        _LOGGED.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


@pytest.mark.parametrize("cache", CACHES)
def test_strict_subclass_argument_runs_as_eager(cache):
    def fn(x):
        return (x * 2 + x).sum()

    jf = _jit(fn, cache)
    for _ in range(3):
        x = torch.randn(3).as_subclass(_Meters)
        expected, got = fn(x), _quiet(jf, x)
        assert type(got) is type(expected)
        torch.testing.assert_close(
            got.as_subclass(torch.Tensor), expected.as_subclass(torch.Tensor)
        )


@pytest.mark.parametrize("cache", CACHES)
def test_subclass_sees_only_the_programs_calls(cache):
    def fn(x, y, z=None):
        return (x * 2 + y).sum() + z

    jf = _jit(fn, cache)
    for _ in range(3):
        args = [torch.randn(3).as_subclass(_Logged) for _ in range(3)]
        _LOGGED.clear()
        expected = fn(args[0], args[1], z=args[2])
        eager_calls = list(_LOGGED)
        _LOGGED.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = jf(args[0], args[1], z=args[2])
        assert _LOGGED == eager_calls
        torch.testing.assert_close(
            got.as_subclass(torch.Tensor), expected.as_subclass(torch.Tensor)
        )


@pytest.mark.parametrize("cache", CACHES)
def test_as_subclass_inside_runs_eagerly_with_an_ordinary_warning(cache):
    class Sub(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs or {})

    class Plain(torch.Tensor):
        pass

    for target in (Sub, Plain):

        def f(x, target=target):
            return (x.as_subclass(target) * 2).as_subclass(torch.Tensor) + 1

        jf = _jit(f, cache)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                x = torch.randn(3)
                torch.testing.assert_close(jf(x), f(x))
        messages = [str(w.message) for w in caught]
        assert not any("please report" in m for m in messages), messages
        assert any("as_subclass" in m for m in messages), messages


# -- out= that is an operand -------------------------------------------------------------------

_I = torch.tensor([3, 2, 1, 0])

OUT_IS_OPERAND = {
    "mm_intermediates": lambda a, b: (lambda z, w: torch.mm(z, w, out=z))(a * 1, b * 1),
    "mm_input": lambda a, b: torch.mm(a, a, out=a),
    "matrix_power": lambda a, b: torch.linalg.matrix_power(a, 2, out=a),
    "addmm_input_operand": lambda a, b: (lambda z, w: torch.addmm(z, z, w, out=z))(a * 1, b * 1),
    "addmm_bias": lambda a, b: (lambda z, w: torch.addmm(w, z, w, out=z))(a * 1, b * 1),
    "take": lambda a, b: torch.take(a, torch.arange(16).flip(0).view(4, 4), out=a),
    "index_select": lambda a, b: (lambda z: torch.index_select(z, 0, _I, out=z))(a * 2),
    "gather": lambda a, b: (lambda z: torch.gather(z, 0, _I[:, None].expand(4, 4), out=z))(a * 2),
    "index_add": lambda a, b: (lambda z: torch.index_add(z, 0, _I, z, out=z))(a * 2),
    "cumsum": lambda a, b: (lambda z: torch.cumsum(z, 0, out=z))(a * 2),
    "flip_no_out_keyword": lambda a, b: (lambda z: torch.flip(z, [0], out=z))(a * 2),
    "flip_no_out_keyword_other": lambda a, b: torch.flip(a * 2, [0], out=b),
    "tensor_add_no_out_keyword": lambda a, b: (a * 2).add(b, out=b),
    # elementwise: each element read before written, compiled
    "add": lambda a, b: (lambda z: torch.add(z, b, out=z))(a * 2),
    "mul_input": lambda a, b: torch.mul(a, b, out=a),
    "sin_input": lambda a, b: torch.sin(a, out=a),
    "where": lambda a, b: (lambda z: torch.where(z > 0, z, b, out=z))(a * 2),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("case", list(OUT_IS_OPERAND))
def test_out_is_an_operand_as_eager(case, cache):
    f = OUT_IS_OPERAND[case]
    jf = _jit(f, cache)
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        a, b = torch.randn(4, 4, generator=gen), torch.randn(4, 4, generator=gen)
        a_eager, b_eager, a_jit, b_jit = a.clone(), b.clone(), a.clone(), b.clone()
        expected = _outcome(f, a_eager, b_eager)
        got = _outcome(jf, a_jit, b_jit)
        if isinstance(expected, Exception):
            assert type(got) is type(expected), (got, expected)
            continue
        assert not isinstance(got, Exception), got
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(a_jit, a_eager)
        torch.testing.assert_close(b_jit, b_eager)


# -- a Function's backward reading outside state -------------------------------------------------

_SCALE = torch.ones(3)


class _ScaledByGlobal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return g * _SCALE


class _ScaledByAttribute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.w = w
        ctx.save_for_backward(x)
        return x * w

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ctx.w, g * x


@pytest.mark.parametrize("cache", CACHES)
def test_backward_reads_a_global_when_it_runs(cache):
    global _SCALE

    def f(x):
        return _ScaledByGlobal.apply(x).sin()

    jf = _jit(f, cache)
    for step in range(4):
        grads = []
        for fn in (f, jf):
            _SCALE = torch.ones(3)
            x = torch.randn(3, requires_grad=True)
            y = _quiet(fn, x)
            if step % 2:
                _SCALE = torch.full((3,), 3.0)  # rebound
            else:
                _SCALE.fill_(5.0)  # written in place
            y.sum().backward()
            grads.append((x.detach().clone(), x.grad))
        (xe, ge), (xj, gj) = grads
        torch.testing.assert_close(gj / torch.cos(xj), ge / torch.cos(xe))


@pytest.mark.parametrize("cache", CACHES)
def test_backward_reading_saved_and_argument_tensors_compiles(cache):
    def f(x, w):
        return _ScaledByAttribute.apply(x, w).sum()

    jf = _jit(f, cache)
    for _ in range(3):
        x = torch.randn(3, requires_grad=True)
        w = torch.randn(3, requires_grad=True)
        expected = torch.autograd.grad(f(x, w), (x, w))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # neither split nor eager
            got = torch.autograd.grad(jf(x, w), (x, w))
        torch.testing.assert_close(got, expected)
