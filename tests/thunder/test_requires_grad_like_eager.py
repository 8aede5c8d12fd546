"""requires_grad and gradients of a jitted function's results as in eager: leaves made inside the
program, outputs reached only through zero-gradient ops; and an in-place random draw on an input
before a decision on data. Each case compares thunder.jit with eager on fresh random inputs."""

from __future__ import annotations

import warnings

import pytest
import torch

import thunder

torch.set_num_threads(1)


def _jit_quiet(fn):
    jf = thunder.jit(fn)

    def call(*args):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*run split.*")
            return jf(*args)

    return call


# 1. A leaf made inside the program, returned, while an input requires grad.


def _zeros_leaf(x):
    w = torch.zeros(3, requires_grad=True)
    return w, (w * x).sum()


def _tensor_leaf(x):
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    return w, (w * x).sin().sum()


def _detached_leaf(x):
    e = (x * 2).detach().requires_grad_()
    return {"e": e, "loss": (e * x).exp().sum()}


@pytest.mark.parametrize("fn", [_zeros_leaf, _tensor_leaf, _detached_leaf])
def test_leaf_made_inside_gets_its_gradient(fn):
    x = torch.randn(3, requires_grad=True)
    xt = x.detach().clone().requires_grad_()
    expected = fn(x)
    got = _jit_quiet(fn)(xt)
    e_leaf, e_loss = expected if isinstance(expected, tuple) else expected.values()
    t_leaf, t_loss = got if isinstance(got, tuple) else got.values()
    assert t_leaf.requires_grad == e_leaf.requires_grad and t_leaf.is_leaf == e_leaf.is_leaf
    torch.testing.assert_close(t_loss, e_loss)
    e_loss.backward()
    t_loss.backward()
    assert t_leaf.grad is not None
    torch.testing.assert_close(t_leaf.grad, e_leaf.grad)
    torch.testing.assert_close(xt.grad, x.grad)


def test_saliency_embedding_leaf():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 1))

    def fn(idx):
        emb = m[0](idx).detach().requires_grad_()
        return emb, m[1](emb).sum()

    idx = torch.randint(0, 10, (5,))
    grads = {}
    for name, f in [("eager", fn), ("thunder", _jit_quiet(fn))]:
        m.zero_grad()
        emb, out = f(idx)
        out.backward()
        assert emb.requires_grad and emb.is_leaf
        grads[name] = (emb.grad, m[1].weight.grad.clone())
    assert grads["thunder"][0] is not None
    torch.testing.assert_close(grads["thunder"], grads["eager"])


def test_leaf_not_returned_stays_compiled():
    # The leaf never reaches the caller: every gradient the caller reads is eager's, compiled.
    w = torch.randn(3, requires_grad=True)

    def fn(x, w):
        e = (x * 2).detach().requires_grad_()
        return (e * w).sum()

    x = torch.randn(3)
    jf = thunder.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = jf(x, w)
    out.backward()
    expected_w = w.grad.clone()
    w.grad = None
    fn(x, w).backward()
    torch.testing.assert_close(expected_w, w.grad)
    assert thunder.compile_stats(jf).split_calls == 0


# 2. Outputs reached only through zero-gradient ops require grad, with zero gradients.

_ZERO_GRAD = {
    "sign": lambda x: torch.sign(x * 1),
    "floor_exp": lambda x: torch.floor(x.exp()),
    "round_decimals": lambda x: x.round(decimals=1),
    "round_decimals_plus": lambda x: x.round(decimals=1) + 0,
    "round_": lambda x: (x * 2).round_(),
    "sign_": lambda x: (x * 2).sign_(),
    "floor_": lambda x: (x + 1).floor_(),
    "trunc_sin": lambda x: torch.trunc(x.sin()),
    "where_floor_sign": lambda x: torch.where(x > 0, torch.floor(x * 2), x.sign()),
    "mixed": lambda x: torch.sign(x * 2) * x,
}


@pytest.mark.parametrize("name", sorted(_ZERO_GRAD))
def test_zero_gradient_ops_output_requires_grad(name):
    fn = _ZERO_GRAD[name]
    x = torch.randn(4, 3, requires_grad=True)
    xt = x.detach().clone().requires_grad_()
    e, t = fn(x), thunder.jit(fn)(xt)
    torch.testing.assert_close(t, e)
    assert t.requires_grad == e.requires_grad
    g = torch.randn_like(e)
    e.backward(g)
    t.backward(g)
    torch.testing.assert_close(xt.grad, x.grad)


def test_vector_norm_ord_0_requires_grad():
    fn = lambda x: torch.linalg.vector_norm(x, ord=0) * 2  # noqa: E731
    x = torch.randn(3, 3, requires_grad=True)
    e, t = fn(x), thunder.jit(fn)(x)
    torch.testing.assert_close(t, e)
    assert t.requires_grad and e.requires_grad
    t.backward()  # eager leaves x.grad None; a zero gradient here
    assert x.grad is None or not x.grad.any()


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.argmax(x * 2),
        lambda x: (x * 2) > 0,
        lambda x: ((x * 2) > 0).float(),
        lambda x: (x * 2).int(),
        lambda x: torch.zeros_like(x * 2),
        lambda x: (x * 2).detach(),
    ],
)
def test_integer_and_detached_results_stay_without_grad(fn):
    x = torch.randn(4, requires_grad=True)
    e, t = fn(x), thunder.jit(fn)(x)
    assert not e.requires_grad and not t.requires_grad
    torch.testing.assert_close(t, e)


# 3. An in-place random draw on an input, a decision on data, the input returned.


def _normal_then_check(p):
    p.normal_()
    if (p > 100).any():
        p.zero_()
    return p


def _trunc_normal(p):
    return torch.nn.init.trunc_normal_(p, std=0.02)


@pytest.mark.parametrize("fn", [_normal_then_check, _trunc_normal])
def test_random_write_into_input_then_decision(fn):
    jf = thunder.jit(fn)
    for seed in (0, 1):
        p_e, p_t = torch.randn(5), torch.randn(5)
        torch.manual_seed(seed)
        e = fn(p_e)
        torch.manual_seed(seed)
        t = jf(p_t)
        assert t is p_t and e is p_e
        torch.testing.assert_close(p_t, p_e)


def test_random_write_then_failing_decision_draws_eagers_numbers():
    # Across seeds the decision goes both ways: a failing check puts the generator back.
    def fn(p):
        p.normal_()
        if (p > 1).any():
            p.zero_()
        return p * 2

    jf = thunder.jit(fn)
    for seed in range(6):
        p = torch.randn(4)
        p_e, p_t = p.clone(), p.clone()
        torch.manual_seed(seed)
        e = fn(p_e)
        after_e = torch.rand(2)
        torch.manual_seed(seed)
        t = jf(p_t)
        after_t = torch.rand(2)
        torch.testing.assert_close(t, e)
        torch.testing.assert_close(p_t, p_e)
        torch.testing.assert_close(after_t, after_e)
