"""Random draws and context regions as eager's: one seed gives eager's numbers and leaves eager's
generator state, whatever the layout of the tensor a draw is laid out like, whether the draw's
op has a meta kernel or its result is used; grad mode switched inside the program reaches
nn.TransformerEncoder's nested-tensor path."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributions as D
import torch.nn as nn
import torch.nn.functional as F

import thunder

CACHES = ["constant values", "symbolic values"]


def _same_draws(fn, make_args, cache, calls=3, grad=False):
    """fn under thunder.jit gives eager's values (and gradients) and generator state for the
    same seed, on fresh inputs each call."""
    jfn = thunder.jit(fn, cache=cache)
    for i in range(calls):
        args = make_args(i)
        eargs = [a.detach().clone().requires_grad_(grad) for a in args]
        jargs = [a.detach().clone().requires_grad_(grad) for a in args]
        torch.manual_seed(10 + i)
        expected = fn(*eargs)
        eager_state = torch.get_rng_state()
        torch.manual_seed(10 + i)
        actual = jfn(*jargs)
        assert torch.equal(torch.get_rng_state(), eager_state), f"call {i}: generator state"
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
        if grad:
            weights = torch.linspace(0.5, 1.5, expected.numel()).reshape(expected.shape)
            (expected * weights).sum().backward()
            (actual * weights).sum().backward()
            for e, a in zip(eargs, jargs):
                torch.testing.assert_close(a.grad, e.grad)


def _transposed(i):
    return (torch.randn(6, 4 + i).t(),)


def _channels_last(i):
    return (torch.randn(2, 3, 4, 2 + i).contiguous(memory_format=torch.channels_last),)


def _permuted(i):
    return (torch.randn(3, 4, 2 + i).permute(2, 0, 1),)


LAYOUTS = {"transposed": _transposed, "channels_last": _channels_last, "permuted": _permuted}

# Each fills a tensor laid out like its input in memory order in eager.
DRAWS_LIKE_INPUT = {
    "dropout": lambda x: F.dropout(x, 0.5),
    "dropout_after_op": lambda x: F.dropout(x * 2, 0.3) + 1,
    "dropout_inplace": lambda x: F.dropout(x * 1, 0.5, inplace=True),
    "two_dropouts": lambda x: F.dropout(x, 0.5) + F.dropout(x.sin(), 0.2),
    "alpha_dropout": lambda x: F.alpha_dropout(x, 0.5, True),
    "feature_alpha_dropout": lambda x: F.feature_alpha_dropout(x, 0.5, True),
    "rrelu": lambda x: F.rrelu(x, training=True),
    "rand_like": lambda x: torch.rand_like(x) + x,
    "randn_like": lambda x: torch.randn_like(x, dtype=torch.float64) * x,
    "bernoulli_p_inplace": lambda x: (x * 1).bernoulli_(0.3),
    "empty_like_bernoulli_": lambda x: torch.empty_like(x).bernoulli_(0.5) * x,
    "uniform_": lambda x: (x * 1).uniform_(),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", sorted(DRAWS_LIKE_INPUT))
def test_draws_in_eagers_memory_order(name, layout, cache):
    _same_draws(DRAWS_LIKE_INPUT[name], LAYOUTS[layout], cache)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_dropout_gradients_of_non_contiguous_input(layout):
    _same_draws(lambda x: F.dropout(x, 0.4) * x, LAYOUTS[layout], "constant values", grad=True)


@pytest.mark.parametrize("cache", CACHES)
def test_transformer_layer_dropout_like_eager(cache):
    # batch_first: eager's attention output is a transposed view, dropped out in memory order.
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.3, batch_first=True)
    jlayer = thunder.jit(layer, cache=cache)
    for i in range(3):
        x = torch.randn(2, 5 + i, 8)
        torch.manual_seed(i)
        expected = layer(x)
        expected.sum().backward()
        eager_grads = [p.grad.clone() for p in layer.parameters()]
        layer.zero_grad()
        torch.manual_seed(i)
        actual = jlayer(x)
        actual.sum().backward()
        torch.testing.assert_close(actual, expected)
        for p, g in zip(layer.parameters(), eager_grads):
            torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-5)
        layer.zero_grad()


# Random ops without a meta kernel (their outputs' sizes are read from a run on data).
NO_META_DRAWS = {
    "dirichlet": lambda c: D.Dirichlet(c).sample(),
    "beta": lambda c: D.Beta(c, c + 1).sample(),
    "binomial": lambda c: torch.binomial(torch.full_like(c, 5.0), c / 2),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", sorted(NO_META_DRAWS))
def test_draw_without_meta_kernel_draws_once(name, cache):
    _same_draws(NO_META_DRAWS[name], lambda i: (torch.rand(4 + i % 2) + 0.5,), cache)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", sorted(NO_META_DRAWS))
def test_unused_draw_without_meta_kernel_still_draws(name, cache):
    draw = NO_META_DRAWS[name]

    def fn(c):
        draw(c)  # unused: eager's generator moves all the same
        return torch.rand(3) + c.sum()

    _same_draws(fn, lambda i: (torch.rand(4) + 0.5,), cache)


class _NoGradEncoder(nn.Module):
    def __init__(self, inside: str) -> None:
        super().__init__()
        self.inside = inside
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 1)

    def forward(self, a, k):
        if self.inside == "set_grad_enabled":
            torch.set_grad_enabled(False)
            try:
                return self.enc(a, src_key_padding_mask=k)
            finally:
                torch.set_grad_enabled(True)
        if self.inside == "inference_mode":
            with torch.inference_mode():
                return self.enc(a, src_key_padding_mask=k).clone()
        with torch.no_grad():
            return self.enc(a, src_key_padding_mask=k)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("inside", ["no_grad", "set_grad_enabled", "inference_mode"])
def test_encoder_nested_path_with_grad_off_inside(inside, cache):
    torch.manual_seed(0)
    m = _NoGradEncoder(inside).eval()
    jm = thunder.jit(m, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(3):
            a = torch.randn(2, 5, 8)
            k = torch.tensor([[False] * 5, [False] * (2 + i) + [True] * (3 - i)])
            expected = m(a, k)
            actual = jm(a, k)
            assert torch.equal(actual[1, 2 + i :], torch.zeros_like(actual[1, 2 + i :]))
            torch.testing.assert_close(actual, expected)


class _CheckpointedNorm(nn.Module):
    """torchvision DenseNet's memory-efficient layer: batch norm inside a checkpoint."""

    def __init__(self, reentrant: bool, counted: bool) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(4)
        self.conv = nn.Conv2d(4, 4, 1)
        self.reentrant = reentrant
        self.counted = counted
        self.calls = 0

    def bn_function(self, *inputs):
        if self.counted:
            self.calls += 1
        return self.conv(torch.relu(self.norm(torch.cat(inputs, 1))))

    def forward(self, a, b):
        return torch.utils.checkpoint.checkpoint(
            self.bn_function, a, b, use_reentrant=self.reentrant
        )


