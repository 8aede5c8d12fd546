"""On a CUDA device, jitted programs under ``torch.autocast("cuda")`` equal eager PyTorch: every op
of CUDA autocast's lists that thunder has (lower precision, float32, float32 unless a dtype is
given, promote, banned), ops off the lists, float64, in-place ops, torch callables without an op,
and small models (an MLP with LayerNorm and GELU, attention, convolutions with BatchNorm, a GPT
with cross-entropy), for bfloat16 and float16, with autocast around the call and as a block inside
the program: output dtypes exactly eager's, values and gradients close. A program on CPU tensors
under CUDA autocast runs as without it.

The dtypes also have CPU-only checks (fake CUDA tensors): tests/thunder_transforms/
test_autocast_cuda.py. Skipped where no CUDA device is present; ``./dev gpu-check`` runs it on a
GPU machine."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import thunder

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

from thunder.models import GPT, ConvBlock, GPTConfig  # noqa: E402

pytestmark = pytest.mark.filterwarnings("error:thunder.jit")  # an eager fallback fails the test
DEVICE = "cuda"
DTYPES = [torch.bfloat16, torch.float16]
TOL = 2e-2  # bfloat16 keeps 8 bits of mantissa, float16 11


def _flat(x: Any) -> list[Any]:
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _close(got: Any, want: Any, reference: Any = None, what: str = "") -> None:
    """Same dtypes and devices as eager, values within low-precision rounding of eager's; failing
    that, no farther from the float32 ``reference`` than three times eager's own distance to it
    (thunder may round at other places than eager, as a fusion executor does)."""
    got, want = _flat(got), _flat(want)
    refs = _flat(reference) if reference is not None else [None] * len(want)
    assert len(got) == len(want), what
    for i, (g, w, r) in enumerate(zip(got, want, refs, strict=True)):
        assert (g is None) == (w is None), (what, i)
        if w is None:
            continue
        assert g.dtype == w.dtype, (what, i, g.dtype, w.dtype)
        assert g.device == w.device and g.shape == w.shape, (what, i)
        if not w.is_floating_point():
            torch.testing.assert_close(g, w)
            continue
        scale = max(1.0, w.double().abs().max().item()) if w.numel() else 1.0
        try:
            torch.testing.assert_close(g.double(), w.double(), atol=TOL * scale, rtol=TOL)
        except AssertionError:
            if r is None:
                raise
            r = r.double()
            bound = 3 * (w.double() - r).abs().max().item() + TOL * scale
            torch.testing.assert_close(
                g.double(), r, atol=bound, rtol=0, msg=lambda m: f"{what} {i}: {m}"
            )


def _rand(
    *shape: int, dtype: torch.dtype = torch.float32, low: float = -1.0, high: float = 1.0
) -> torch.Tensor:
    return torch.empty(shape, device=DEVICE, dtype=dtype).uniform_(low, high)


def _ints(*shape: int, high: int = 4) -> torch.Tensor:
    return torch.randint(0, high, shape, device=DEVICE)


# Each function's inputs are float32 unless said; a @ b makes a lower-precision tensor, so that
# the float32 ops see the autocast dtype come in. (name -> function, inputs)
Case = tuple[Callable[..., Any], Callable[[], list[torch.Tensor]]]


def _low(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b  # the autocast dtype


def _pos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a @ b).abs() + 0.5


def _unit(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.tanh(a @ b) * 0.9


def _ab() -> list[torch.Tensor]:
    return [_rand(6, 8), _rand(8, 5)]


def _unary(op: Callable[[torch.Tensor], torch.Tensor], domain: Callable[..., Any] = _low) -> Case:
    return (lambda a, b: op(domain(a, b)), _ab)


CASES: dict[str, Case] = {
    # lower_precision_fp
    "linear": (lambda x, w, b: F.linear(x, w, b), lambda: [_rand(4, 6, 8), _rand(5, 8), _rand(5)]),
    "matmul": (torch.matmul, lambda: [_rand(2, 6, 8), _rand(8, 5)]),
    "matmul_vector": (torch.matmul, lambda: [_rand(8), _rand(8)]),
    "mm": (torch.mm, _ab),
    "bmm": (torch.bmm, lambda: [_rand(3, 6, 8), _rand(3, 8, 5)]),
    "addmm": (torch.addmm, lambda: [_rand(6, 5), _rand(6, 8), _rand(8, 5)]),
    "baddbmm": (torch.baddbmm, lambda: [_rand(3, 6, 5), _rand(3, 6, 8), _rand(3, 8, 5)]),
    "einsum": (lambda a, b: torch.einsum("bij,kj->bik", a, b), lambda: [_rand(2, 6, 8), _rand(5, 8)]),
    "einsum_one_operand": (lambda a: torch.einsum("ij->ji", a), lambda: [_rand(6, 8)]),
    "prelu": (lambda a, b, w: F.prelu(a @ b, w), lambda: [*_ab(), _rand(1)]),
    "conv1d": (F.conv1d, lambda: [_rand(2, 3, 16), _rand(4, 3, 3), _rand(4)]),
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1), lambda: [_rand(2, 3, 8, 8), _rand(4, 3, 3, 3)]),
    "conv3d": (F.conv3d, lambda: [_rand(1, 2, 5, 5, 5), _rand(3, 2, 3, 3, 3)]),
    "conv_transpose1d": (F.conv_transpose1d, lambda: [_rand(2, 3, 8), _rand(3, 4, 3)]),
    "conv_transpose2d": (F.conv_transpose2d, lambda: [_rand(2, 3, 5, 5), _rand(3, 4, 3, 3)]),
    "conv_transpose3d": (F.conv_transpose3d, lambda: [_rand(1, 2, 3, 3, 3), _rand(2, 3, 2, 2, 2)]),
    "sdpa_causal": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        lambda: [_rand(2, 4, 16, 32) for _ in range(3)],
    ),
    "sdpa_mask": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda: [*(_rand(2, 4, 16, 32) for _ in range(3)), _rand(16, 16)],
    ),
    # fp32
    "acos": _unary(torch.acos, _unit),
    "asin": _unary(torch.asin, _unit),
    "cosh": _unary(torch.cosh),
    "erfinv": _unary(torch.erfinv, _unit),
    "exp": _unary(torch.exp),
    "expm1": _unary(torch.expm1),
    "log": _unary(torch.log, _pos),
    "log10": _unary(torch.log10, _pos),
    "log2": _unary(torch.log2, _pos),
    "log1p": _unary(torch.log1p, _pos),
    "reciprocal": _unary(torch.reciprocal, _pos),
    "rsqrt": _unary(torch.rsqrt, _pos),
    "sinh": _unary(torch.sinh),
    "tan": _unary(torch.tan, _unit),
    "softplus": _unary(F.softplus),
    "pow_scalar_exponent": _unary(lambda x: x**2),
    "pow_scalar_base": _unary(lambda x: 2**x),
    "pow_tensors": (lambda a, b: torch.pow(_pos(a, b), a @ b), _ab),
    "square": _unary(torch.square),
    "layer_norm": (
        lambda a, b, w, c: F.layer_norm(a @ b, (5,), w, c),
        lambda: [*_ab(), _rand(5), _rand(5)],
    ),
    "group_norm": (
        lambda x, w, g, c: F.group_norm(F.conv1d(x, w), 2, g, c),
        lambda: [_rand(2, 3, 8), _rand(4, 3, 1), _rand(4), _rand(4)],
    ),
    "rms_norm": (lambda a, b, w: F.rms_norm(a @ b, (5,), w), lambda: [*_ab(), _rand(5)]),
    "rms_norm_low_weight": (
        lambda a, b, w, v: F.rms_norm(a @ b, (5,), w @ v),
        lambda: [*_ab(), _rand(5, 3), _rand(3)],
    ),
    "cosine_similarity": (lambda a, b, c: F.cosine_similarity(a @ b, c), lambda: [*_ab(), _rand(6, 5)]),
    "normalize": _unary(F.normalize),
    "pairwise_distance": (lambda a, b, c: F.pairwise_distance(a @ b, c), lambda: [*_ab(), _rand(6, 5)]),
    "logsumexp": _unary(lambda x: torch.logsumexp(x, 1)),
    "nll_loss": (lambda a, b, t: F.nll_loss(a @ b, t), lambda: [*_ab(), _ints(6, high=5)]),
    "mse_loss": (lambda a, b, c: F.mse_loss(a @ b, c), lambda: [*_ab(), _rand(6, 5)]),
    "l1_loss": (lambda a, b, c: F.l1_loss(a @ b, c), lambda: [*_ab(), _rand(6, 5)]),
    "smooth_l1_loss": (lambda a, b, c: F.smooth_l1_loss(a @ b, c), lambda: [*_ab(), _rand(6, 5)]),
    "huber_loss": (lambda a, b, c: F.huber_loss(a @ b, c), lambda: [*_ab(), _rand(6, 5)]),
    "kl_div": (
        lambda a, b, c: F.kl_div(F.log_softmax(a @ b, -1), c.softmax(-1), reduction="batchmean"),
        lambda: [*_ab(), _rand(6, 5)],
    ),
    "bce_with_logits": (
        lambda a, b, c: F.binary_cross_entropy_with_logits(a @ b, c),
        lambda: [*_ab(), _rand(6, 5, low=0.0)],
    ),
    "cross_entropy": (lambda a, b, t: F.cross_entropy(a @ b, t), lambda: [*_ab(), _ints(6, high=5)]),
    "cross_entropy_weight_none": (
        lambda a, b, t, w: F.cross_entropy(a @ b, t, w.detach(), reduction="none"),
        lambda: [*_ab(), _ints(6, high=5), _rand(5, low=0.1)],
    ),
    "cross_entropy_label_smoothing": (
        lambda a, b, t: F.cross_entropy(a @ b, t, label_smoothing=0.1),
        lambda: [*_ab(), _ints(6, high=5)],
    ),
    "cross_entropy_probabilities": (
        lambda a, b, p: F.cross_entropy(a @ b, p.softmax(-1)),
        lambda: [*_ab(), _rand(6, 5)],
    ),
    # fp32_set_opt_dtype
    "sum": _unary(torch.sum),
    "sum_dim": _unary(lambda x: x.sum(1)),
    "sum_dtype": _unary(lambda x: x.sum(1, dtype=torch.float16)),
    "prod": _unary(lambda x: (x * 0.1 + 1).prod(1)),
    "cumsum": _unary(lambda x: x.cumsum(1)),
    "cumprod": _unary(lambda x: (x * 0.1 + 1).cumprod(1)),
    "softmax": _unary(lambda x: x.softmax(-1)),
    "softmax_dtype": _unary(lambda x: x.softmax(-1, dtype=torch.bfloat16)),
    "log_softmax": _unary(lambda x: F.log_softmax(x, -1)),
    "softmin": _unary(lambda x: F.softmin(x, -1)),
    "vector_norm": _unary(torch.linalg.vector_norm),
    "norm": _unary(lambda x: x.norm(dim=1)),
    # promote
    "addcmul": (lambda a, b, c, d: torch.addcmul(a @ b, c, a @ b), lambda: [*_ab(), _rand(6, 5), _rand(1)]),
    "addcdiv": (lambda a, b, c: torch.addcdiv(c, a @ b, _pos(a, b)), lambda: [*_ab(), _rand(6, 5)]),
    "atan2": (lambda a, b, c: torch.atan2(a @ b, c), lambda: [*_ab(), _rand()]),
    "index_put": (
        lambda a, b, i, v: (a @ b).index_put((i,), v),
        lambda: [*_ab(), torch.tensor([0, 2], device=DEVICE), _rand(2, 5)],
    ),
    "scatter_add": (
        lambda a, b, i, s: torch.scatter_add(a @ b, 1, i, s),
        lambda: [*_ab(), _ints(6, 3, high=5), _rand(6, 3)],
    ),
    # off the lists, float64, in place
    "off_the_lists": (
        lambda a, b: (F.gelu(a @ b) + torch.sigmoid(a @ b) * F.silu(a @ b)).mean(0),
        _ab,
    ),
    "mixed_float64": (
        lambda a, b, c: (a @ b).exp() + c.exp().sum() + (c @ c.mT).softmax(-1).sum(),
        lambda: [*_ab(), _rand(3, 3, dtype=torch.float64)],
    ),
    "exp_in_place": (lambda a, b: (a @ b).exp_() * 2, _ab),
    "mlp_pieces": (
        lambda x, w1, w2, t: F.cross_entropy(F.linear(F.gelu(F.linear(x, w1)), w2), t),
        lambda: [_rand(6, 8), _rand(16, 8), _rand(5, 16), _ints(6, high=5)],
    ),
    # torch callables without an op in thunder (torch_fallback)
    "fallback_dot": (lambda a, b: torch.dot(a, b) * 2, lambda: [_rand(8), _rand(8)]),
    "fallback_cdist": (lambda a, b: torch.cdist(a @ b, a @ b), _ab),
    "fallback_mv": (lambda a, b: torch.mv(a, b) + 1, lambda: [_rand(6, 8), _rand(8)]),
}  # fmt: skip
NO_GRADIENTS = {"sum_dtype", "softmax_dtype"}  # float16/bfloat16 by request: compared forward only


def _inputs(name: str, grad: bool) -> list[torch.Tensor]:
    torch.manual_seed(hash(name) % 1000)
    return [t.requires_grad_(grad and t.is_floating_point()) for t in CASES[name][1]()]


def _fresh(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]


def _in_block(fn: Callable[..., Any], dtype: torch.dtype) -> Callable[..., Any]:
    def program(*args: Any) -> Any:
        with torch.autocast("cuda", dtype=dtype):
            return fn(*args)

    return program


def _run(fn: Callable[..., Any], args: list[torch.Tensor], dtype: torch.dtype, block: bool) -> Any:
    if block:
        return _in_block(fn, dtype)(*args)
    with torch.autocast("cuda", dtype=dtype):
        return fn(*args)


def _grads(outs: list[Any], inputs: list[torch.Tensor]) -> list[Any]:
    diff = [t for t in inputs if t.requires_grad]
    pairs = [
        (o, torch.randn(o.shape, generator=torch.Generator().manual_seed(i)).to(o))
        for i, o in enumerate(outs)
        if o.is_floating_point() and o.requires_grad
    ]
    if not pairs or not diff:
        return []
    return list(
        torch.autograd.grad([o for o, _ in pairs], diff, [c for _, c in pairs], allow_unused=True)
    )


@pytest.mark.parametrize("block", [False, True], ids=["around", "inside"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "f16"])
@pytest.mark.parametrize("name", list(CASES))
def test_ops_like_eager(name: str, dtype: torch.dtype, block: bool) -> None:
    fn = CASES[name][0]
    grad = name not in NO_GRADIENTS
    inputs = _inputs(name, grad)
    ours, theirs, exact = _fresh(inputs), _fresh(inputs), _fresh(inputs)
    jfn = thunder.jit(_in_block(fn, dtype) if block else fn)
    got = _flat(jfn(*ours) if block else _run(jfn, ours, dtype, block=False))
    want = _flat(_run(fn, theirs, dtype, block))
    reference = _flat(fn(*exact))  # float32, no autocast
    _close(got, want, reference, "forward")
    if grad:
        _close(_grads(got, ours), _grads(want, theirs), _grads(reference, exact), "gradients")
    # the second call runs the cached program
    again = _flat(jfn(*_fresh(inputs)) if block else _run(jfn, _fresh(inputs), dtype, False))
    _close(again, want, reference, "second call")


def test_banned_binary_cross_entropy_raises_as_in_eager() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy(torch.sigmoid(a), b)

    a, b = _rand(4, 3), _rand(4, 3, low=0.0)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            fn(a, b)
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            thunder.jit(fn)(a, b)


def test_sdpa_with_dropout_dtypes() -> None:
    """Attention with dropout runs as torch's own kernel (a torch_fallback), on the inputs autocast
    converts: the output in the autocast dtype (its random numbers are torch's)."""

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)

    q, k, v = (_rand(2, 4, 16, 32).requires_grad_() for _ in range(3))
    for dtype in DTYPES:
        with torch.autocast("cuda", dtype=dtype):
            got, want = thunder.jit(fn)(q, k, v), fn(q, k, v)
        assert got.dtype == want.dtype == dtype
        got.float().sum().backward()
        assert q.grad is not None and q.grad.dtype == torch.float32


