"""In-place Tensor methods no thunder op mirrors (``exponential_``, ``uniform_``, ``logit_``,
``polygamma_``): recorded through torch's functional variant of the aten operator and a copy into
the tensor, run as the method itself where the program keeps writes in place. Values (random
ones under the same seed), gradients and eager's errors are compared with eager."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thunder

CASES = {
    "empty_like(x).exponential_()": lambda x: torch.empty_like(x).exponential_(),
    "empty_like(x).uniform_()": lambda x: torch.empty_like(x).uniform_(),
    "x.clone().uniform_(-1, 1)": lambda x: x.clone().uniform_(-1, 1),
    "x.clone().uniform_(to=3.0)": lambda x: x.clone().uniform_(to=3.0),
    "empty_like(x).normal_(2.0, 3.0)": lambda x: torch.empty_like(x).normal_(2.0, 3.0),
    "x.clone().bernoulli_()": lambda x: x.clone().bernoulli_(),
    "x.clone().bernoulli_(0.3)": lambda x: x.clone().bernoulli_(0.3),
    "x.clone().bernoulli_(x)": lambda x: x.clone().bernoulli_(x),
    "empty(5).random_(0, 10)": lambda x: torch.empty(5).random_(0, 10),
    "empty(5).random_(7)": lambda x: torch.empty(5).random_(7),
    "empty(5).geometric_(0.5)": lambda x: torch.empty(5).geometric_(0.5),
    "empty(5).cauchy_()": lambda x: torch.empty(5).cauchy_(),
    "empty(5).log_normal_()": lambda x: torch.empty(5).log_normal_(),
    "x.clone().logit_(eps=0.1)": lambda x: x.clone().logit_(eps=0.1),
    "x.clone().i0_()": lambda x: x.clone().i0_(),
    "x.clone().polygamma_(1)": lambda x: x.clone().polygamma_(1),
    "x.clone().nextafter_(x * 2)": lambda x: x.clone().nextafter_(x * 2),
    "x.clone().heaviside_(x - 0.5)": lambda x: x.clone().heaviside_(x - 0.5),
    "x.clone().xlogy_(x)": lambda x: x.clone().xlogy_(x),
    "x.clone().renorm_(2, 0, 1.0)": lambda x: x.clone().renorm_(2, 0, 1.0),
    "x.clone().masked_scatter_(x > 0.5, x * 3)": lambda x: x.clone().masked_scatter_(
        x > 0.5, x * 3
    ),
    "a write through a view": lambda x: _through_view(x),
    "the written tensor read before and after": lambda x: _read_around(x),
}


def _through_view(x):
    y = x * 2
    y[:, 1:].exponential_()
    return y


def _read_around(x):
    y = x + 1
    before = y * 2
    y.logit_(eps=0.2)
    return before + y


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("name", list(CASES))
def test_in_place_method_without_an_op_runs_as_eager(name: str, grad: bool) -> None:
    fn = CASES[name]
    x = torch.rand(3, 4)
    jf = thunder.jit(fn)
    with torch.set_grad_enabled(grad):
        for seed in (0, 1):  # the second call is a cache hit
            torch.manual_seed(seed)
            got = jf(x)
            torch.manual_seed(seed)
            want = fn(x)
            assert got.dtype == want.dtype and torch.equal(got, want), name
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_gradients_through_an_in_place_method_without_an_op() -> None:
    def f(x, w):
        y = (x * w) * 0.5 + 0.25
        y.logit_(eps=0.01)
        noise = torch.empty_like(y).exponential_().log()  # Phi-MoE's sparse mixer
        return (y - noise).max(-1).values + y.sum(-1)

    x = torch.rand(3, 4)
    w = torch.rand(4, requires_grad=True)
    jf = thunder.jit(f)
    torch.manual_seed(3)
    jf(x, w).sum().backward()
    got, w.grad = w.grad, None
    torch.manual_seed(3)
    f(x, w).sum().backward()
    assert torch.equal(got, w.grad)


def test_in_place_methods_eager_refuses_raise_eagers_error() -> None:
    x = torch.rand(3, 4)
    with pytest.raises(RuntimeError, match="result type Float can't be cast"):
        thunder.jit(lambda x: x.long().logit_())(x)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        thunder.jit(lambda x: x.clone().xlogy_(torch.rand(2, 3, 4)))(x)


@pytest.mark.parametrize("method", ["t_", "squeeze_", "transpose_", "fill_diagonal_"])
def test_in_place_methods_without_a_functional_variant_run_by_torch(method: str) -> None:
    # torch runs them (they change a tensor's shape or write a pattern no functional aten op
    # computes) instead of a refusal: fill_diagonal_ split there, torch making the write; the
    # shape changes eagerly, as torch.compile answers the old shape after them.
    args = {"transpose_": (0, 1), "fill_diagonal_": (1.0,), "squeeze_": (0,)}.get(method, ())

    def f(x, y):
        z = getattr(x * 2, method)(*args)
        return z.sin() + y, x.cos(), z.dim(), tuple(z.shape)

    jf = thunder.jit(f)
    for _ in range(3):
        x, y = torch.rand(1, 3, 3), torch.rand(3, 3)
        if method not in ("squeeze_",):
            x = x[0]
        got, want = jf(x, y), f(x, y)
        for g, w in zip(got[:2], want[:2]):
            assert g.shape == w.shape and torch.equal(g, w)
        assert got[2:] == want[2:]
    stats = thunder.compile_stats(jf)
    if method == "fill_diagonal_":
        assert stats.split_calls == 3 and stats.eager_fallbacks == 0
        reason = stats.last_split_reason
        assert "no functional variant" in reason
    else:
        assert stats.eager_fallbacks == 3 and stats.split_calls == 0
        reason = stats.last_eager_reason
        assert "changes its tensor's shape in place" in reason
    assert f"torch.Tensor.{method}" in reason
    assert f"{__file__}:" in reason


@pytest.mark.parametrize("method", ["unsqueeze_", "swapdims_", "as_strided_"])
def test_shape_changes_in_place_answer_the_new_shape(method: str) -> None:
    args = {"unsqueeze_": (0,), "swapdims_": (0, 1), "as_strided_": ((2,), (1,))}[method]

    def g(x):
        y = x.clone()
        getattr(y, method)(*args)
        return y.dim(), tuple(y.shape), y * 1

    jg = thunder.jit(g)
    x = torch.rand(1, 3)
    got, want = jg(x), g(x)
    assert got[:2] == want[:2]
    torch.testing.assert_close(got[2], want[2])


# In-place functions (not Tensor methods) that write their first argument: recorded as their
# functional variant and a copy, as the methods are.
FUNCTIONS = {
    "torch.relu_": lambda t: torch.relu_(t),
    "torch.selu_": lambda t: torch.selu_(t),
    "torch.celu_": lambda t: torch.celu_(t, 0.7),
    "torch.sinc_": lambda t: torch.sinc_(t),
    "torch.clamp_": lambda t: torch.clamp_(t, -0.3, 0.4),
    "torch.threshold_": lambda t: torch.threshold_(t, 0.1, 20.0),
    "torch.index_put_": lambda t: torch.index_put_(t, (torch.tensor([0, 2]),), torch.tensor(7.0)),
    "F.relu_": lambda t: F.relu_(t),
    "F.elu_": lambda t: F.elu_(t, 0.5),
    "F.leaky_relu_": lambda t: F.leaky_relu_(t, negative_slope=0.3),
    "F.hardtanh_": lambda t: F.hardtanh_(t, -0.4, 0.6),
    "F.threshold_": lambda t: F.threshold_(t, 0.2, -1.0),
    "F.selu_": lambda t: F.selu_(t),
}


def _apply_in_place(name: str, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    y = x * w - 0.5
    before = y * 1.5
    out = FUNCTIONS[name](y)
    z = x * w
    FUNCTIONS[name](z[:, 1:])  # through a view: the write lands in z
    return out, y + before, z


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_in_place_functions_record_like_methods(name: str) -> None:
    jf = thunder.jit(lambda x, w: _apply_in_place(name, x, w))
    for _ in range(2):
        x = torch.randn(3, 4)
        w = torch.randn(4, requires_grad=True)
        got = jf(x, w)
        want = _apply_in_place(name, x, w)
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e)
        cot = [torch.randn_like(e) for e in want]
        (gw,) = torch.autograd.grad(got, (w,), cot)
        (ew,) = torch.autograd.grad(want, (w,), cot)
        torch.testing.assert_close(gw, ew)
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0 and stats.split_calls == 0
    if name != "torch.clamp_":  # an op mirrors it
        assert "torch_fallback_inplace" in str(thunder.last_traces(jf)[0])


def test_in_place_function_on_a_leaf_raises_eagers_error() -> None:
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        thunder.jit(lambda t: torch.relu_(t))(x)


def test_in_place_function_writing_more_than_its_tensor_runs_split() -> None:
    # rrelu_ draws its slopes into a noise tensor it makes and writes: no functional variant of
    # the one op records that, so torch runs it, split.
    def f(x):
        y = x - 0.5
        torch.rrelu_(y, 0.1, 0.3)  # training=False: a fixed slope
        return y * 2

    jf = thunder.jit(f)
    x = torch.randn(4, 5)
    assert torch.equal(jf(x), f(x))
    stats = thunder.compile_stats(jf)
    assert stats.split_calls == 1 and "torch.rrelu_" in stats.last_split_reason


def test_examine_lists_in_place_functions_as_run_by_the_fallback() -> None:
    def f(x):
        y = x * 2
        F.elu_(y)
        torch.relu_(y)
        return y

    report = thunder.examine(f, torch.randn(3), show=False)
    assert not report.unsupported
    assert {"torch.relu_", "torch.nn.functional.elu_"} <= set(report.fallback)
