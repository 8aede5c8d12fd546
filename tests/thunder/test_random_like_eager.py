"""Under one ``torch.manual_seed`` a jitted program draws eager's random numbers: outputs,
gradients and the generator's state after the call are bit-equal to eager's, on the first and on
cached calls. RNG state inside a program (get/set_rng_state, fork_rng, manual_seed) runs when the
program runs; ``torch.Generator`` objects are refused."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from runs_by_torch import call_eagerly

import thunder

_SDPA = (slice(0, 2), slice(0, 2), slice(0, 4), slice(0, 3))

CASES = {
    "F.dropout": lambda x: F.dropout(x, 0.5, True),
    "F.dropout_p03": lambda x: F.dropout(x * 2, 0.3, True) + 1,
    "torch.dropout": lambda x: torch.dropout(x, 0.3, True),
    "nn.Dropout": torch.nn.Dropout(0.4),
    "F.dropout1d": lambda x: F.dropout1d(x[0], 0.5, True),
    "F.dropout2d": lambda x: F.dropout2d(x, 0.5, True),
    "F.dropout3d": lambda x: F.dropout3d(x, 0.5, True),
    "F.alpha_dropout": lambda x: F.alpha_dropout(x, 0.5, True),
    "F.feature_alpha_dropout": lambda x: F.feature_alpha_dropout(x, 0.5, True),
    "sdpa_dropout": lambda x: F.scaled_dot_product_attention(
        x[_SDPA], x[_SDPA] * 2, x[_SDPA] + 1, dropout_p=0.5
    ),
    "two_dropouts": lambda x: F.dropout(F.dropout(x, 0.2, True).sin(), 0.6, True),
    "bernoulli": lambda x: torch.bernoulli(torch.sigmoid(x)),
    "Tensor.bernoulli": lambda x: torch.sigmoid(x).bernoulli(),
    "rand": lambda x: torch.rand(3, 4) + x.sum(),
    "rand_like": lambda x: torch.rand_like(x) * x,
    "randn": lambda x: torch.randn(3, 4) + x.sum(),
    "randn_like": lambda x: torch.randn_like(x) * x,
    "randint": lambda x: torch.randint(0, 10, (3, 4)) + x.sum(),
    "randint_high": lambda x: torch.randint(7, (5,)) * x.sum(),
    "randperm": lambda x: torch.randperm(10) + x.sum(),
    "multinomial": lambda x: torch.multinomial(x.abs().reshape(-1, 3)[:4], 2),
    "multinomial_replacement": lambda x: torch.multinomial(
        x.abs().reshape(-1, 3)[:4], 5, replacement=True
    ),
    "normal_tensors": lambda x: torch.normal(x, x.abs()),
    "normal_floats": lambda x: torch.normal(0.0, 1.0, (3, 4)) + x.sum(),
    "uniform_": lambda x: x.detach().clone().uniform_(),
    "normal_": lambda x: x.detach().clone().normal_(),
    "bernoulli_": lambda x: x.detach().clone().bernoulli_(0.3),
    "random_": lambda x: x.detach().clone().random_(0, 10),
    "exponential_": lambda x: x.detach().clone().exponential_(),
    "unused_draw": lambda x: (torch.rand(5), F.dropout(x, 0.5, True), x * 2)[2],
}

DIFFERENTIABLE = [
    k
    for k in CASES
    if "dropout" in k or k in ("rand_like", "randn_like", "normal_tensors", "unused_draw")
]


def _run(fn, x, grad: bool):
    x = x.clone().requires_grad_(grad)
    torch.manual_seed(1234)
    out = fn(x)
    after = torch.rand(4)  # the generator's state after the call is eager's
    gx = None
    if grad and out.requires_grad:
        g = torch.randn(out.shape, generator=torch.Generator().manual_seed(7)).to(out.dtype)
        (gx,) = torch.autograd.grad(out, x, g, allow_unused=True)
    return out, after, gx


def _assert_bit_equal(got, want) -> None:
    for a, b in zip(got, want):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype == b.dtype and a.shape == b.shape
            assert torch.equal(a, b), (a, b)


@pytest.mark.parametrize("name", list(CASES))
def test_same_seed_same_numbers(name: str) -> None:
    fn = CASES[name]
    jfn = thunder.jit(fn)
    for _ in range(3):  # first call, then the cached program
        x = torch.randn(4, 6, 5, 3)
        with torch.no_grad():
            _assert_bit_equal(_run(jfn, x, False), _run(fn, x, False))
    assert thunder.cache_misses(jfn) == 1


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_same_seed_same_gradients(name: str) -> None:
    fn = CASES[name]
    jfn = thunder.jit(fn)
    for _ in range(3):
        x = torch.randn(4, 6, 5, 3)
        _assert_bit_equal(_run(jfn, x, True), _run(fn, x, True))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("p", [0.1, 1 / 3, 0.5, 0.9])
def test_dropout_dtypes_and_probabilities(dtype: torch.dtype, p: float) -> None:
    def fn(x):
        return F.dropout(x, p, True)

    jfn = thunder.jit(fn)
    x = torch.randn(37, 53, dtype=dtype)
    torch.manual_seed(0)
    want = fn(x)
    torch.manual_seed(0)
    assert torch.equal(jfn(x), want)


def test_dropout_backward_reuses_the_forward_mask() -> None:
    jfn = thunder.jit(lambda x: F.dropout(x, 0.5, True))
    x = torch.randn(64, 64, requires_grad=True)
    out = jfn(x)
    (gx,) = torch.autograd.grad(out, x, torch.ones_like(out))
    assert torch.equal(gx == 0, out == 0)  # zeroed where the forward zeroed, 2.0 elsewhere
    assert torch.equal(gx[out != 0], torch.full_like(gx[out != 0], 2.0))


def test_training_module_matches_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.Dropout(0.3), torch.nn.ReLU(), torch.nn.Linear(16, 2)
    )
    jmodel = thunder.jit(model)
    for _ in range(2):
        x = torch.randn(5, 8)
        results = []
        for m in (model, jmodel):
            model.zero_grad()
            torch.manual_seed(3)
            loss = m(x).square().sum()
            loss.backward()
            results.append((loss, model[0].weight.grad.clone(), torch.rand(2)))
        _assert_bit_equal(results[0], results[1])


def _state_roundtrip(x):
    s = torch.get_rng_state()
    a = torch.rand(3)
    torch.set_rng_state(s)
    return x + a + torch.rand(3)


def _fork(x):
    with torch.random.fork_rng():
        y = torch.rand(3)
    return x + y + torch.rand(3)


def _fork_dropout(x):
    with torch.random.fork_rng(devices=[]):
        y = F.dropout(x, 0.5, True)
    return F.dropout(y, 0.5, True)


def _seed_inside(x):
    torch.manual_seed(3)
    return x + torch.rand(3)


def _state_returned(x):
    return torch.get_rng_state(), x + torch.rand(3)


@pytest.mark.parametrize(
    "fn", [_state_roundtrip, _fork, _fork_dropout, _seed_inside, _state_returned]
)
def test_rng_state_inside_the_program(fn) -> None:
    jfn = thunder.jit(fn)
    for seed in range(3):  # the state is read when the program runs, never a constant
        x = torch.randn(3)
        results = []
        for f in (fn, jfn):
            torch.manual_seed(seed)
            out = f(x)
            out = out if isinstance(out, tuple) else (out,)
            results.append((*out, torch.rand(2)))
        _assert_bit_equal(results[0], results[1])
    assert thunder.cache_misses(jfn) == 1


def test_rng_state_inside_the_program_with_gradients() -> None:
    jfn = thunder.jit(_fork_dropout)
    x = torch.randn(4, 5)
    _assert_bit_equal(_run(jfn, x, True), _run(_fork_dropout, x, True))


def test_generator_objects_from_outside_are_drawn_from() -> None:
    """A generator passed in (an input, keyed by type and device: one program for every
    generator) or read from a module (guarded by identity: another one recompiles) is the object
    the compiled program draws from, on every call."""

    def fn(x, g):
        return x + torch.rand(3, generator=g)

    def inplace(x, g):
        return x.clone().uniform_(generator=g)

    for f in (fn, inplace):
        jf = thunder.jit(f)
        g1, g2 = torch.Generator(), torch.Generator()
        for g, seed in ((g1, 0), (g2, 1), (g1, 2), (g2, 0)):
            x = torch.randn(3)
            g.manual_seed(seed)
            want = f(x, g)
            g.manual_seed(seed)
            assert torch.equal(jf(x, g), want)
        assert thunder.compile_stats(jf).cache_misses == 1

    class Noisy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gen = torch.Generator().manual_seed(0)

        def forward(self, x):
            return x + torch.randn(3, generator=self.gen)

    m = Noisy()
    jm = thunder.jit(m)
    x = torch.randn(3)
    for gen in (m.gen, torch.Generator()):
        m.gen = gen
        gen.manual_seed(5)
        want = m(x)
        gen.manual_seed(5)
        assert torch.equal(jm(x), want)


def test_generator_made_inside_the_program_runs_eagerly() -> None:
    def fn(x):
        g = torch.Generator()
        return x + torch.rand(3, generator=g)

    x = torch.randn(3)  # a fresh generator draws the same numbers on every call: torch's
    torch.testing.assert_close(call_eagerly(thunder.jit(fn), x, match="Generator"), fn(x))


def test_default_generator_argument_draws_like_eager() -> None:
    def fn(x):
        return x + torch.rand(3, generator=torch.default_generator)

    jfn = thunder.jit(fn)
    for _ in range(2):
        x = torch.randn(3)
        torch.manual_seed(0)
        want = fn(x)
        torch.manual_seed(0)
        assert torch.equal(jfn(x), want)


def test_random_fill_of_a_tensor_that_requires_grad_keeps_its_flag() -> None:
    """``h.uniform_()`` on a computed tensor: eager's result still requires grad and gives the
    tensors before it zeros (torch's derivative of a fill); ``randint_like(w)`` carries none."""

    def fill(w):
        h = w * 2
        h.uniform_()
        return h

    def fill_then_use(w):
        h = w * 2
        h.normal_()
        return h * w

    def ints_like(w):
        return torch.randint_like(w, 10)

    def run(fn):
        torch.manual_seed(0)
        w = torch.randn(4, requires_grad=True)
        out = fn(w)
        if out.requires_grad:
            out.sum().backward()
        return out.detach(), out.requires_grad, w.grad

    for f in (fill, fill_then_use, ints_like):
        (out_e, flag_e, grad_e), (out_j, flag_j, grad_j) = run(f), run(thunder.jit(f))
        assert torch.equal(out_j, out_e) and flag_j == flag_e
        assert (grad_e is None) == (grad_j is None)
        if grad_e is not None:
            assert torch.equal(grad_j, grad_e)
