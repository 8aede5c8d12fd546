"""Max pooling's gradient is eager's, bit for bit: each output's gradient goes to the one input
element torch's kernel picks (the first maximum of its window in scan order, a NaN over any
number, the last of several NaNs), never split among ties. The grad rule of ``max_pool{1,2,3}d``
computes the indices again in the backward (``max_pool_with_indices``: torch's
``max_pool*d_with_indices`` under torch_ops, else its decomposition) and routes the gradient with
``max_pool_with_indices_backward`` (torch's kernel, else an ordered scatter-add); the forward stays
the plain pooling. Checked against eager for every dimension, kernel, stride, padding, dilation,
ceil_mode, layout and dtype, on inputs full of ties and NaNs, with the default executors and with
the decompositions alone (``executors=("torch",)``)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given
from hypothesis import strategies as st

import thunder

POOLS = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
EXECUTORS = [None, ("torch",)]  # None: thunder's defaults (torch_ops, torch)
KINDS = ["randn", "round", "zeros", "relu", "nan", "neg_inf"]
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def _jit(fn: Any, executors: tuple[str, ...] | None) -> Any:
    return thunder.jit(fn) if executors is None else thunder.jit(fn, executors=executors)


def _input(kind: str, shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    if kind == "round":  # many ties, -0.0 and 0.0 among them
        x = (x * 1.5).round()
    elif kind == "zeros":
        x = torch.zeros(shape, dtype=torch.float64)
    elif kind == "relu":
        x = x.relu()
    elif kind == "nan":
        x = torch.where(torch.rand(shape, generator=g) < 0.3, float("nan"), x.round())
    elif kind == "neg_inf":
        x = torch.where(torch.rand(shape, generator=g) < 0.5, -float("inf"), x.round())
    return x.to(dtype)


def _compare(
    fn: Any,
    x: torch.Tensor,
    executors: tuple[str, ...] | None,
    seed: int = 0,
    *,
    return_indices: bool = False,
) -> Any:
    """Runs ``fn`` eagerly and jitted on ``x``; the outputs (NaNs in the same places), indices
    and the gradients for a random cotangent must be equal."""
    xe = x.detach().clone().requires_grad_()
    xt = x.detach().clone().requires_grad_()
    jfn = _jit(fn, executors)
    want, got = fn(xe), jfn(xt)
    if return_indices:
        assert torch.equal(got[1], want[1]), (got[1], want[1])
        want, got = want[0], got[0]
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    g = torch.randn(want.shape, generator=torch.Generator().manual_seed(seed + 1))
    g = g.to(want.dtype)
    (gw,) = torch.autograd.grad(want, xe, g)
    (gt,) = torch.autograd.grad(got, xt, g)
    assert torch.equal(gt, gw), (gt, gw)
    return jfn


def _has_empty_window(sizes: list[int], k: int, s: int, p: int, d: int, ceil_mode: bool) -> bool:
    """Whether a window of these parameters holds only padding (torch's indices are then
    outside the window and its backward writes outside the input: undefined)."""
    for size in sizes:
        n = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (n - 1) * s >= size + p:
            n -= 1
        for o in range(n):
            if not any(0 <= o * s - p + j * d < size for j in range(k)):
                return True
    return False


@st.composite
def _pool_cases(draw: Any) -> dict[str, Any]:
    nd = draw(st.sampled_from([1, 2, 3]))
    kernel = draw(st.integers(1, 3))
    dilation = draw(st.integers(1, 2))
    stride = draw(st.integers(1, 3))
    padding = draw(st.integers(0, (dilation * (kernel - 1) + 1) // 2))
    ceil_mode = draw(st.booleans())
    sizes = [draw(st.integers(1, 7)) for _ in range(nd)]
    unbatched = draw(st.booleans()) and draw(st.booleans())
    kind = draw(st.sampled_from(KINDS))
    channels_last = nd > 1 and not unbatched and draw(st.booleans())
    return {
        "nd": nd, "kernel": kernel, "dilation": dilation, "stride": stride, "padding": padding,
        "ceil_mode": ceil_mode, "sizes": sizes, "unbatched": unbatched, "kind": kind,
        "channels_last": channels_last, "dtype": draw(st.sampled_from(DTYPES)),
        "return_indices": draw(st.booleans()), "seed": draw(st.integers(0, 2**16)),
    }  # fmt: skip


@pytest.mark.parametrize("executors", EXECUTORS, ids=["default", "torch"])
@given(case=_pool_cases())
def test_max_pool_matches_eager(executors: tuple[str, ...] | None, case: dict[str, Any]) -> None:
    nd, k, d, s, p = case["nd"], case["kernel"], case["dilation"], case["stride"], case["padding"]
    ceil_mode, sizes = case["ceil_mode"], case["sizes"]
    assume(not _has_empty_window(sizes, k, s, p, d, ceil_mode))
    # torch's CPU channels_last_3d kernel misplaces the index of a window of -inf values (it
    # leaves out the depth): its indices, and so its gradient, are wrong there.
    assume(not (nd == 3 and case["channels_last"] and case["kind"] == "neg_inf"))
    shape = tuple(([] if case["unbatched"] else [2]) + [3] + sizes)
    x = _input(case["kind"], shape, case["dtype"], case["seed"])
    if case["channels_last"]:
        x = x.to(memory_format=torch.channels_last if nd == 2 else torch.channels_last_3d)
    kwargs = dict(
        kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=ceil_mode,
        return_indices=case["return_indices"],
    )  # fmt: skip
    try:
        POOLS[nd](x, **kwargs)
    except RuntimeError:
        assume(False)  # a call eager refuses (an output of no element)

    def fn(t: torch.Tensor) -> Any:
        return POOLS[nd](t, **kwargs)

    _compare(fn, x, executors, case["seed"], return_indices=case["return_indices"])


@pytest.mark.parametrize("executors", EXECUTORS, ids=["default", "torch"])
def test_ties_go_to_the_first_maximum(executors: tuple[str, ...] | None) -> None:
    # The example: eager puts 1.0 on the first element of each window, not 0.25 on each.
    x = torch.zeros(1, 1, 4, 4, requires_grad=True)
    j = _jit(lambda t: F.max_pool2d(t, 2), executors)
    j(x).sum().backward()
    want = torch.zeros(1, 1, 4, 4)
    want[..., ::2, ::2] = 1.0
    assert torch.equal(x.grad, want), x.grad


@pytest.mark.parametrize("executors", EXECUTORS, ids=["default", "torch"])
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("kind", KINDS)
def test_every_dimension_and_input_kind(
    executors: tuple[str, ...] | None, nd: int, kind: str
) -> None:
    x = _input(kind, (2, 3, *[6] * nd), torch.float32, seed=nd)
    # Overlapping windows (stride 1): several outputs add into one input, in eager's order.
    for kwargs in (
        dict(kernel_size=2),
        dict(kernel_size=3, stride=1, padding=1),
        dict(kernel_size=2, stride=2, dilation=2, padding=1),
        dict(kernel_size=3, stride=2, ceil_mode=True),
    ):

        def fn(t: torch.Tensor, kwargs: dict[str, Any] = kwargs) -> torch.Tensor:
            return POOLS[nd](t, **kwargs)

        _compare(fn, x, executors)


@pytest.mark.parametrize("executors", EXECUTORS, ids=["default", "torch"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("channels_last", [False, True])
def test_low_precision_overlapping_windows(
    executors: tuple[str, ...] | None, dtype: torch.dtype, channels_last: bool
) -> None:
    # Up to nine gradients land on one input; eager adds them in its dtype, in output order.
    x = _input("round", (2, 4, 9, 9), dtype, seed=3)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    _compare(lambda t: F.max_pool2d(t, 3, stride=1, padding=1), x, executors, seed=3)


@pytest.mark.parametrize("executors", EXECUTORS, ids=["default", "torch"])
def test_large_float32_overlapping_windows(executors: tuple[str, ...] | None) -> None:
    # Large enough that torch's CPU index_put would add float32 from several threads.
    x = _input("round", (4, 16, 40, 40), torch.float32, seed=4)
    _compare(lambda t: F.max_pool2d(t, 3, stride=1, padding=1), x, executors, seed=4)


@pytest.mark.parametrize("executors", EXECUTORS, ids=["default", "torch"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_indices_are_eagers(executors: tuple[str, ...] | None, nd: int) -> None:
    # NaNs (the last one wins), ties, padding, ceil_mode: the indices torch returns.
    x = _input("nan", (2, 3, *[7] * nd), torch.float32, seed=5)
    for kwargs in (
        dict(kernel_size=3, stride=1, padding=1),
        dict(kernel_size=2, ceil_mode=True),
        dict(kernel_size=2, dilation=2, padding=1, stride=1),
    ):

        def fn(t: torch.Tensor, kwargs: dict[str, Any] = kwargs) -> Any:
            return POOLS[nd](t, return_indices=True, **kwargs)

        _compare(fn, x, executors, return_indices=True)


def test_decomposed_indices_are_eagers() -> None:
    # The decomposition of max_pool_with_indices, on its own, against torch's indices.
    from thunder_ir import ops as ltorch

    x = _input("nan", (2, 3, 8, 7), torch.float32, seed=6)
    x[0, 0] = -float("inf")  # windows of -inf only: the first element in the input

    def fn(t: torch.Tensor) -> Any:
        return ltorch.max_pool_with_indices(t, (3, 2), (2, 1), (1, 1), (1, 2), True)

    out, idx = thunder.jit(fn, executors=("torch",))(x)
    want, want_idx = F.max_pool2d(x, (3, 2), (2, 1), (1, 1), (1, 2), True, True)
    torch.testing.assert_close(out, want, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(idx, want_idx)


@pytest.mark.parametrize("executors", EXECUTORS, ids=["default", "torch"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_integer_inputs(executors: tuple[str, ...] | None, dtype: torch.dtype) -> None:
    low = 0 if dtype == torch.uint8 else -3
    x = torch.randint(low, 3, (2, 3, 7, 6), generator=torch.Generator().manual_seed(0)).to(dtype)
    for kwargs in (dict(kernel_size=3, stride=1, padding=1), dict(kernel_size=2, ceil_mode=True)):
        out, idx = _jit(lambda t: F.max_pool2d(t, return_indices=True, **kwargs), executors)(x)
        want, want_idx = F.max_pool2d(x, return_indices=True, **kwargs)
        assert torch.equal(out, want) and torch.equal(idx, want_idx)


def test_forward_stays_the_plain_pooling() -> None:
    # Without gradients, and in the forward of a differentiated call, no indices are computed.
    x = torch.randn(2, 3, 8, 8)
    j = thunder.jit(lambda t: F.max_pool2d(t, 2), executors=("torch",))
    j(x)
    trace = thunder.last_traces(j)[-1].python()
    assert "maximum" in trace and "where" not in trace, trace
    j(x.requires_grad_())
    forward = thunder.last_traces(j)[-1].python()
    assert "maximum" in forward and "where" not in forward, forward

    # Default executors: torch's kernel or the plain decomposition (on the CPU, where it is faster).
    jd = thunder.jit(lambda t: F.max_pool2d(t, 2))
    jd(x)
    forward = thunder.last_traces(jd)[-1].python()
    assert "with_indices" not in forward and "where" not in forward, forward
    backward = thunder.last_backward_traces(jd)[-1].python()
    assert "torch_ops.max_pool_with_indices(" in backward, backward
    assert "torch_ops.max_pool_with_indices_backward(" in backward, backward


def test_return_indices_saves_the_forwards_indices() -> None:
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    j = thunder.jit(lambda t: F.max_pool2d(t, 2, return_indices=True)[0])
    j(x)
    backward = thunder.last_backward_traces(j)[-1].python()
    assert "torch_ops.max_pool_with_indices_backward(" in backward, backward
    assert "torch_ops.max_pool_with_indices(" not in backward, backward


@pytest.mark.parametrize("executors", EXECUTORS, ids=["default", "torch"])
def test_symbolic_sizes(executors: tuple[str, ...] | None) -> None:
    kwargs = dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)

    def fn(t: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(t, **kwargs)

    opts: dict[str, Any] = {"cache": "symbolic values"}
    if executors is not None:
        opts["executors"] = executors
    j = thunder.jit(fn, **opts)
    for shape in ((2, 3, 8, 8), (2, 3, 9, 7)):
        x = _input("round", shape, torch.float32, seed=7)
        xe, xt = x.clone().requires_grad_(), x.clone().requires_grad_()
        g = torch.randn(fn(x).shape)
        fn(xe).backward(g)
        j(xt).backward(g)
        assert torch.equal(xt.grad, xe.grad)


def test_window_of_padding_only_runs_as_torch() -> None:
    # A dilated window that misses the input: torch's own kernel (its result, whatever it is).
    x = torch.randn(1, 1, 1, 3)
    j = thunder.jit(lambda t: F.max_pool2d(t, 2, stride=1, padding=1, dilation=2))
    torch.testing.assert_close(
        j(x), F.max_pool2d(x, 2, stride=1, padding=1, dilation=2), rtol=0, atol=0
    )
    assert "torch.nn.functional.max_pool2d" in thunder.last_traces(j)[-1].python()


class _SmallCNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(F.max_pool2d(self.conv(x).relu(), 2).flatten(1))


@pytest.mark.parametrize("executors", EXECUTORS, ids=["default", "torch"])
def test_cnn_training_step(executors: tuple[str, ...] | None) -> None:
    # conv -> relu -> max_pool -> linear, with integer-valued inputs and conv weights: the
    # activations tie in most windows (positive values too, whose gradients relu lets through).
    torch.manual_seed(0)
    model = _SmallCNN()
    with torch.no_grad():
        model.conv.weight.copy_(torch.randint(-1, 2, model.conv.weight.shape))
        model.conv.bias.zero_()
    reference = _SmallCNN()
    reference.load_state_dict(model.state_dict())
    jm = _jit(model, executors)
    x = torch.randint(-2, 3, (4, 3, 8, 8)).float()
    target = torch.randint(0, 5, (4,))
    for m in (jm, reference):
        F.cross_entropy(m(x), target).backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        assert p.grad is not None and q.grad is not None
        # With the default executors torch's kernels compute the rest, the same ones as eager's,
        # but for the conv bias's gradient (a sum of its own, in another order).
        if executors is None and name != "conv.bias":
            assert torch.equal(p.grad, q.grad), name
        else:  # the conv and linear decompositions round their own way
            torch.testing.assert_close(p.grad, q.grad, msg=name)