@pytest.mark.parametrize("counted", [False, True])
@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpointed_effects_repeat_in_backward_as_eager(reentrant, counted):
    torch.manual_seed(0)
    m = _CheckpointedNorm(reentrant, counted)
    jm_module = _CheckpointedNorm(reentrant, counted)
    jm_module.load_state_dict(m.state_dict())
    jm = thunder.jit(jm_module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(3):
            a = torch.randn(2, 2, 3, 3, requires_grad=True)
            b = torch.randn(2, 2, 3, 3, requires_grad=True)
            ja, jb = (t.detach().clone().requires_grad_() for t in (a, b))
            expected = m(a, b)
            actual = jm(ja, jb)
            torch.testing.assert_close(actual, expected)
            expected.sum().backward()
            actual.sum().backward()
            torch.testing.assert_close(ja.grad, a.grad)
            for key, value in m.state_dict().items():
                torch.testing.assert_close(jm_module.state_dict()[key], value, msg=key)
            assert jm_module.calls == m.calls
    if not counted:  # in eval mode nothing is written: the region is compiled, no warning
        m.eval()
        jm_module.eval()
        x = torch.randn(2, 2, 3, 3, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            torch.testing.assert_close(jm(x, x), m(x, x))


@pytest.mark.parametrize("cache", CACHES)
def test_checkpoint_without_effects_stays_compiled(cache):
    def block(x, w):
        return torch.relu(x @ w).sin()

    def fn(x, w):
        return torch.utils.checkpoint.checkpoint(block, x, w, use_reentrant=False).sum()

    jfn = thunder.jit(fn, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: nothing runs eagerly
        for i in range(3):
            x = torch.randn(3 + i, 4, requires_grad=True)
            w = torch.randn(4, 4, requires_grad=True)
            jx, jw = (t.detach().clone().requires_grad_() for t in (x, w))
            fn(x, w).backward()
            jfn(jx, jw).backward()
            torch.testing.assert_close(jx.grad, x.grad)
            torch.testing.assert_close(jw.grad, w.grad)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_bernoulli_like_prim_draws_in_memory_order(layout):
    from thunder_executors import transform_for_execution
    from thunder_ir import dtypes, prims, trace_function

    (x,) = LAYOUTS[layout](0)
    program = transform_for_execution(
        trace_function(lambda t: prims.bernoulli_like(t, 0.3, dtype=dtypes.float64), x)
    ).python_callable()
    torch.manual_seed(5)
    got = program(x)
    torch.manual_seed(5)
    want = torch.empty_like(x, dtype=torch.float64).bernoulli_(0.3)
    assert torch.equal(got, want)


class _CachesASize(torch.nn.Module):
    """A checkpointed body that caches a size on the module (Swin's window size): eager's
    recompute writes the same value again, which nobody can see."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.window = 7

    def body(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] <= self.window:
            self.window = x.shape[0]
        return self.lin(x).tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint(self.body, x, use_reentrant=False)


def test_checkpointed_body_writing_the_same_value_again_stays_compiled() -> None:
    torch.manual_seed(0)
    m, me = _CachesASize(), _CachesASize()
    me.load_state_dict(m.state_dict())
    jm = thunder.jit(m)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager run, no warning
        for rows in (5, 3, 3):
            x = torch.randn(rows, 4, requires_grad=True)
            xe = x.detach().clone().requires_grad_()
            jm(x).sum().backward()
            me(xe).sum().backward()
            torch.testing.assert_close(x.grad, xe.grad)
            assert m.window == me.window
    for p, q in zip(m.parameters(), me.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    assert thunder.compile_stats(jm).eager_fallbacks == 0
