"""In-place Tensor methods no thunder op mirrors (``exponential_``, ``uniform_``, ``logit_``,
``polygamma_``): recorded through torch's functional variant of the aten operator and a copy into
the tensor, run as the method itself where the program keeps writes in place. Values (random
ones under the same seed), gradients and eager's errors are compared with eager."""

from __future__ import annotations

import pytest
import torch

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
def test_in_place_methods_without_a_functional_variant_are_refused_clearly(method: str) -> None:
    args = {"transpose_": (0, 1), "fill_diagonal_": (1.0,)}.get(method, ())
    jf = thunder.jit(lambda x: getattr(x.clone(), method)(*args))
    with pytest.raises(NotImplementedError, match=f"{method}.*no functional variant.*test_inpl"):
        jf(torch.rand(3, 3))
