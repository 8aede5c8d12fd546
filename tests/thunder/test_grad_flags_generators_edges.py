"""Edges compared with eager PyTorch on fresh random inputs, over several calls and both caches:

1. requires_grad of results that read a tensor requiring grad for its metadata only
   (``i.to(p)``, the constant of ``broadcast_tensors``, torch.distributions built on them), and
   of ops whose results eager marks though no gradient reaches the input (a count of nonzeros);
   ``.grad`` stays None where eager's does.
2. In-place random fills given a ``generator=`` (``exponential_``, ``cauchy_``...): compiled,
   drawing eager's numbers from that generator, without a "please report" warning or a traceback
   on stderr; an in-place fill eager refuses raises eager's error, quietly.
3. ``torch.special.round`` and ``round(decimals=...)`` of integer tensors raise as eager.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributions as D

import thunder

torch.set_num_threads(1)

CACHES = ("constant values", "symbolic values")


def _rg(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype, requires_grad=True)


# name: (fn, make inputs, random) -- random: both runs start from the same seed.
GRAD_FLAG_CASES = {
    "int_to_other": (lambda i, p: i.to(p), lambda: (torch.randint(0, 4, (3,)), _rg(3)), False),
    "double_to_other": (lambda x, p: x.to(p), lambda: (torch.randn(3).double(), _rg(3)), False),
    "one_hot_to_other": (
        lambda i, p: torch.nn.functional.one_hot(i, 4).to(p),
        lambda: (torch.randint(0, 4, (3,)), _rg(3, 4)),
        False,
    ),
    "mask_to_other": (lambda x: (x.relu() > 0).to(x), lambda: (_rg(5),), False),
    "to_other_self_grad": (
        lambda x, p: x.to(p),
        lambda: (_rg(3), _rg(3, dtype=torch.float64)),
        False,
    ),
    "type_as": (lambda i, p: i.type_as(p), lambda: (torch.randint(0, 4, (3,)), _rg(3)), False),
    "broadcast_constant": (
        lambda m: torch.broadcast_tensors(m, torch.tensor(1.0))[1],
        lambda: (_rg(3),),
        False,
    ),
    "broadcast_input_no_grad": (
        lambda x, p: torch.broadcast_tensors(x, p)[0],
        lambda: (torch.randn(3), _rg(2, 3)),
        False,
    ),
    "broadcast_both": (
        lambda x, p: torch.broadcast_tensors(x, p)[1] * 2,
        lambda: (torch.randn(3), _rg(2, 1)),
        False,
    ),
    "broadcast_under_no_grad": (lambda m: _no_grad_scaled(m), lambda: (_rg(3),), False),
    "meshgrid": (
        lambda x, p: torch.meshgrid(x, p, indexing="ij")[0] + 1,
        lambda: (torch.randn(3), _rg(2)),
        False,
    ),
    "meshgrid_grad": (
        lambda x, p: torch.meshgrid(x, p, indexing="xy")[1],
        lambda: (torch.randn(3), _rg(2)),
        False,
    ),
    "expand_as": (lambda x, p: x.expand_as(p), lambda: (torch.randn(1, 3), _rg(2, 3)), False),
    "view_as": (lambda x, p: x.view_as(p), lambda: (torch.randn(6), _rg(2, 3)), False),
    "new_zeros": (lambda p: p.new_zeros(3), lambda: (_rg(3),), False),
    "zeros_like": (lambda p: torch.zeros_like(p) + 1, lambda: (_rg(3),), False),
    "split": (lambda x: torch.split(x, 2)[1], lambda: (_rg(5),), False),
    "normal_entropy": (lambda m: D.Normal(m, 1.0).entropy(), lambda: (_rg(3),), False),
    "normal_stddev": (lambda m: D.Normal(m, 1.0).stddev, lambda: (_rg(3),), False),
    "normal_entropy_grad": (lambda s: D.Normal(0.0, s.exp()).entropy(), lambda: (_rg(3),), False),
    "independent_entropy": (
        lambda m: D.Independent(D.Normal(m, torch.ones(3)), 1).entropy(),
        lambda: (_rg(3),),
        False,
    ),
    "one_hot_categorical_sample": (
        lambda logits: D.OneHotCategorical(logits=logits).sample(),
        lambda: (_rg(4),),
        True,
    ),
    "binomial_sample": (
        lambda logits: D.Binomial(10, logits=logits).sample((2,)),
        lambda: (_rg(3),),
        True,
    ),
    "vector_norm_0": (lambda x: torch.linalg.vector_norm(x, 0), lambda: (_rg(4),), False),
    "vector_norm_0_complex": (
        lambda z: torch.linalg.vector_norm(z, 0),
        lambda: (_rg(4, dtype=torch.complex128),),
        False,
    ),
    "vector_norm_0_complex_dim": (
        lambda z: torch.linalg.vector_norm(z, 0, dim=1, keepdim=True),
        lambda: (_rg(3, 4, dtype=torch.complex64),),
        False,
    ),
    "norm_p0_complex": (
        lambda z: torch.norm(z, 0),
        lambda: (_rg(4, dtype=torch.complex128),),
        False,
    ),
    "norm_p0_plus_abs": (
        lambda z: torch.norm(z, 0) + z.abs().sum(),
        lambda: (_rg(4, dtype=torch.complex128),),
        False,
    ),
}


def _no_grad_scaled(m):
    c, _ = torch.broadcast_tensors(torch.tensor(10.0), m)
    with torch.no_grad():
        return c * 2


def _run_backward(out, inputs):
    """``out.sum().backward()``: the inputs' grads (None-ness kept), or the error's type."""
    for t in inputs:
        t.grad = None
    try:
        (out.real if out.is_complex() else out).sum().backward()
    except RuntimeError:
        return "RuntimeError"
    return [None if t.grad is None else t.grad.clone() for t in inputs]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", sorted(GRAD_FLAG_CASES))
def test_requires_grad_and_grads_like_eager(name, cache):
    fn, make, random = GRAD_FLAG_CASES[name]
    jf = thunder.jit(fn, cache=cache)
    for call in range(3):
        torch.manual_seed(100 + call)
        inputs = make()
        grad_inputs = [t for t in inputs if t.requires_grad]
        torch.manual_seed(call)
        expected = fn(*inputs)
        expected_state = torch.get_rng_state()
        torch.manual_seed(call)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = jf(*inputs)
        if random:
            assert torch.equal(torch.get_rng_state(), expected_state)
        torch.testing.assert_close(actual, expected)
        assert actual.requires_grad == expected.requires_grad, (name, call)
        if not actual.dtype.is_floating_point and not actual.is_complex():
            continue
        expected_grads = _run_backward(expected, grad_inputs)
        actual_grads = _run_backward(actual, grad_inputs)
        if isinstance(expected_grads, str):
            assert actual_grads == expected_grads, (name, call)
            continue
        assert not isinstance(actual_grads, str), (name, call)
        for e, a in zip(expected_grads, actual_grads):
            assert (a is None) == (e is None), (name, call, e, a)
            if e is not None:
                torch.testing.assert_close(a, e)


@pytest.mark.parametrize("cache", CACHES)
def test_metadata_only_input_keeps_grad_none_in_a_loss(cache):
    """A parameter read only for its dtype: no gradient (eager's None), so an optimizer with
    weight decay leaves it alone."""

    def loss(i, p, w):
        return (torch.nn.functional.one_hot(i, 4).to(p) * w).sum()

    jf = thunder.jit(loss, cache=cache)
    for _ in range(3):
        i = torch.randint(0, 4, (3,))
        p, w = _rg(3, 4), _rg(3, 4)
        loss(i, p, w).backward()
        expected_w = w.grad
        assert p.grad is None
        w.grad = None
        jf(i, p, w).backward()
        assert p.grad is None
        torch.testing.assert_close(w.grad, expected_w)


def _only_p(i, p):
    return i.to(p).sum()


@pytest.mark.parametrize("cache", CACHES)
def test_backward_of_metadata_only_result_raises_like_eager(cache):
    jf = thunder.jit(_only_p, cache=cache)
    for _ in range(2):
        i, p = torch.randint(0, 4, (3,)), _rg(3)
        with pytest.raises(RuntimeError, match="does not require grad"):
            _only_p(i, p).backward()
        with pytest.raises(RuntimeError, match="does not require grad"):
            jf(i, p).backward()
        assert p.grad is None


# 2. In-place random fills with a generator.

GENERATOR_FILLS = {
    "exponential_": lambda x, g: x.exponential_(2.0, generator=g),
    "geometric_": lambda x, g: x.geometric_(0.3, generator=g),
    "cauchy_": lambda x, g: x.cauchy_(generator=g),
    "log_normal_": lambda x, g: x.log_normal_(0.5, 2.0, generator=g),
    "normal_": lambda x, g: x.normal_(1.0, 2.0, generator=g),
    "uniform_": lambda x, g: x.uniform_(-1, 1, generator=g),
    "random_": lambda x, g: x.random_(0, 10, generator=g),
    "bernoulli_": lambda x, g: x.bernoulli_(0.3, generator=g),
    "exponential_then_default": lambda x, g: x.exponential_(generator=g) + torch.rand(4),
    "chained": lambda x, g: x.exponential_(generator=g).cauchy_(generator=g) * 2,
}


def _no_report_warnings(record):
    texts = [str(w.message) for w in record]
    assert not [t for t in texts if "please report" in t or "ran eagerly" in t], texts


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", sorted(GENERATOR_FILLS))
def test_in_place_fill_with_generator_like_eager(name, cache, capfd):
    fn = GENERATOR_FILLS[name]
    jf = thunder.jit(fn, cache=cache)
    g_eager, g_jit = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    for call in range(3):
        x_eager, x_jit = torch.zeros(4), torch.zeros(4)
        torch.manual_seed(call)
        expected = fn(x_eager, g_eager)
        expected_state = torch.get_rng_state()
        torch.manual_seed(call)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            actual = jf(x_jit, g_jit)
        _no_report_warnings(record)
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
        torch.testing.assert_close(x_jit, x_eager, rtol=0, atol=0)
        assert torch.equal(g_jit.get_state(), g_eager.get_state())
        assert torch.equal(torch.get_rng_state(), expected_state)
    assert "Traceback" not in capfd.readouterr().err


def test_fill_with_generator_of_intermediate_keeps_gradients():
    def fn(x, g):
        y = x * 1
        y.log_normal_(generator=g)
        return (y * x).sum()

    jf = thunder.jit(fn)
    for _ in range(3):
        x = _rg(3)
        g = torch.Generator().manual_seed(0)
        expected = fn(x, g)
        expected.backward()
        expected_grad, x.grad = x.grad, None
        g.manual_seed(0)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            actual = jf(x, g)
        _no_report_warnings(record)
        actual.backward()
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(x.grad, expected_grad)


def _normal_negative_std(x):
    return x.normal_(0, -1)


def test_refused_fill_raises_eagers_error_quietly(capfd):
    jf = thunder.jit(_normal_negative_std)
    with pytest.raises(RuntimeError) as eager_error:
        _normal_negative_std(torch.zeros(3))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError) as jit_error:
            jf(torch.zeros(3))
    _no_report_warnings(record)
    assert str(jit_error.value) == str(eager_error.value)
    assert "Traceback" not in capfd.readouterr().err


# 3. round of integer tensors.

ROUNDS = {
    "round": torch.round,
    "method": lambda t: t.round(),
    "special_round": torch.special.round,
    "special_round_decimals": lambda t: torch.special.round(t, decimals=1),
    "round_decimals_0": lambda t: torch.round(t, decimals=0),
    "round_decimals_neg": lambda t: t.round(decimals=-1),
    "round_in_place": lambda t: t.clone().round_(),
}


def _outcome(fn, x):
    try:
        return fn(x), None
    except Exception as e:  # noqa: BLE001 -- the error type is what is compared
        return None, (type(e), str(e))


@pytest.mark.parametrize(
    "dtype", [torch.int64, torch.int32, torch.uint8, torch.bool, torch.float32]
)
@pytest.mark.parametrize("name", sorted(ROUNDS))
def test_round_of_integers_like_eager(name, dtype):
    fn = ROUNDS[name]
    jf = thunder.jit(fn)
    for _ in range(2):
        x = (torch.randn(5) * 20).to(dtype)
        expected, expected_error = _outcome(fn, x)
        actual, actual_error = _outcome(jf, x)
        if expected_error is not None:
            assert actual_error is not None and issubclass(actual_error[0], expected_error[0])
            assert actual_error[1] == expected_error[1]
        else:
            assert actual_error is None, actual_error
            torch.testing.assert_close(actual, expected, rtol=0, atol=0)
