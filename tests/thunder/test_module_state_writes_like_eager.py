"""Writes a jitted function makes to a module's state (its parameter and buffer dicts, its
attributes), read back later in the same call, and context-manager objects it did not build,
compared with eager over several calls."""

import pytest
import torch
from torch.func import functional_call
from torch.nn.utils import stateless

import thunder

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("error::UserWarning")


def _grads(out, *inputs):
    return torch.autograd.grad(out.square().sum(), inputs)


def _check_same(f, make_inputs, calls=3):
    jf = thunder.jit(f)
    for _ in range(calls):
        inputs = make_inputs()
        eager_in = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
        expected, actual = f(*eager_in), jf(*inputs)
        torch.testing.assert_close(actual, expected)
        wanted = [t for t in eager_in if t.requires_grad]
        if wanted:
            got = [t for t in inputs if t.requires_grad]
            for a, e in zip(_grads(actual, *got), _grads(expected, *wanted), strict=True):
                torch.testing.assert_close(a, e)


def _linear_inputs():
    x = torch.randn(2, 4)
    w = torch.randn(3, 4, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    return x, w, b


@pytest.mark.parametrize("kwargs", [{}, {"strict": True}, {"tie_weights": False}])
def test_functional_call_uses_given_parameters(kwargs):
    lin = torch.nn.Linear(4, 3)

    def f(x, w, b):
        return functional_call(lin, {"weight": w, "bias": b}, (x,), **kwargs)

    _check_same(f, _linear_inputs)
    assert torch.equal(lin.weight, lin.weight)  # the module kept its own parameter objects
    assert isinstance(lin.weight, torch.nn.Parameter)


def test_reparametrize_module_uses_given_parameters():
    lin = torch.nn.Linear(4, 3)
    own = lin.weight

    def f(x, w, b):
        with stateless._reparametrize_module(lin, {"weight": w, "bias": b}):
            return lin(x)

    _check_same(f, _linear_inputs)
    assert lin.weight is own


def test_parameter_dict_write_is_read_back():
    lin = torch.nn.Linear(4, 3)
    own = lin.weight

    def f(x, w, b):
        old = lin._parameters["weight"]
        lin._parameters["weight"] = w
        try:
            return lin(x) + b
        finally:
            lin._parameters["weight"] = old

    _check_same(f, _linear_inputs)
    assert lin.weight is own


def test_parameter_deleted_then_set_as_plain_tensor():
    lin = torch.nn.Linear(4, 3)

    def f(x, w, b):
        old = lin.weight
        del lin._parameters["weight"]
        lin.weight = w
        try:
            return lin(x) + b
        finally:
            del lin.weight
            lin.weight = old

    _check_same(f, _linear_inputs)
    assert isinstance(lin.weight, torch.nn.Parameter) and "weight" in lin._parameters


class _Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.ones(3))

    def forward(self, x):
        return x * self.scale


def test_buffer_set_by_attribute_is_read_back():
    m = _Scaled()

    def f(x, s):
        old = m.scale
        m.scale = s
        try:
            return m(x)
        finally:
            m.scale = old

    _check_same(f, lambda: (torch.randn(2, 3), torch.randn(3, requires_grad=True)))
    assert torch.equal(m.scale, torch.ones(3))


def test_buffer_set_in_buffer_dict_is_read_back():
    m = _Scaled()

    def f(x, s):
        old = m._buffers["scale"]
        m._buffers["scale"] = s
        try:
            return m(x)
        finally:
            m._buffers["scale"] = old

    _check_same(f, lambda: (torch.randn(2, 3), torch.randn(3, requires_grad=True)))
    assert torch.equal(m.scale, torch.ones(3))


def test_buffer_write_kept_after_call():
    m = _Scaled()

    def f(x, s):
        m._buffers["scale"] = s * 2
        return m(x)

    jf = thunder.jit(f)
    for _ in range(3):
        x, s = torch.randn(2, 3), torch.randn(3)
        torch.testing.assert_close(jf(x, s), x * s * 2)
        torch.testing.assert_close(m.scale, s * 2)


