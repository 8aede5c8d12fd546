"""A call that runs split compiles its frames with dynamo's settings that keep it equal to eager
(``thunder.dynamo.split_program``), set only while dynamo compiles them: hooks added later reach
the call, dynamo's own rewrites of in-place ops stay off, dynamo's failures run natively; the
caller's config and the user's own ``torch.compile`` programs never see those settings."""

from __future__ import annotations

import threading
import warnings

import pytest
import torch
import torch._dynamo

import thunder


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return fn(*args, **kwargs)


@thunder.run_natively
def _noted(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone()


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        return torch.relu(h) + _noted(h)


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_hooks_added_after_the_first_split_calls_reach_later_calls(cache):
    model = _Block()
    jm = thunder.jit(model, cache=cache)
    for _ in range(2):
        x = torch.randn(3, 4)
        torch.testing.assert_close(_quiet(jm, x), model(x))
    handle = model.lin.register_forward_hook(lambda m, i, o: o * 3)
    for _ in range(2):
        x = torch.randn(3, 4)
        torch.testing.assert_close(_quiet(jm, x), model(x))
    handle.remove()
    x = torch.randn(3, 4)
    torch.testing.assert_close(_quiet(jm, x), model(x))


def test_in_place_ops_on_overlapping_operands_keep_eager_kernels_in_a_split():
    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.clone()
        a.addcmul_(a, b, value=0.5)  # reads `a` while writing it
        a = _noted(a)
        a.addcdiv_(a, b.abs() + 1, value=2.0)
        return a

    jf = thunder.jit(f)
    for _ in range(3):
        a, b = torch.randn(5), torch.randn(5)
        torch.testing.assert_close(_quiet(jf, a, b), f(a, b), rtol=0, atol=0)


def test_the_callers_dynamo_config_is_untouched_around_split_calls():
    config = torch._dynamo.config
    before = (
        config.suppress_errors,
        config.enable_dynamo_decompositions,
        config.skip_nnmodule_hook_guards,
    )
    seen = []

    @thunder.run_natively
    def look(t: torch.Tensor) -> torch.Tensor:
        # The native part runs with the caller's settings, not the compile's.
        seen.append((config.suppress_errors, config.enable_dynamo_decompositions))
        return t + 1

    jf = thunder.jit(lambda t: look(t * 2) * 3)
    for _ in range(3):
        t = torch.randn(4)
        torch.testing.assert_close(_quiet(jf, t), (t * 2 + 1) * 3)
    after = (
        config.suppress_errors,
        config.enable_dynamo_decompositions,
        config.skip_nnmodule_hook_guards,
    )
    assert after == before
    assert seen == [before[:2]] * 3


def test_a_users_own_torch_compile_keeps_dynamos_errors_after_split_calls():
    jf = thunder.jit(lambda t: _noted(t * 2) + 1)
    t = torch.randn(4)
    torch.testing.assert_close(_quiet(jf, t), t * 2 + 1)

    def failing_backend(gm, example_inputs):
        raise ValueError("the user's backend fails")

    compiled = torch.compile(lambda t: t.sin() * 2, backend=failing_backend)
    with pytest.raises(Exception, match="the user's backend fails"):
        compiled(t)


def test_split_calls_from_threads_equal_eager():
    model = _Block()
    jm = thunder.jit(model)
    results: list[bool] = []

    def work() -> None:
        for _ in range(3):
            x = torch.randn(2, 4)
            results.append(torch.allclose(_quiet(jm, x), model(x)))

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 6


_NUMPY_DRAWS = {
    "randn": lambda np: np.random.randn(4),
    "rand": lambda np: np.random.rand(4),
    "normal": lambda np: np.random.normal(1.0, 2.0, size=4),
    "randint": lambda np: np.random.randint(0, 10, size=4),
    "uniform": lambda np: np.random.uniform(-1.0, 1.0, 4),
}


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
@pytest.mark.parametrize("draw", sorted(_NUMPY_DRAWS))
def test_numpy_random_arrays_in_a_split_come_from_numpys_generator(draw, cache):
    np = pytest.importorskip("numpy")
    make = _NUMPY_DRAWS[draw]

    def f(x: torch.Tensor) -> torch.Tensor:
        return x + torch.from_numpy(make(np).astype("float32"))

    jf = thunder.jit(f, cache=cache)
    for seed in range(3):
        x = torch.randn(4)
        np.random.seed(seed)
        torch.manual_seed(0)
        expected, numpy_after, torch_after = f(x), np.random.get_state()[2], torch.get_rng_state()
        np.random.seed(seed)
        torch.manual_seed(0)
        got = _quiet(jf, x)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        assert np.random.get_state()[2] == numpy_after
        assert torch.equal(torch.get_rng_state(), torch_after)
