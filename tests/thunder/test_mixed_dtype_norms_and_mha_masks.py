"""Normalizations with eager's kernels, and attention masks that keep lengths symbolic.

Layer, group and batch norm run as eager's one forward and one backward kernel under the
default executors, also for a float16/bfloat16 input with float32 weight and bias on the CPU
(what CPU bf16 autocast gives for ``Linear -> LayerNorm`` and models keeping norms in float32):
those kernels round their sums their own way, so any other formula gives other gradients. The
decompositions (``executors=("torch",)``) stay close.

``nn.MultiheadAttention`` with an ``attn_mask`` asks ``torch.is_floating_point(mask)``: a metadata
query that must not make the mask's symbolic sizes constants (one program for all lengths)."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn

import thunder

F = torch.nn.functional
pytestmark = pytest.mark.filterwarnings("error:thunder.jit")

EXACT = {"atol": 0.0, "rtol": 0.0}
DTYPES = {  # input, parameters
    "f32": (torch.float32, torch.float32),
    "bf16": (torch.bfloat16, torch.bfloat16),
    "bf16_f32": (torch.bfloat16, torch.float32),
    "f16_f32": (torch.float16, torch.float32),
}
EXECUTORS = {"default": None, "decomposed": ("torch",)}


def _tolerance(executors: str, dtype: torch.dtype) -> dict[str, float]:
    if executors == "default":
        return EXACT
    return {"atol": 1e-5, "rtol": 1e-4} if dtype == torch.float32 else {"atol": 0.1, "rtol": 0.05}


def _jit(fn: object, executors: str, **kwargs: object) -> object:
    chosen = EXECUTORS[executors]
    return (
        thunder.jit(fn, **kwargs) if chosen is None else thunder.jit(fn, executors=chosen, **kwargs)
    )


def _check_fn(fn, jf, shapes, dtypes, tol, calls=3, scale=3.0):
    """fn and jf on fresh inputs (the first of ``dtypes[0]``, the others ``dtypes[1]``): outputs
    and gradients of every input."""
    for call in range(calls):
        torch.manual_seed(call)
        args = [
            (torch.randn(*s) * (scale if i == 0 else 1.0) + (0.5 if i == 0 else 0.0)).to(
                dtypes[0] if i == 0 else dtypes[1]
            )
            for i, s in enumerate(shapes)
        ]
        mine = [a.clone().requires_grad_() for a in args]
        ref = [a.clone().requires_grad_() for a in args]
        got, want = jf(*mine), fn(*ref)
        torch.testing.assert_close(got, want, **tol)
        g = torch.randn_like(want)
        got.backward(g)
        want.backward(g)
        for a, b in zip(mine, ref, strict=True):
            assert a.grad.dtype == b.grad.dtype
            if tol is EXACT or dtypes[0] == torch.float32:
                torch.testing.assert_close(a.grad, b.grad, **tol)
            else:  # eager's low-precision kernels sum with bfloat16-sized errors
                scale = b.grad.float().abs().max().item()
                torch.testing.assert_close(
                    a.grad.float(), b.grad.float(), atol=0.08 * scale, rtol=0
                )


@pytest.mark.parametrize("executors", list(EXECUTORS))
@pytest.mark.parametrize("dtypes", list(DTYPES))
@pytest.mark.parametrize("rows", [6, 256])
def test_layer_norm_mixed_dtypes_match_eager(rows: int, dtypes: str, executors: str) -> None:
    def f(x, w, b):
        return F.layer_norm(x, (16,), w, b)

    dt = DTYPES[dtypes]
    jf = _jit(f, executors)
    _check_fn(f, jf, [(rows, 16), (16,), (16,)], dt, _tolerance(executors, dt[0]))
    if executors == "default":
        backward = thunder.last_backward_traces(jf)[-1].python()
        assert "torch_ops.layer_norm_backward(" in backward, backward


@pytest.mark.parametrize("executors", list(EXECUTORS))
@pytest.mark.parametrize("dtypes", list(DTYPES))
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_group_norm_matches_eager(affine: str, dtypes: str, executors: str) -> None:
    if affine == "both":

        def f(x, w, b):
            return F.group_norm(x, 2, w, b)

        shapes = [(4, 8, 5, 3), (8,), (8,)]
    elif affine == "weight":

        def f(x, w):  # type: ignore[misc]
            return F.group_norm(x, 4, w)

        shapes = [(4, 8, 5, 3), (8,)]
    else:

        def f(x):  # type: ignore[misc]
            return F.group_norm(x, 2)

        shapes = [(3, 6, 7)]
    dt = DTYPES[dtypes]
    jf = _jit(f, executors)
    _check_fn(f, jf, shapes, dt, _tolerance(executors, dt[0]))
    backward = thunder.last_backward_traces(jf)[-1].python()
    assert ("torch_ops.group_norm_backward(" in backward) == (executors == "default"), backward


@pytest.mark.parametrize("executors", list(EXECUTORS))
@pytest.mark.parametrize("dtypes", list(DTYPES))
@pytest.mark.parametrize("running", [True, False])
def test_training_batch_norm_low_precision_matches_eager(
    running: bool, dtypes: str, executors: str
) -> None:
    x_dtype, p_dtype = DTYPES[dtypes]
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(6, track_running_stats=running, momentum=0.2).to(p_dtype).train()
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    reference = copy.deepcopy(bn)
    jm = _jit(bn, executors)
    tol = _tolerance(executors, x_dtype)
    for call in range(3):
        torch.manual_seed(10 + call)
        x = (torch.randn(4, 6, 5, 3) * 3 + 1).to(x_dtype)
        x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        got, want = jm(x1), reference(x2)
        torch.testing.assert_close(got, want, **tol)
        g = torch.randn_like(want)
        got.backward(g)
        want.backward(g)
        torch.testing.assert_close(x1.grad, x2.grad, **tol)
        for p, q in zip(bn.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, **tol)
            p.grad, q.grad = None, None
        for a, b in zip(bn.buffers(), reference.buffers(), strict=True):
            # the running statistics: float32 sums in another order than the kernel's
            torch.testing.assert_close(
                a, b, atol=1e-6, rtol=1e-5 if a.dtype == torch.float32 else 1e-2
            )
    if executors == "default":
        backward = thunder.last_backward_traces(jm)[-1].python()
        assert "torch_ops.batch_norm_backward(" in backward, backward


BLOCKS = {
    "linear_layer_norm": (lambda: nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16)), (64, 8)),
    "conv_group_norm": (
        lambda: nn.Sequential(nn.Conv2d(3, 8, 3), nn.GroupNorm(2, 8)),
        (4, 3, 6, 6),
    ),
    "conv_batch_norm": (lambda: nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)), (4, 3, 6, 6)),
    "linear_batch_norm": (lambda: nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16)), (64, 8)),
    "conv_instance_norm": (
        lambda: nn.Sequential(nn.Conv2d(3, 8, 3), nn.InstanceNorm2d(8, affine=True)),
        (4, 3, 6, 6),
    ),
}


@pytest.mark.parametrize("block", list(BLOCKS))
def test_cpu_bf16_autocast_norm_blocks_match_eager_exactly(block: str) -> None:
    """Under CPU bf16 autocast the norms get a bf16 input and float32 parameters: outputs,
    every parameter's gradient (those upstream too) and the buffers equal eager's."""
    make, shape = BLOCKS[block]
    torch.manual_seed(0)
    model = make()
    reference = copy.deepcopy(model)
    jm = thunder.jit(model)
    for call in range(3):
        x = torch.randn(*shape)
        outs = []
        for m in (jm, reference):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = m(x)
            out.float().pow(2).sum().backward()
            outs.append(out)
        torch.testing.assert_close(outs[0], outs[1], **EXACT)
        for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, **EXACT, msg=lambda m, n=name: f"{n}: {m}")
            p.grad, q.grad = None, None
        for a, b in zip(model.buffers(), reference.buffers(), strict=True):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


# Attention masks and metadata queries under symbolic sizes ---------------------------------------


def _mha_programs(mask_kind: str, cache: str | None) -> int:
    torch.manual_seed(0)
    att = nn.MultiheadAttention(8, 2, batch_first=True)
    reference = copy.deepcopy(att)

    def f(m, h, mask):
        if mask_kind == "built":
            t = h.shape[1]
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        return m(h, h, h, attn_mask=mask, need_weights=False)[0]

    jf = thunder.jit(f) if cache is None else thunder.jit(f, cache=cache)
    counts = []
    for t in range(3, 10):
        torch.manual_seed(t)
        h = torch.randn(2, t, 8)
        mask = None
        if mask_kind == "float":
            mask = torch.randn(t, t)
        elif mask_kind == "bool":
            mask = torch.rand(t, t) > 0.7
            mask[:, 0] = False  # no row fully masked
        h1, h2 = h.clone().requires_grad_(), h.clone().requires_grad_()
        got, want = jf(att, h1, mask), f(reference, h2, mask)
        torch.testing.assert_close(got, want)
        g = torch.randn_like(want)
        got.backward(g)
        want.backward(g)
        torch.testing.assert_close(h1.grad, h2.grad)
        for p, q in zip(att.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad)
            p.grad, q.grad = None, None
        counts.append(thunder.compile_stats(jf).compilations)
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0, stats.last_eager_reason
    # the lengths after the first few share the symbolic program
    assert counts[-1] == counts[2], counts
    return counts[-1]


@pytest.mark.parametrize("cache", [None, "symbolic values"])
@pytest.mark.parametrize("mask_kind", ["built", "bool", "float"])
def test_multihead_attention_mask_lengths_share_one_program(
    mask_kind: str, cache: str | None
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no recompile-limit fallback warning
        with_mask = _mha_programs(mask_kind, cache)
    assert with_mask <= _mha_programs("none", cache), with_mask


T = torch.Tensor
QUERIES = {
    "torch.is_floating_point": lambda x, y: torch.is_floating_point(x),
    "torch.is_complex": lambda x, y: torch.is_complex(x),
    "torch.numel": lambda x, y: torch.numel(x),
    "Tensor.nelement": lambda x, y: x.nelement(),
    "Tensor.nelement_unbound": lambda x, y: T.nelement(x),
    "torch.is_signed": lambda x, y: torch.is_signed(x),
    "Tensor.is_signed": lambda x, y: x.is_signed(),
    "torch.is_same_size": lambda x, y: torch.is_same_size(x, y),
    "Tensor.is_same_size": lambda x, y: x.is_same_size(y[:, :2]),
    "Tensor.get_device": lambda x, y: x.get_device(),
    "torch.get_device": lambda x, y: torch.get_device(x),
    "torch.result_type": lambda x, y: torch.result_type(x, 2.5),
    "torch.result_type_0d": lambda x, y: torch.result_type(x[0, 0], y.int()),
}


@pytest.mark.parametrize("query", list(QUERIES))
def test_metadata_queries_keep_sizes_symbolic(query: str) -> None:
    fn = QUERIES[query]

    def f(x, y):
        return x * 2, fn(x, y)

    jf = thunder.jit(f, cache="symbolic values")
    for n in range(2, 8):
        x = torch.randn(n, 3)
        y = torch.randn(n, 3 if n % 2 else 2)
        got, want = jf(x, y), f(x, y)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and type(got[1]) is type(want[1]), (got[1], want[1])
    assert thunder.compile_stats(jf).compilations <= 2, thunder.compile_stats(jf)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(2, 4, 5, 6).to(memory_format=torch.channels_last),
        lambda: torch.randn(2, 6, 5, 4).transpose(1, 3),  # no dense layout at all
        lambda: torch.randn(3, 5, 4).transpose(1, 2),
    ],
    ids=["channels_last", "transposed", "transposed_3d"],
)
def test_group_norm_of_strided_inputs_like_eager(make):
    """torch's group norm hands its kernels a dense input (in the suggested memory format); so
    does the compiled program: its kernel reads rows as dense and raised otherwise."""

    def f(x, w, b):
        return torch.nn.functional.group_norm(x, 2, w, b)

    jf = thunder.jit(f)
    for _ in range(2):
        x = make().requires_grad_()
        w, b = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
        expected, got = f(x, w, b), jf(x, w, b)
        torch.testing.assert_close(got, expected)
        assert got.stride() == expected.stride()
        g = torch.randn_like(expected)
        for ge, gg in zip(
            torch.autograd.grad(expected, (x, w, b), g), torch.autograd.grad(got, (x, w, b), g)
        ):
            torch.testing.assert_close(gg, ge)
            assert gg.stride() == ge.stride()


def test_group_norm_of_a_selection_like_eager():
    def f(x, m):
        return torch.nn.functional.group_norm(x[m][None].transpose(1, 2), 1)

    jf = thunder.jit(f)
    for k in (3, 0, 4, 6):
        x = torch.randn(6, 3, requires_grad=True)
        m = torch.arange(6) < k
        torch.testing.assert_close(jf(x, m), f(x, m), equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "make",
    [
        lambda dt: torch.randn(2, 4, 5, 6, dtype=dt).to(memory_format=torch.channels_last),
        lambda dt: torch.randn(2, 6, 5, 4, dtype=dt).transpose(1, 3),
        lambda dt: torch.randn(2, 4, 5, 12, dtype=dt)[..., ::2],
        lambda dt: torch.randn(3, 4, 7, dtype=dt),
    ],
    ids=["channels_last", "transposed", "strided", "3d"],
)
def test_instance_norm_is_eagers_batch_norm(make, dtype):
    """Eager computes instance norm as batch norm of the dense input viewed as one sample of
    N*C channels: the compiled program too, so values, gradients and the (dense) result's
    layout are eager's exactly."""

    def f(x, w, b):
        return torch.nn.functional.instance_norm(x, weight=w, bias=b)

    jf = thunder.jit(f)
    for _ in range(2):
        x = make(dtype).requires_grad_()
        w = torch.randn(4, dtype=dtype, requires_grad=True)
        b = torch.randn(4, dtype=dtype, requires_grad=True)
        expected, got = f(x, w, b), jf(x, w, b)
        assert torch.equal(got, expected) and got.stride() == expected.stride()
        g = torch.randn_like(expected)
        for ge, gg in zip(
            torch.autograd.grad(expected, (x, w, b), g), torch.autograd.grad(got, (x, w, b), g)
        ):
            assert torch.equal(gg, ge)