_AUTOCASTS = [
    lambda: torch.autocast("cpu", dtype=torch.bfloat16),
    lambda: torch.autocast("cpu", dtype=torch.float16),
    lambda: torch.autocast("cpu", enabled=False),
    lambda: torch.autocast("cpu", dtype=torch.bfloat16),
]


def _matmul_under(ctx, x, w):
    with ctx:
        return x @ w


def _check_under_autocast(f, run):
    jf = thunder.jit(f)
    for make in _AUTOCASTS:
        ctx = make()
        x = torch.randn(2, 3)
        w = torch.randn(3, 4, requires_grad=True)
        we = w.detach().clone().requires_grad_()
        expected, actual = run(f, ctx, x, we), run(jf, ctx, x, w)
        assert actual.dtype == expected.dtype
        torch.testing.assert_close(actual, expected)
        (g,) = _grads(actual.float(), w)
        (ge,) = _grads(expected.float(), we)
        torch.testing.assert_close(g, ge)


def test_autocast_object_passed_in():
    _check_under_autocast(_matmul_under, lambda fn, ctx, x, w: fn(ctx, x, w))


_CTX = None


def _matmul_under_global(x, w):
    with _CTX:
        return x @ w


def test_autocast_object_read_from_global():
    def run(fn, ctx, x, w):
        global _CTX
        _CTX = ctx
        return fn(x, w)

    _check_under_autocast(_matmul_under_global, run)


class _UnderAutocast(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ctx = torch.autocast("cpu", dtype=torch.bfloat16)

    def forward(self, x, w):
        with self.ctx:
            return x @ w


def test_autocast_object_module_attribute():
    m = _UnderAutocast()

    def run(fn, ctx, x, w):
        m.ctx = ctx
        return fn(x, w)

    _check_under_autocast(m, run)
    m.ctx = _AUTOCASTS[0]()
    jm = thunder.jit(m)
    x, w = torch.randn(2, 3), torch.randn(3, 4)
    assert jm(x, w).dtype == torch.bfloat16
    m.ctx.fast_dtype = torch.float16  # the same object, changed in place
    assert jm(x, w).dtype == m(x, w).dtype == torch.float16


def test_autocast_built_inside_stays_correct():
    def f(x, w, dtype):
        with torch.autocast("cpu", dtype=dtype):
            return x @ w

    jf = thunder.jit(f)
    for dtype in (torch.bfloat16, torch.float16, torch.bfloat16):
        x, w = torch.randn(2, 3), torch.randn(3, 4)
        assert jf(x, w, dtype).dtype == f(x, w, dtype).dtype == dtype


def test_inference_mode_object_passed_in():
    def g(ctx, x):
        with ctx:
            y = x * 2
        return y.requires_grad

    jg = thunder.jit(g)
    for mode in (True, False, True, False):
        ctx = torch.inference_mode(mode)
        x = torch.randn(3, requires_grad=True)
        assert jg(ctx, x) == g(ctx, x)


class _CallsSubmoduleFunctionally(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.w = torch.nn.Parameter(torch.randn(3, 4))

    def forward(self, x):
        return functional_call(self.lin, {"weight": self.w * 2}, (x,))


def test_functional_call_inside_jitted_module_grads():
    m = _CallsSubmoduleFunctionally()
    jm = thunder.jit(m)
    for _ in range(3):
        x = torch.randn(2, 4)
        actual, expected = jm(x), m(x)
        torch.testing.assert_close(actual, expected)
        params = [m.w, m.lin.bias]
        for a, e in zip(_grads(actual, *params), _grads(expected, *params), strict=True):
            torch.testing.assert_close(a, e)
    assert isinstance(m.lin.weight, torch.nn.Parameter)
