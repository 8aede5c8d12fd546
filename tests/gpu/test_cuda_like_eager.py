"""On a CUDA device, jitted programs equal eager PyTorch: forward and gradients of functions, the
zoo's models and a training step, under every executor that runs on CUDA (the default list,
torch.compile regions, the Triton kernels compiled for the device), random numbers bit for bit
under one seed, autocast to bfloat16, attention kernels, and the cache keyed by device.

Skipped where no CUDA device is present; ``./dev gpu-check`` runs it on a GPU machine."""

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

import hf_zoo  # noqa: E402  (tests/e2e, on the path through tests/conftest.py)

from thunder.models import GPT, ConvBlock, GPTConfig  # noqa: E402
from thunder_executors import get_available_executors  # noqa: E402

pytestmark = pytest.mark.filterwarnings("error:thunder.jit")  # an eager fallback fails the test
CUDA = torch.device("cuda")
AVAILABLE = {e.name for e in get_available_executors()}
EXECUTOR_LISTS = {
    "default": None,
    "torch": ("torch_ops", "torch"),
    "torchcompile": ("torchcompile", "torch_ops", "torch"),
    "triton": ("triton", "torch_ops", "torch"),
}
# bfloat16 keeps 8 bits of mantissa: a chain of ops rounds differently when an executor keeps an
# intermediate in float32 (as fusion does), so results agree to a few units of the last place.
BF16_TOLERANCE = {"atol": 6e-2, "rtol": 6e-2}


def _executors(name: str) -> tuple[str, ...] | None:
    executors = EXECUTOR_LISTS[name]
    if executors is not None and executors[0] not in AVAILABLE and executors[0] != "torch_ops":
        pytest.skip(f"executor {executors[0]} unavailable here")
    return executors


def _jit(fn: Any, executors: str = "default") -> Any:
    chosen = _executors(executors)
    return thunder.jit(fn) if chosen is None else thunder.jit(fn, executors=chosen)


def _grads(out: torch.Tensor, inputs: list[torch.Tensor], seed: int = 7) -> list[Any]:
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed)).to(out)
    return list(torch.autograd.grad(out, inputs, g, allow_unused=True))


