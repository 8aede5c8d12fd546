"""Ambient torch state: default dtype, inference mode, autocast (around the call and inside the
function), and activation checkpointing, each against eager torch."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
import torch.utils.checkpoint as torch_checkpoint
from runs_by_torch import call_eagerly, call_split

import thunder

BF16 = {"atol": 2e-2, "rtol": 2e-2}


@contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def factories_and_promotion(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.zeros(3), a * 2.5


def test_default_dtype_is_part_of_the_key() -> None:
    jfn = thunder.jit(factories_and_promotion)
    ints = torch.arange(4)
    for dtype in (torch.float32, torch.float64, torch.float32, torch.float64):
        with default_dtype(dtype):
            expected = factories_and_promotion(ints)
            got = jfn(ints)
        for e, g in zip(expected, got):
            assert g.dtype == e.dtype == dtype
            torch.testing.assert_close(g, e)
    assert thunder.compile_stats(jfn).compilations == 2
    with default_dtype(torch.float64):
        assert thunder.compile_stats(jfn).last_recompile_reason is not None


def test_recompile_reason_names_the_default_dtype() -> None:
    jfn = thunder.jit(factories_and_promotion)
    jfn(torch.arange(2))
    with default_dtype(torch.float64):
        jfn(torch.arange(2))
    reason = thunder.compile_stats(jfn).last_recompile_reason
    assert reason is not None
    assert "default dtype (torch.get_default_dtype()): torch.float32 -> torch.float64" in reason


def test_recompile_limit_warning_names_the_default_dtype() -> None:
    jfn = thunder.jit(factories_and_promotion, recompile_limit=1)
    jfn(torch.arange(2))
    with default_dtype(torch.float64), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = jfn(torch.arange(2))
    assert out[0].dtype == torch.float64  # run eagerly, correctly
    assert any("default dtype" in str(w.message) for w in caught)


def scale(a: torch.Tensor) -> torch.Tensor:
    return (a * 2).sin()


def test_inference_mode_then_grad() -> None:
    jfn = thunder.jit(scale)
    a = torch.randn(3, requires_grad=True)
    with torch.inference_mode():
        out = jfn(a)
        assert out.is_inference()
        torch.testing.assert_close(out, scale(a))
    out = jfn(a)
    assert not out.is_inference()
    out.sum().backward()
    assert a.grad is not None
    torch.testing.assert_close(a.grad, 2 * torch.cos(2 * a.detach()))
    stats = thunder.compile_stats(jfn)
    assert stats.compilations == 2
    assert stats.last_recompile_reason is not None
    assert "inference mode" in stats.last_recompile_reason


def test_inference_mode_branch() -> None:
    def fn(a: torch.Tensor) -> torch.Tensor:
        return a + 1 if torch.is_inference_mode_enabled() else a - 1

    jfn = thunder.jit(fn)
    a = torch.zeros(2)
    torch.testing.assert_close(jfn(a), a - 1)
    with torch.inference_mode():
        torch.testing.assert_close(jfn(a), a + 1)
    torch.testing.assert_close(jfn(a), a - 1)


# -- autocast around the call ---------------------------------------------------------------------


def mlp(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    h = torch.nn.functional.linear(x, w1).relu()
    return (h @ w2).sum(-1)


def _mlp_inputs(requires_grad: bool) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    return (
        torch.randn(4, 8),
        torch.randn(16, 8, requires_grad=requires_grad),
        torch.randn(16, 8, requires_grad=requires_grad),
    )


def test_ambient_autocast_forward_matches_eager() -> None:
    jfn = thunder.jit(mlp)
    args = _mlp_inputs(False)
    plain = jfn(*args)
    assert plain.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = mlp(*args)
        got = jfn(*args)
    assert got.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(got, expected, **BF16)
    # and back outside autocast: float32 again
    torch.testing.assert_close(jfn(*args), plain)
    assert jfn(*args).dtype == torch.float32
    reason = thunder.compile_stats(jfn).last_recompile_reason
    assert reason is not None and "autocast" in reason


def test_ambient_autocast_gradients_match_eager() -> None:
    jfn = thunder.jit(mlp)
    x, w1, w2 = _mlp_inputs(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = mlp(x, w1, w2)
    expected.float().sum().backward()
    grads = (w1.grad.clone(), w2.grad.clone())  # type: ignore[union-attr]
    w1.grad = w2.grad = None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = jfn(x, w1, w2)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, expected, **BF16)
    got.float().sum().backward()
    assert w1.grad is not None and w2.grad is not None
    assert w1.grad.dtype == torch.float32
    torch.testing.assert_close(w1.grad, grads[0], **BF16)
    torch.testing.assert_close(w2.grad, grads[1], **BF16)


def test_ambient_autocast_dtype_is_part_of_the_key() -> None:
    jfn = thunder.jit(mlp)
    args = _mlp_inputs(False)
    for dtype in (torch.bfloat16, torch.float16, torch.bfloat16):
        with torch.autocast("cpu", dtype=dtype):
            assert jfn(*args).dtype == mlp(*args).dtype == dtype


def test_autocast_query_branch() -> None:
    def fn(a: torch.Tensor) -> torch.Tensor:
        return a * 2 if torch.is_autocast_enabled("cpu") else a * 3

    jfn = thunder.jit(fn)
    a = torch.ones(2)
    torch.testing.assert_close(jfn(a), a * 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        torch.testing.assert_close(jfn(a), a * 2)
    torch.testing.assert_close(jfn(a), a * 3)


# -- autocast inside the function -----------------------------------------------------------------


def inner_autocast(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        inside = torch.is_autocast_enabled("cpu")
    z = y.float() @ w
    return y, y.sin() + (1.0 if inside else 0.0), z


def test_autocast_block_inside_matches_eager() -> None:
    torch.manual_seed(0)
    x, w = torch.randn(4, 4), torch.randn(4, 4, requires_grad=True)
    expected = inner_autocast(x, w)
    sum(e.float().sum() for e in expected).backward()  # type: ignore[union-attr]
    grad = w.grad.clone()  # type: ignore[union-attr]
    w.grad = None
    got = thunder.jit(inner_autocast)(x, w)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e, **BF16)
    assert [g.dtype for g in got] == [torch.bfloat16, torch.bfloat16, torch.float32]
    torch.testing.assert_close(got[1], expected[0].sin() + 1)
    sum(g.float().sum() for g in got).backward()  # type: ignore[union-attr]
    assert w.grad is not None
    torch.testing.assert_close(w.grad, grad, **BF16)


def test_autocast_disabled_block_under_ambient_autocast() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = x @ w
        with torch.autocast("cpu", enabled=False):
            b = x @ w
        return a, b

    x, w = torch.randn(3, 3), torch.randn(3, 3)
    jfn = thunder.jit(fn)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = fn(x, w)
        got = jfn(x, w)
    assert [g.dtype for g in got] == [e.dtype for e in expected] == [torch.bfloat16, torch.float32]
    torch.testing.assert_close(got[1], expected[1])
    torch.testing.assert_close(got[0], expected[0], **BF16)


@torch.autocast("cpu", dtype=torch.bfloat16)
def decorated_matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x @ w


def test_autocast_decorator() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return decorated_matmul(x, w) + 1

    x, w = torch.randn(3, 3), torch.randn(3, 3)
    expected = fn(x, w)
    got = thunder.jit(fn)(x, w)
    assert got.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(got, expected, **BF16)


@pytest.mark.skipif(not hasattr(torch.cpu, "amp"), reason="no torch.cpu.amp")
def test_cpu_amp_autocast() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        with torch.cpu.amp.autocast(dtype=torch.bfloat16):
            return x @ w

    x, w = torch.randn(3, 3), torch.randn(3, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        expected = fn(x, w)
        got = thunder.jit(fn)(x, w)
    assert got.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(got, expected, **BF16)


def test_non_cpu_autocast_block_runs_split() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("xpu", dtype=torch.bfloat16):  # a device type other than the CPU
            return x @ x

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not torch.autocast("xpu", dtype=torch.bfloat16)._enabled:
            pytest.skip("this torch disables xpu autocast")
        x = torch.randn(2, 2)
        out = call_split(thunder.jit(fn), x, match=r"torch.autocast.*test_ambient_state")
        torch.testing.assert_close(out, fn(x))  # torch runs the block


def test_autocast_block_recompiles_when_ambient_autocast_changes() -> None:
    jfn = thunder.jit(inner_autocast)
    x, w = torch.randn(2, 2), torch.randn(2, 2)
    assert jfn(x, w)[2].dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, expected = jfn(x, w), inner_autocast(x, w)
    assert [g.dtype for g in got] == [e.dtype for e in expected]


# -- activation checkpointing --------------------------------------------------------------------


def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x @ w).sin().cos() * 2


def checkpointed(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    h = torch_checkpoint.checkpoint(block, x, w1, use_reentrant=False)
    h = torch_checkpoint.checkpoint(block, h, w2, use_reentrant=False)
    return h.sum()


def not_checkpointed(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    return block(block(x, w1), w2).sum()


def _saved_bytes(fn: Callable[..., torch.Tensor], *args: Any) -> tuple[torch.Tensor, int]:
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*args)
    return out, total


def _checkpoint_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return (
        torch.randn(64, 32, requires_grad=True),
        torch.randn(32, 32, requires_grad=True),
        torch.randn(32, 32, requires_grad=True),
    )


def test_checkpoint_gradients_match_eager_and_save_less() -> None:
    inputs = _checkpoint_inputs()
    expected = checkpointed(*inputs)
    expected.backward()
    eager_grads = [t.grad.clone() for t in inputs]  # type: ignore[union-attr]
    for t in inputs:
        t.grad = None

    jfn = thunder.jit(checkpointed)
    out, saved_ckpt = _saved_bytes(jfn, *inputs)
    torch.testing.assert_close(out, expected)
    out.backward()
    for t, g in zip(inputs, eager_grads):
        torch.testing.assert_close(t.grad, g)
    names = [b.sym.name for b in thunder.last_traces(jfn)[0].bound_symbols]
    assert names.count("block") == 2, names

    _, saved_plain = _saved_bytes(thunder.jit(not_checkpointed), *inputs)
    assert saved_ckpt < saved_plain, (saved_ckpt, saved_plain)


def test_checkpoint_of_a_module_and_kwargs() -> None:
    lin = torch.nn.Linear(8, 8)

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = torch_checkpoint.checkpoint(lin, x, use_reentrant=False)
        z = torch_checkpoint.checkpoint(
            lambda a, *, k: a * k, y, k=torch.ones(8), use_reentrant=False
        )
        return z.relu().sum()

    x = torch.randn(4, 8, requires_grad=True)
    fn(x).backward()
    eager = [x.grad.clone(), lin.weight.grad.clone()]  # type: ignore[union-attr]
    x.grad = lin.weight.grad = None
    thunder.jit(fn)(x).backward()
    torch.testing.assert_close(x.grad, eager[0])
    torch.testing.assert_close(lin.weight.grad, eager[1])


@pytest.mark.parametrize("via", ["closure", "partial"])
@pytest.mark.parametrize("autocast", [False, True])
def test_a_checkpointed_region_reading_tensors_it_was_not_passed(via: str, autocast: bool) -> None:
    """A region reads tensors the program computed before it, held by a closure or by a
    functools.partial's keywords (transformers passes the rotary embeddings to its checkpointed
    layers so): they are inputs of the region, kept alive for it. Before, dead code elimination
    dropped them and the program raised UnboundLocalError."""
    lin = torch.nn.Linear(8, 8)

    def layer(h: torch.Tensor, *, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        return lin(h) * scale + shift

    def fn(x: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        scale, shift = p.cos() * 1.0, p.sin().to(torch.float32)  # computed, read only inside
        if via == "closure":
            region: Any = lambda h: layer(h, scale=scale, shift=shift)  # noqa: E731
        else:
            region = functools.partial(layer, scale=scale, shift=shift)
        h = torch_checkpoint.checkpoint(region, x, use_reentrant=False)
        return torch_checkpoint.checkpoint(region, h.tanh(), use_reentrant=False).sum()

    jitted = thunder.jit(fn)
    for _ in range(2):
        x = torch.randn(4, 8, requires_grad=True)
        p = torch.randn(8, requires_grad=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            expected = fn(x, p)
            eager = torch.autograd.grad(expected, (x, p, lin.weight))
            actual = jitted(x, p)
        tol = {"rtol": 1.6e-2, "atol": 2e-2} if autocast else {}  # bfloat16's rounding
        torch.testing.assert_close(actual, expected, **tol)
        for got, want in zip(torch.autograd.grad(actual, (x, p, lin.weight)), eager):
            torch.testing.assert_close(got, want, **tol)
    regions = [
        b for b in thunder.last_traces(jitted)[0].bound_symbols if b.sym.module == "checkpoint"
    ]
    assert len(regions) == 2 and all("captured" in b.kwargs for b in regions)


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_gradients_both_variants(use_reentrant: bool) -> None:
    lin = torch.nn.Linear(6, 6)

    def fn(x: torch.Tensor) -> torch.Tensor:
        h = torch_checkpoint.checkpoint(lambda a: lin(a).tanh(), x, use_reentrant=use_reentrant)
        return (h * x).sum()

    jfn = thunder.jit(fn)
    for _ in range(2):
        x = torch.randn(3, 6, requires_grad=True)
        fn(x).backward()
        eager = [x.grad.clone(), lin.weight.grad.clone()]  # type: ignore[union-attr]
        x.grad = lin.weight.grad = lin.bias.grad = None
        jfn(x).backward()
        torch.testing.assert_close(x.grad, eager[0])
        torch.testing.assert_close(lin.weight.grad, eager[1])
        lin.weight.grad = lin.bias.grad = None


def test_checkpoint_reentrant_without_grad_inputs_gives_parameters_no_gradient() -> None:
    """Eager's reentrant checkpoint: when no tensor input requires grad, nothing computed in the
    region does, so the parameters it uses get no gradient (with a warning)."""
    lin = torch.nn.Linear(4, 4)
    w = torch.randn(4, requires_grad=True)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return (torch_checkpoint.checkpoint(lin, x, use_reentrant=True) * w).sum()

    x = torch.randn(2, 4)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad"):
        fn(x).backward()
    assert lin.weight.grad is None
    eager_w, w.grad = w.grad.clone(), None  # type: ignore[union-attr]
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad"):
        thunder.jit(fn)(x).backward()
    assert lin.weight.grad is None
    torch.testing.assert_close(w.grad, eager_w)


def test_checkpoint_reentrant_refuses_keyword_arguments_as_eager() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch_checkpoint.checkpoint(lambda a, *, k: a * k, x, k=2.0, use_reentrant=True)

    with pytest.raises(ValueError, match="Unexpected keyword arguments: k"):
        fn(torch.randn(2))
    with pytest.raises(ValueError, match="Unexpected keyword arguments: k"):
        thunder.jit(fn)(torch.randn(2))


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_dropout_backward_uses_the_forward_mask(use_reentrant: bool) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch_checkpoint.checkpoint(
            lambda a: torch.nn.functional.dropout(a, 0.5, training=True) * 3,
            x,
            use_reentrant=use_reentrant,
        )

    x = torch.rand(64, 64) + 0.5  # no zeros: a dropped element is exactly a zero output
    x.requires_grad_()
    out = thunder.jit(fn)(x)
    out.sum().backward()
    kept = out != 0
    assert 0 < int(kept.sum()) < out.numel()
    torch.testing.assert_close(x.grad, torch.where(kept, 6.0, 0.0))


def test_checkpoint_under_ambient_autocast() -> None:
    inputs = _checkpoint_inputs()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = checkpointed(*inputs)
    expected.backward()
    eager_grads = [t.grad.clone() for t in inputs]  # type: ignore[union-attr]
    for t in inputs:
        t.grad = None
    jfn = thunder.jit(checkpointed)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = jfn(*inputs)
    torch.testing.assert_close(out, expected, atol=0.5, rtol=2e-2)
    out.backward()
    for t, g in zip(inputs, eager_grads):
        torch.testing.assert_close(t.grad, g, atol=0.1, rtol=5e-2)
    names = [b.sym.name for b in thunder.last_traces(jfn)[1].bound_symbols]
    assert names.count("block") == 2, names


# -- other ambient state -------------------------------------------------------------------------


def test_backend_flags_are_guarded() -> None:
    def fn(a: torch.Tensor) -> torch.Tensor:
        return a + 1 if torch.backends.mkldnn.enabled else a - 1

    def tf32(a: torch.Tensor) -> torch.Tensor:
        return a + 1 if torch.backends.cuda.matmul.allow_tf32 else a - 1

    a = torch.zeros(2)
    jfn, jtf32 = thunder.jit(fn), thunder.jit(tf32)
    old_mkldnn, old_tf32 = torch.backends.mkldnn.enabled, torch.backends.cuda.matmul.allow_tf32
    try:
        for flag in (True, False, True):
            torch.backends.mkldnn.enabled = flag
            torch.backends.cuda.matmul.allow_tf32 = flag
            torch.testing.assert_close(jfn(a), fn(a))
            torch.testing.assert_close(jtf32(a), tf32(a))
    finally:
        torch.backends.mkldnn.enabled = old_mkldnn
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    reason = thunder.compile_stats(jfn).last_recompile_reason
    assert reason is not None and "torch.backends.mkldnn.enabled" in reason


def test_deterministic_algorithms_query_is_guarded() -> None:
    def fn(a: torch.Tensor) -> torch.Tensor:
        return a + 1 if torch.are_deterministic_algorithms_enabled() else a - 1

    jf = thunder.jit(fn)
    torch.testing.assert_close(jf(torch.zeros(2)), fn(torch.zeros(2)))
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(not before)
    try:  # the prologue asks on every call: the other answer, as eager
        torch.testing.assert_close(jf(torch.zeros(2)), fn(torch.zeros(2)))
    finally:
        torch.use_deterministic_algorithms(before)
    assert thunder.compile_stats(jf).compilations == 2
    assert thunder.compile_stats(jf).eager_fallbacks == 0


@pytest.mark.parametrize(
    ("switch", "is_set"),
    [
        (
            lambda: torch.set_autocast_enabled("cpu", True),
            lambda: torch.is_autocast_enabled("cpu"),
        ),
        (
            lambda: torch.set_default_dtype(torch.float64),
            lambda: torch.get_default_dtype() == torch.float64,
        ),
    ],
    ids=["set_autocast_enabled", "set_default_dtype"],
)
def test_process_state_set_inside_runs_eagerly_and_stays_set(switch, is_set) -> None:
    # Eager leaves the state set after the call; so must thunder (torch.compile would not for
    # autocast: the call runs eagerly).
    def fn(x: torch.Tensor) -> torch.Tensor:
        switch()
        return x * 2

    x = torch.randn(3)
    try:
        out = call_eagerly(thunder.jit(fn), x, match="process state")
        torch.testing.assert_close(out, x * 2)
        assert is_set()
    finally:
        torch.set_autocast_enabled("cpu", False)
        torch.set_default_dtype(torch.float32)
