"""Torch callables no thunder op mirrors run by the torch fallback: recorded as one op that names
the callable, run by torch, differentiated by torch.autograd; refused where the output shape
depends on data or the call writes into an argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import thunder
from thunder_ir import OpTag


def _inputs(seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(4, generator=g) + 0.5
    a = torch.randn(3, 3, generator=g) + 3 * torch.eye(3)
    idx = torch.randint(0, 3, (2, 4), generator=g)
    src = torch.randn(2, 4, generator=g)
    return x, a, idx, src


CASES = {
    "polygamma": lambda x, a, idx, src: torch.special.polygamma(1, x) * 2,
    "xlogy": lambda x, a, idx, src: torch.xlogy(x, x + 1),
    "dot": lambda x, a, idx, src: torch.dot(x, x.sin()),
    "vector_norm": lambda x, a, idx, src: torch.linalg.vector_norm(a, ord=3, dim=1),
    "inv": lambda x, a, idx, src: torch.linalg.inv(a).sum(0),
    "slogdet": lambda x, a, idx, src: torch.linalg.slogdet(a).logabsdet,
    "cumprod_method": lambda x, a, idx, src: a.cumprod(1),
    "scatter_reduce": lambda x, a, idx, src: torch.zeros(3, 4).scatter_reduce(
        0, idx, src, reduce="amax", include_self=False
    ),
    "aten_mv": lambda x, a, idx, src: torch.ops.aten.mv.default(a, x[:3]),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("seed", [0, 1])
def test_fallback_matches_eager_with_gradients(name: str, seed: int) -> None:
    fn = CASES[name]
    x, a, idx, src = _inputs(seed)
    xs = (x.requires_grad_(), a.requires_grad_(), idx, src.requires_grad_())
    jfn = thunder.jit(fn)
    got = jfn(*xs)
    expected = fn(*xs)
    torch.testing.assert_close(got, expected)
    ct = torch.randn_like(expected)
    wrt = [t for t in xs if t.requires_grad]
    g_got = torch.autograd.grad(got, wrt, ct, allow_unused=True, materialize_grads=True)
    g_exp = torch.autograd.grad(expected, wrt, ct, allow_unused=True, materialize_grads=True)
    torch.testing.assert_close(g_got, g_exp)


def test_trace_names_the_torch_callable_and_runs_it() -> None:
    def f(x):
        return torch.special.polygamma(1, x) + torch.xlogy(x, x)

    jf = thunder.jit(f)
    x = torch.rand(3) + 0.1
    torch.testing.assert_close(jf(x), f(x))
    computation = str(thunder.last_traces(jf)[0])
    assert "ltorch.torch_fallback('torch.special.polygamma', 1, x)" in computation
    execution = str(thunder.last_traces(jf)[-1])
    assert "torch.special.polygamma(1, x)" in execution
    assert "torch.xlogy(x, x)" in execution


def test_structseq_result_keeps_its_type() -> None:
    def f(a):
        return torch.linalg.slogdet(a)

    a = torch.randn(3, 3)
    got, expected = thunder.jit(f)(a), f(a)
    assert type(got) is type(expected)
    torch.testing.assert_close(got.logabsdet, expected.logabsdet)


def test_examine_lists_fallback_calls() -> None:
    def f(x):
        return torch.special.polygamma(1, x) + x.sin(), torch.nonzero(x), torch.unique(x)

    report = thunder.examine(f, torch.rand(3), show=False)
    assert report.fallback["torch.special.polygamma"] == 1
    assert report.supported["torch.nonzero"] == 1  # compiled, its count a symbolic size
    # its shape depends on data: run on the call's values while tracing, its sizes read from data
    assert report.fallback["torch._unique2"] == 1
    assert "polygamma" not in str(report.unsupported)


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("_unique2", lambda x: torch.unique(x)),
        ("unique_consecutive", lambda x: torch.unique_consecutive(x)),
        ("bincount", lambda x: torch.bincount((x * 3).long())),
        ("repeat_interleave", lambda x: torch.repeat_interleave(x, (x * 2).long())),
        ("tensor_split", lambda x: torch.tensor_split(x, (x[:2] * 3).long().sort().values)),
    ],
)
def test_data_dependent_shapes_compile_as_sized_fallbacks(name, fn) -> None:
    """A torch callable without an op whose result's shape depends on data runs on the call's
    values while tracing; every size of its results is read from data: one program for all."""
    jf = thunder.jit(fn)
    g = torch.Generator().manual_seed(0)
    for _ in range(4):
        x = torch.rand(6, generator=g) * 2
        for got, want in zip(_leaves(jf(x)), _leaves(fn(x))):
            torch.testing.assert_close(got, want)
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0 and stats.compilations == 1
    assert "torch_fallback_sized" in str(thunder.last_traces(jf)[-1])


def _leaves(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def test_a_write_into_out_runs_split_and_in_place_runs_as_eager() -> None:
    # An out= eager resizes (it holds no room for the result): torch runs it, the program is
    # split there (thunder.dynamo), not refused. (One of the result's shape is computed, then
    # copied: tests/thunder/test_splits_that_compile.py.)
    def out_arg(x):
        y = torch.empty(0)
        torch.xlogy(x, x, out=y)
        return y * 2

    jf = thunder.jit(out_arg)
    with pytest.warns(UserWarning, match="out= argument"):
        for _ in range(2):
            x = torch.rand(3)
            torch.testing.assert_close(jf(x), out_arg(x))
    assert thunder.compile_stats(jf).split_calls == 2
    report = thunder.examine(out_arg, torch.rand(3), show=False)
    assert "torch.xlogy" not in report.unsupported  # not refused: torch runs it

    def in_place(x):
        y = x * 2
        y.polygamma_(1)
        return y

    x = torch.rand(3)  # recorded through aten::polygamma (tests/thunder/test_inplace_fallback.py)
    assert torch.equal(thunder.jit(in_place)(x), in_place(x))


def _contiguous_first(x, w):
    x = x[:, :4]  # a view the program made (an input's layout is answered and guarded)
    if not x.is_contiguous():  # a layout query: torch answers it, the program runs split here
        x = x.contiguous()
    return (x.view(-1, 4) @ w).tanh() * x.stride()[0]


def test_layout_queries_run_split_and_equal_eager_forward_and_backward() -> None:
    jf = thunder.jit(_contiguous_first)
    with pytest.warns(UserWarning, match="is_contiguous"):
        for layout in ("transposed", "contiguous", "transposed"):
            base = torch.randn(4, 6) if layout == "transposed" else torch.randn(6, 4)
            x = base.t() if layout == "transposed" else base
            x.requires_grad_()
            w = torch.randn(4, 3, requires_grad=True)
            got = jf(x, w)
            xe, we = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
            want = _contiguous_first(xe, we)
            torch.testing.assert_close(got, want)
            grads = torch.autograd.grad(got.sum(), (x, w))
            torch.testing.assert_close(grads, torch.autograd.grad(want.sum(), (xe, we)))
    stats = thunder.compile_stats(jf)
    assert stats.split_calls == 3 and stats.eager_fallbacks == 0
    assert "torch.Tensor.is_contiguous" in stats.last_split_reason
    assert f"{__file__}:" in stats.last_split_reason  # the user's file:line
    report = thunder.examine(
        _contiguous_first, torch.randn(4, 6).t(), torch.randn(4, 3), show=False
    )
    assert not report.unsupported, report.unsupported


def _hooked(x, w):
    y = x @ w
    y.register_hook(lambda g: g * 3)  # torch's backward runs it
    z = torch.tanh(y)
    z.retain_grad()
    return z.sum(), z


def test_autograd_hooks_run_split_and_the_backward_runs_them() -> None:
    jf = thunder.jit(_hooked)
    with pytest.warns(UserWarning, match="register_hook"):
        for _ in range(3):
            x = torch.randn(3, 4)
            w = torch.randn(4, 5, requires_grad=True)
            we = w.detach().clone().requires_grad_()
            (got, z), (want, ze) = jf(x, w), _hooked(x, we)
            got.backward()
            want.backward()
            torch.testing.assert_close(got, want)
            torch.testing.assert_close(w.grad, we.grad)  # scaled by the hook, as in eager
            torch.testing.assert_close(z.grad, ze.grad)  # retained, as in eager
    stats = thunder.compile_stats(jf)
    assert stats.split_calls == 3 and stats.eager_fallbacks == 0
    assert "torch.Tensor.register_hook" in stats.last_split_reason
    assert f"{__file__}:" in stats.last_split_reason
    report = thunder.examine(_hooked, torch.randn(3, 4), w, show=False)
    assert not report.unsupported, report.unsupported
    assert "torch.Tensor.register_hook" in report.fallback


def _asks_autograd(x, w):
    y = x @ w
    scale = 2.0 if y.grad_fn is not None else 1.0  # torch's answer: under no_grad it differs
    leaf = 3.0 if w.is_leaf and w.grad is None else 1.0
    return y * scale * leaf


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_autograd_attributes_are_torchs_answers(grad: bool) -> None:
    jf = thunder.jit(_asks_autograd)
    # Under no_grad ``y`` requires no grad: the trace knows it is a leaf without a grad_fn,
    # and torch answers ``w.grad``.
    reason = "torch.Tensor.grad_fn" if grad else "torch.Tensor.grad,"
    with pytest.warns(UserWarning, match=reason), torch.set_grad_enabled(grad):
        for _ in range(2):
            x = torch.randn(3, 4)
            w = torch.randn(4, 2, requires_grad=True)
            we = w.detach().clone().requires_grad_()
            got, want = jf(x, w), _asks_autograd(x, we)
            torch.testing.assert_close(got, want)
            if grad:
                torch.testing.assert_close(
                    torch.autograd.grad(got.sum(), w), torch.autograd.grad(want.sum(), we)
                )
    stats = thunder.compile_stats(jf)
    assert stats.split_calls == 2 and stats.eager_fallbacks == 0
    assert reason in stats.last_split_reason


def test_device_kind_queries_are_answered_in_the_trace() -> None:
    def f(x):
        accelerated = x.is_xla or x.is_ipu or x.is_vulkan or x.is_mtia or x.is_maia or x.is_mps
        return x + 1 if accelerated else x * 2

    jf = thunder.jit(f)
    x = torch.randn(3)
    torch.testing.assert_close(jf(x), f(x))
    stats = thunder.compile_stats(jf)
    assert stats.split_calls == 0 and stats.eager_fallbacks == 0


STORAGE_WRITES = {
    "resize_": lambda x: (x * 2).resize_(6).sin(),
    "resize_as_": lambda x: (x * 2).resize_as_(torch.empty(2, 3)).sin(),
    "set_": lambda x: torch.empty(0).set_(x * 2).cos(),
    "share_memory_": lambda x: (x * 2).share_memory_().sin(),
}


@pytest.mark.parametrize("name", list(STORAGE_WRITES))
def test_storage_writes_run_split_and_equal_eager(name: str) -> None:
    fn = STORAGE_WRITES[name]
    jf = thunder.jit(fn)
    # share_memory_ is Python: its first call torch must run is untyped_storage()
    reason = "untyped_storage" if name == "share_memory_" else name
    with pytest.warns(UserWarning, match=reason):
        for _ in range(2):
            x = torch.randn(2, 3)
            got, want = jf(x), fn(x)
            assert got.shape == want.shape and torch.equal(got, want)
    stats = thunder.compile_stats(jf)
    assert stats.split_calls == 2 and stats.eager_fallbacks == 0
    assert f"torch.Tensor.{reason}" in stats.last_split_reason
    assert not thunder.examine(fn, torch.randn(2, 3), show=False).unsupported


def test_random_fallback_calls_are_not_merged_by_cse() -> None:
    def f(x):
        # poisson has no thunder op and draws random numbers
        return torch.poisson(x), torch.poisson(x)

    jf = thunder.jit(f)
    x = torch.full((1000,), 5.0)
    a, b = jf(x)
    assert not torch.equal(a, b)
    computation = thunder.last_traces(jf)[-1]
    assert str(computation).count("torch.poisson(") == 2
    calls = [b for b in thunder.last_traces(jf)[0].bound_symbols if b.sym.name.startswith("torch_")]
    assert all(OpTag.RANDOM in b.sym.tags for b in calls)


def test_random_fallback_consumes_the_generator_like_eager() -> None:
    def f(x):
        return torch.poisson(x) + torch.poisson(x)

    x = torch.full((50,), 3.0)
    jf = thunder.jit(f)
    jf(x)  # compile
    torch.manual_seed(3)
    got = jf(x)
    torch.manual_seed(3)
    torch.testing.assert_close(got, f(x))


def test_gradient_through_random_fallback_replays_the_forward_draw() -> None:
    # The backward runs rrelu again from the generator state the forward drew from: eager's
    # slopes, and the generator is left where eager leaves it.
    def f(x):
        return torch.nn.functional.rrelu(x, training=True)

    jf = thunder.jit(f)
    for _ in range(2):
        x = torch.randn(64)
        results = []
        for fn in (f, jf):
            xr = x.clone().requires_grad_()
            torch.manual_seed(0)
            out = fn(xr)
            (g,) = torch.autograd.grad(out, xr, torch.ones_like(out))
            results.append((out, g, torch.rand(3)))
        for a, b in zip(*results):
            assert torch.equal(a, b)


def test_fallback_view_written_in_place_mutates_the_base_like_eager() -> None:
    def f(x):
        y = x * 1
        d = torch.Tensor.diagonal(y)  # a view whatever the op table says
        v = torch.ops.aten.diagonal.default(y)
        v.mul_(2)
        return y, d

    x = torch.randn(3, 3)
    got, expected = thunder.jit(f)(x), f(x)
    torch.testing.assert_close(got, expected)


def test_fallback_inside_a_torchcompile_region() -> None:
    def f(x, a):
        y = torch.special.polygamma(1, x.sin()) * 2
        return torch.xlogy(y, x).cos() + torch.linalg.inv(a).sum()

    x = torch.rand(3, requires_grad=True)
    a = (torch.randn(3, 3) + 3 * torch.eye(3)).requires_grad_()
    jf = thunder.jit(f, executors=["torchcompile"])
    got, expected = jf(x, a), f(x, a)
    torch.testing.assert_close(got, expected)
    ct = torch.randn(3)
    torch.testing.assert_close(
        torch.autograd.grad(got, (x, a), ct), torch.autograd.grad(expected, (x, a), ct)
    )
    forward = str(thunder.last_traces(jf)[-1])
    assert "torchcompile.fusion0" in forward
    assert "# t1 = torch.special.polygamma(1, t0)" in forward


def test_fallback_under_no_grad_and_symbolic_values() -> None:
    def f(x, n):
        return torch.special.polygamma(n, x)

    jf = thunder.jit(f, cache="symbolic values")
    x = torch.rand(3) + 0.5
    for n in (1, 2, 1):
        torch.testing.assert_close(jf(x, n), f(x, n))


def test_fallback_reading_a_traced_tensors_values_is_compiled() -> None:
    """tensor_split with a tensor of indices needs the indices' values: read on the call's
    values while tracing, the sizes of its results read from data."""
    x, idx = torch.randn(5, 5), torch.tensor([1, 3])
    jf = thunder.jit(lambda a, i: torch.tensor_split(a, i))
    for got, want in zip(jf(x, idx), torch.tensor_split(x, idx)):
        torch.testing.assert_close(got, want)
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_a_tensor_method_whose_op_refuses_an_option_runs_as_torchs_method() -> None:
    # repeat_interleave has an op for number repeats; tensor repeats (sizes from data) refuse,
    # and the method form then takes the fallback as the function form does: with output_size
    # the result's shape is known.
    def f(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return x.repeat_interleave(r, dim=0, output_size=3) * 2

    j = thunder.jit(f)
    x, r = torch.randn(2, 3), torch.tensor([1, 2])
    torch.testing.assert_close(j(x, r), f(x, r))
    assert "torch_fallback('torch.Tensor.repeat_interleave'" in str(thunder.last_traces(j)[0])
    jf = thunder.jit(lambda x, r: x.repeat_interleave(r, dim=0))
    torch.testing.assert_close(jf(x, r), x.repeat_interleave(r, dim=0))
    assert thunder.compile_stats(jf).eager_fallbacks == 0


# Custom ops without a fake implementation (torch.library.custom_op without register_fake): no
# shape inference, so they run on the call's values while tracing, their sizes read from data.
@torch.library.custom_op("thunder_tests::positives", mutates_args=())
def _positives(x: torch.Tensor) -> torch.Tensor:
    return x[x > 0].clone()


def _positives_backward(ctx, g):
    return torch.zeros_like(ctx.x).masked_scatter(ctx.x > 0, g)


def _positives_context(ctx, inputs, output):
    ctx.x = inputs[0].detach()


_positives.register_autograd(_positives_backward, setup_context=_positives_context)


@torch.library.custom_op("thunder_tests::numpy_sin", mutates_args=())
def _numpy_sin(x: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.sin(x.detach().numpy()))


def test_custom_ops_without_a_fake_implementation_run_on_the_calls_values():
    def f(x):
        return _positives(x).exp().sum() + _numpy_sin(x.detach()).mul(x).sum()

    jf = thunder.jit(f)
    g = torch.Generator().manual_seed(9)
    for _ in range(4):
        x = torch.randn(6, generator=g).requires_grad_()
        y = x.detach().clone().requires_grad_()
        got, want = jf(x), f(y)
        torch.testing.assert_close(got, want)
        got.backward()
        want.backward()
        torch.testing.assert_close(x.grad, y.grad)
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0 and stats.compilations == 1


# Custom ops that write into the arguments their schema marks (mutates_args): recorded as their
# functional form (the op run on copies of those arguments), then copies into the arguments.
@torch.library.custom_op("thunder_tests::accumulate", mutates_args=("total",))
def _accumulate(total: torch.Tensor, x: torch.Tensor) -> None:
    total.add_(x)


@torch.library.custom_op("thunder_tests::scale_and_use", mutates_args=("state",))
def _scale_and_use(state: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    state.mul_(2)
    return x * state


@_scale_and_use.register_fake
def _scale_and_use_fake(state, x):
    return torch.empty_like(x)


def test_custom_ops_that_write_their_declared_arguments():
    def f(x, total, state):
        _accumulate(total, x)
        y = _scale_and_use(state, x[:, 0])
        return total * 3 + y[:, None], state.sum()

    jf = thunder.jit(f)
    g = torch.Generator().manual_seed(4)
    for _ in range(3):
        x, total, state = (torch.randn(4, 2, generator=g) for _ in range(3))
        state = state[:, 0].contiguous()
        ours, theirs = (total.clone(), state.clone()), (total.clone(), state.clone())
        torch.testing.assert_close(jf(x, *ours), f(x, *theirs))
        torch.testing.assert_close(ours, theirs)  # the arguments written once, as eager writes
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0 and stats.compilations == 1
    assert "FUNCTIONAL.thunder_tests.accumulate.default" in str(thunder.last_traces(jf)[-1])