def test_regions_off_and_nested_with_cpu() -> None:
    """A disabled CUDA block inside ambient CUDA autocast, CPU autocast nested with CUDA's (each
    device's lists for its tensors), cache_enabled=False, and the autocast queries."""

    def fn(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[Any, ...]:
        x = a @ b
        with torch.autocast("cuda", enabled=False):
            y = a @ b
            off = torch.is_autocast_enabled("cuda")
        with (
            torch.autocast("cpu", dtype=torch.bfloat16),
            torch.autocast("cuda", dtype=torch.float16, cache_enabled=False),
        ):
            z = a @ b, c @ c, (a @ b).softmax(-1)
            dtype = torch.get_autocast_dtype("cuda")
        return x, y, *z, a.sum() * (2 if off else 3), torch.ones(1, device=a.device, dtype=dtype)

    a, b, c = _rand(6, 8), _rand(8, 5), torch.randn(4, 4)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        got, want = thunder.jit(fn)(a, b, c), fn(a, b, c)
    assert [g.dtype for g in want] == [
        torch.bfloat16, torch.float32, torch.float16, torch.bfloat16, torch.float32, torch.float32, torch.float16,
    ]  # fmt: skip
    _close(got, want)


def test_cpu_tensors_under_cuda_autocast_are_untouched() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = a @ b
        return h, h.exp().softmax(-1), F.layer_norm(h, (5,)), h.sum()

    a, b = torch.randn(6, 8), torch.randn(8, 5)
    plain = fn(a, b)
    for block in (False, True):
        if block:
            program = _in_block(fn, torch.bfloat16)
            got, want = thunder.jit(program)(a, b), program(a, b)
        else:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                got, want = thunder.jit(fn)(a, b), fn(a, b)
        for g, w, p in zip(got, want, plain, strict=True):
            assert g.dtype == w.dtype == p.dtype == torch.float32
            torch.testing.assert_close(g, w)
            torch.testing.assert_close(g, p)


# ---- models -------------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.net(x)
        return logits, F.cross_entropy(logits, t)


class Attention(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm(x)).split(c, dim=-1)
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).reshape(b, t, c)
        return x + self.proj(y).softmax(-1) * 0.1