def _close(got: Any, want: Any, **tol: float) -> None:
    for a, b in zip(got, want, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.device == b.device, (a.device, b.device)
            torch.testing.assert_close(a, b, **tol)


# ---- functions: forward and gradients -----------------------------------------------------

FUNCTIONS: dict[str, Callable[..., torch.Tensor]] = {
    "elementwise": lambda a, b: (a.sin() * b + a.exp() / (1 + b.abs())).tanh(),
    "reductions": lambda a, b: a.sum(-1, keepdim=True) * b.mean(0) - a.amax(1, keepdim=True),
    "softmax_matmul": lambda a, b: torch.softmax(a @ b.mT, -1) @ b,
    "layer_norm_gelu": lambda a, b: F.gelu(F.layer_norm(a, a.shape[-1:]) * b),
    "cross_entropy": lambda a, b: F.cross_entropy(a * b, torch.arange(a.shape[0], device=a.device)),
    "views_and_cat": lambda a, b: torch.cat([a.t().reshape(-1), b[1:, ::2].flatten()]) * 2,
    "where_and_compare": lambda a, b: torch.where(a > b, a - b, b * 0.5).cumsum(0),
    "cpu_scalar_tensor": lambda a, b: a * torch.tensor(3.0) + b,
}


def _no_less_accurate(got: list[Any], want: list[Any], exact: list[Any]) -> None:
    """Low-precision results are about as close to float32's as eager's are (three times its
    error, plus a few bfloat16 steps): an executor that keeps intermediates in float32 rounds
    differently."""
    for g, w, e in zip(got, want, exact, strict=True):
        assert g.dtype == w.dtype and g.device == w.device
        bound = 3 * (w.float() - e).abs().max().item() + 2e-2 * max(1.0, e.abs().max().item())
        torch.testing.assert_close(g.float(), e, atol=bound, rtol=0)


@pytest.mark.parametrize("executors", list(EXECUTOR_LISTS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_functions_and_gradients(name: str, dtype: torch.dtype, executors: str) -> None:
    fn = FUNCTIONS[name]
    jfn = _jit(fn, executors)
    for _ in range(2):  # the first call, then the cached program
        a = torch.randn(8, 8, device=CUDA, dtype=dtype, requires_grad=True)
        b = torch.randn(8, 8, device=CUDA, dtype=dtype, requires_grad=True)
        want = fn(a, b)
        got = jfn(a, b)
        got_grads, want_grads = _grads(got, [a, b]), _grads(want, [a, b])
        if dtype == torch.float32:
            _close([got, *got_grads], [want, *want_grads])
        else:
            a32, b32 = (t.detach().float().requires_grad_() for t in (a, b))
            exact = fn(a32, b32)
            exact_grads = _grads(exact, [a32, b32])
            _no_less_accurate([got, *got_grads], [want, *want_grads], [exact, *exact_grads])
    assert thunder.cache_misses(jfn) == 1


def test_in_place_writes_on_cuda() -> None:
    def fn(x, buf):
        buf.add_(x)
        y = x.clone()
        y[1:3].mul_(2)
        return y.relu_() + buf

    jfn = thunder.jit(fn)
    x = torch.randn(5, 4, device=CUDA)
    buf_a, buf_b = torch.zeros(5, 4, device=CUDA), torch.zeros(5, 4, device=CUDA)
    for _ in range(2):
        _close([jfn(x, buf_a), buf_a], [fn(x, buf_b), buf_b])


def test_device_change_compiles_again_and_stays_on_its_device() -> None:
    jfn = thunder.jit(lambda a: a * 2 + 1)
    cpu, cuda = torch.randn(3), torch.randn(3, device=CUDA)
    _close([jfn(cpu), jfn(cuda)], [cpu * 2 + 1, cuda * 2 + 1])
    assert thunder.cache_misses(jfn) == 2


# ---- modules: the zoo, a conv block, a training step --------------------------------------

ZOO = ("bert", "gpt2", "llama", "t5", "vit", "resnet")


@pytest.mark.parametrize("executors", ["default", "torchcompile"])
@pytest.mark.parametrize("name", ZOO)
def test_zoo_forward_and_training(name: str, executors: str) -> None:
    model = hf_zoo.build(name).to(CUDA)
    reference = copy.deepcopy(model)
    jm = _jit(model, executors)
    kwargs = {k: v.to(CUDA) for k, v in hf_zoo.inputs(name, 1).items()}
    with torch.no_grad():
        torch.testing.assert_close(hf_zoo.logits(jm(**kwargs)), hf_zoo.logits(reference(**kwargs)))
    model.train()
    reference.train()
    got = hf_zoo.logits(jm(**kwargs)).float().square().mean()
    want = hf_zoo.logits(reference(**kwargs)).float().square().mean()
    torch.testing.assert_close(got, want)
    got.backward()
    want.backward()
    expected = dict(reference.named_parameters())
    for pname, p in model.named_parameters():
        _close([p.grad], [expected[pname].grad], atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("executors", ["default", "torchcompile"])
@pytest.mark.parametrize("training", [False, True])
def test_conv_block(training: bool, executors: str) -> None:
    torch.manual_seed(0)
    model = ConvBlock().to(CUDA).train(training)
    reference = copy.deepcopy(model)
    jm = _jit(model, executors)
    for _ in range(2):
        x = torch.randn(4, 3, 32, 32, device=CUDA)
        with torch.set_grad_enabled(training):
            got, want = jm(x), reference(x)
        _close([got], [want], atol=1e-4, rtol=1e-4)
        if training:
            got.square().mean().backward()
            want.square().mean().backward()
            for p, q in zip(model.parameters(), reference.parameters(), strict=True):
                _close([p.grad], [q.grad], atol=1e-4, rtol=1e-3)
        for a, b in zip(model.buffers(), reference.buffers(), strict=True):
            _close([a], [b])  # running statistics updated as eager updates them


@pytest.mark.parametrize("executors", ["default", "torchcompile", "triton"])
def test_gpt_training_steps(executors: str) -> None:
    config = GPTConfig(n_layer=2, n_head=4, n_embd=64, vocab_size=128, block_size=32)
    torch.manual_seed(0)
    model = GPT(config).to(CUDA)
    reference = copy.deepcopy(model)
    jm = _jit(model, executors)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-3)
    for _ in range(3):
        idx = torch.randint(0, config.vocab_size, (2, config.block_size), device=CUDA)
        targets = torch.randint(0, config.vocab_size, (2, config.block_size), device=CUDA)
        losses = []
        for m, o in ((jm, opt), (reference, ref_opt)):
            o.zero_grad(set_to_none=True)
            logits = m(idx)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            loss.backward()
            o.step()
            losses.append(loss)
        torch.testing.assert_close(losses[0], losses[1], atol=1e-4, rtol=1e-4)
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-4, rtol=1e-3)


# ---- attention, autocast, the Triton kernels -----------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("is_causal", [False, True])
def test_scaled_dot_product_attention(dtype: torch.dtype, is_causal: bool) -> None:
    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)

    jfn = thunder.jit(fn)
    q, k, v = (
        torch.randn(2, 4, 64, 32, device=CUDA, dtype=dtype, requires_grad=True) for _ in range(3)
    )
    tol = {} if dtype == torch.float32 else BF16_TOLERANCE
    got, want = jfn(q, k, v), fn(q, k, v)
    _close([got], [want], **tol)
    _close(_grads(got, [q, k, v]), _grads(want, [q, k, v]), **tol)


def test_autocast_to_bfloat16_matches_eager() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 8)).to(CUDA)
    jm = thunder.jit(model)
    x = torch.randn(16, 32, device=CUDA, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        got, want = jm(x), model(x)
    assert got.dtype == want.dtype == torch.bfloat16
    _close([got], [want], **BF16_TOLERANCE)
    _close(_grads(got, [x]), _grads(want, [x]), **BF16_TOLERANCE)


def test_triton_kernels_run_on_the_device() -> None:
    if "triton" not in AVAILABLE:
        pytest.skip("triton unavailable")

    def fn(x, t):
        return F.cross_entropy(x, t) + torch.softmax(x, -1).amax()

    jfn = thunder.jit(fn, executors=("triton", "torch_ops", "torch"))
    x = torch.randn(64, 1000, device=CUDA, requires_grad=True)
    t = torch.randint(0, 1000, (64,), device=CUDA)
    got, want = jfn(x, t), fn(x, t)
    _close([got], [want])
    _close(_grads(got, [x]), _grads(want, [x]))
    source = thunder.last_traces(jfn)[-1].python()
    assert "triton." in source, source


# ---- random numbers: bit for bit under one seed ---------------------------------------------

RANDOM: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "F.dropout": lambda x: F.dropout(x, 0.5, True),
    "dropout_p03_twice": lambda x: F.dropout(F.dropout(x, 0.2, True).sin(), 0.3, True),
    "nn.Dropout": nn.Dropout(0.4),
    "sdpa_dropout": lambda x: F.scaled_dot_product_attention(x, x * 2, x + 1, dropout_p=0.5),
    "bernoulli": lambda x: torch.bernoulli(torch.sigmoid(x)),
    "rand_like": lambda x: torch.rand_like(x) * x,
    "randn_like": lambda x: torch.randn_like(x) * x,
    "rand_on_device": lambda x: torch.rand(3, 4, device=x.device) + x.sum(),
    "randint_on_device": lambda x: torch.randint(0, 10, (3, 4), device=x.device) + x.sum(),
    "normal_tensors": lambda x: torch.normal(x, x.abs()),
    "uniform_": lambda x: x.detach().clone().uniform_(),
    "normal_": lambda x: x.detach().clone().normal_(),
    "bernoulli_": lambda x: x.detach().clone().bernoulli_(0.3),
    "exponential_": lambda x: x.detach().clone().exponential_(),
}


def _draw(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, grad: bool) -> list[Any]:
    x = x.clone().requires_grad_(grad)
    torch.manual_seed(1234)
    out = fn(x)
    after = [torch.rand(4, device=CUDA), torch.rand(4)]  # both generators left as eager leaves them
    gx = _grads(out, [x])[0] if grad and out.requires_grad else None
    return [out, *after, gx]


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("name", list(RANDOM))
def test_same_seed_same_numbers_on_cuda(name: str, grad: bool) -> None:
    fn = RANDOM[name]
    jfn = thunder.jit(fn)
    for _ in range(2):
        x = torch.randn(2, 4, 8, 8, device=CUDA)
        with torch.set_grad_enabled(grad):
            got, want = _draw(jfn, x, grad), _draw(fn, x, grad)
        for a, b in zip(got, want, strict=True):
            assert (a is None) == (b is None)
            if a is not None:
                assert a.dtype == b.dtype and a.shape == b.shape
                assert torch.equal(a, b), (name, a, b)