class GPTLoss(nn.Module):
    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        self.config = GPTConfig(
            n_layer=2, n_head=4, n_embd=64, vocab_size=128, block_size=32, dropout=dropout
        )
        self.gpt = GPT(self.config)

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.gpt(idx)
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def _model_inputs(name: str) -> list[torch.Tensor]:
    if name == "mlp":
        return [_rand(16, 32), _ints(16, high=10)]
    if name == "attention":
        return [_rand(2, 16, 64)]
    if name == "conv_bn":
        return [torch.randn(4, 3, 16, 16, device=DEVICE)]
    return [_ints(2, 32, high=128), _ints(2, 32, high=128)]


MODELS: dict[str, Callable[[], nn.Module]] = {
    "mlp": MLP,
    "attention": Attention,
    "conv_bn": ConvBlock,
    "gpt": GPTLoss,
}


@pytest.mark.parametrize("block", [False, True], ids=["around", "inside"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "f16"])
@pytest.mark.parametrize("name", list(MODELS))
def test_models_like_eager(name: str, dtype: torch.dtype, block: bool) -> None:
    torch.manual_seed(0)
    model = MODELS[name]().to(DEVICE)
    reference, exact = copy.deepcopy(model), copy.deepcopy(model)
    jm = thunder.jit(_in_block(model, dtype) if block else model)
    for step in range(2):
        inputs = _model_inputs(name)
        got = _flat(jm(*inputs) if block else _run(jm, inputs, dtype, False))
        want = _flat(_run(reference, inputs, dtype, block))
        ref = _flat(exact(*inputs))
        _close(got, want, ref, f"forward {step}")
        losses = [sum(o.float().square().mean() for o in outs) for outs in (got, want, ref)]
        for loss in losses:
            loss.backward()
        for (pname, p), q, r in zip(
            model.named_parameters(), reference.parameters(), exact.parameters(), strict=True
        ):
            _close([p.grad], [q.grad], [r.grad], f"grad of {pname} {step}")
        for m in (model, reference, exact):
            m.zero_grad(set_to_none=True)
        for a, b in zip(model.buffers(), reference.buffers(), strict=True):
            _close([a], [b], what="buffers")  # BatchNorm's running statistics


def test_gpt_with_dropout_training_dtypes() -> None:
    torch.manual_seed(0)
    model = GPTLoss(dropout=0.1).to(DEVICE).train()
    reference = copy.deepcopy(model)
    jm = thunder.jit(model)
    idx, targets = _model_inputs("gpt")
    for dtype in DTYPES:
        with torch.autocast("cuda", dtype=dtype):
            got, want = jm(idx, targets), reference(idx, targets)
        assert [g.dtype for g in got] == [w.dtype for w in want] == [dtype, torch.float32]
        got[1].backward()
        assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in model.parameters())
        model.zero_grad(set_to_none=True)
