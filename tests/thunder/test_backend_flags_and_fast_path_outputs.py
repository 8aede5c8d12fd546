"""torch's backend flags (``cudnn.flags``, ``mkldnn.flags``, ``sdpa_kernel``, deterministic mode,
float32 matmul precision) inside and around compiled programs, and torch callables whose kernel
returns None where their fake kernel says a tensor (``nn.MultiheadAttention``'s fast path with
``need_weights=False``): each compiled, never run eagerly, against eager torch on fresh inputs
over several calls, values and gradients."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import thunder

E, HEADS = 32, 4


def _no_eager_fallback(jitted: Any) -> None:
    stats = thunder.compile_stats(jitted)
    assert stats.eager_fallbacks == 0, stats.last_eager_reason
    assert stats.split_calls == 0, stats.last_split_reason


def _leaves(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
        for a in args
    )


def _check_like_eager(
    fn: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    calls: int = 3,
    exact: bool = False,
) -> Any:
    """``fn`` and its jitted version on ``calls`` fresh inputs: equal outputs and gradients of
    the tensors that require grad (bit for bit where ``exact``)."""
    jitted = thunder.jit(fn)
    tol = {"rtol": 0, "atol": 0} if exact else {}
    for _ in range(calls):
        args = make_args()
        e_args, j_args = _leaves(args), _leaves(args)
        expected, got = fn(*e_args), jitted(*j_args)
        torch.testing.assert_close(got, expected, equal_nan=True, **tol)
        e_inputs = [a for a in e_args if isinstance(a, torch.Tensor) and a.requires_grad]
        if not e_inputs:
            continue
        j_inputs = [a for a in j_args if isinstance(a, torch.Tensor) and a.requires_grad]
        first = expected[0] if isinstance(expected, tuple) else expected
        cotangent = torch.randn_like(first)
        e_grads = torch.autograd.grad(first, e_inputs, cotangent)
        j_grads = torch.autograd.grad(
            got[0] if isinstance(got, tuple) else got, j_inputs, cotangent
        )
        torch.testing.assert_close(j_grads, e_grads, **tol)
    _no_eager_fallback(jitted)
    return jitted


# -- kernels that return None where their fake kernel says a tensor ------------------------------


def _padding(batch: int, seq: int) -> torch.Tensor:
    mask = torch.zeros(batch, seq, dtype=torch.bool)
    for i in range(batch):
        mask[i, seq - 1 - (i % (seq - 1)) :] = True
    return mask


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("weights", [{"need_weights": False}, {}, {"average_attn_weights": False}])
def test_multihead_attention_weights_decide_like_eager(
    batch_first: bool, padding: bool, weights: dict[str, Any]
) -> None:
    """The fast path's weights are None without ``need_weights``: code deciding on it takes
    eager's branch, and the weights it returns are eager's."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(E, HEADS, batch_first=batch_first).eval()

    def attend(x: torch.Tensor, mask: torch.Tensor | None) -> Any:
        out, w = mha(x, x, x, key_padding_mask=mask, **weights)
        if w is None:
            return out * 2, w
        return out + w.mean(), w

    def make_args() -> tuple[Any, ...]:
        x = torch.randn(3, 6, E) if batch_first else torch.randn(6, 3, E)
        return x, _padding(3, 6) if padding else None

    with torch.no_grad():
        jitted = _check_like_eager(attend, make_args)
        with torch.profiler.profile() as prof:
            attend(*make_args())
    fused = any(e.key == "aten::_native_multi_head_attention" for e in prof.key_averages())
    assert fused == ("_native_multi_head_attention" in str(thunder.last_traces(jitted)[-1]))


@torch.library.custom_op("thunder_test_backend_flags::halves", mutates_args=())
def _halves(x: torch.Tensor, both: bool) -> tuple[torch.Tensor, torch.Tensor]:
    # An undefined second output where ``both`` is False (None in Python), as some aten kernels
    # return; the fake kernel below says an empty tensor there.
    return x / 2, (x / 2 if both else None)  # type: ignore[return-value]


@_halves.register_fake
def _(x: torch.Tensor, both: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(x), (torch.empty_like(x) if both else x.new_empty(0))


def _halves_backward(ctx: Any, grad_a: torch.Tensor, grad_b: torch.Tensor | None) -> Any:
    return (grad_a if grad_b is None else grad_a + grad_b) / 2, None


_halves.register_autograd(_halves_backward)


@pytest.mark.parametrize("both", [False, True])
def test_undefined_kernel_output_decides_like_eager(both: bool) -> None:
    def halves(x: torch.Tensor) -> Any:
        a, b = _halves(x, both)
        return (a, b is None) if b is None else (a + b.sum(), False)

    _check_like_eager(halves, lambda: (torch.randn(5, requires_grad=True),))


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("layers", [1, 2])
def test_transformer_encoder_fast_paths_like_eager(
    batch_first: bool, padding: bool, layers: int
) -> None:
    """``TransformerEncoderLayer``'s fused kernel and ``TransformerEncoder``'s nested-tensor path
    (a left-aligned padding mask) in eval mode under no_grad."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(E, HEADS, 64, dropout=0.0, batch_first=batch_first)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (enable_nested_tensor needs batch_first)
        encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=True)
    encoder.eval()

    def encode(x: torch.Tensor, mask: torch.Tensor | None) -> Any:
        return encoder(x, src_key_padding_mask=mask), layer.eval()(x, src_key_padding_mask=mask)

    def make_args() -> tuple[Any, ...]:
        x = torch.randn(3, 6, E) if batch_first else torch.randn(6, 3, E)
        return x, _padding(3, 6) if padding else None

    with torch.no_grad():
        _check_like_eager(encode, make_args)


# -- backend flags set inside the program ----------------------------------------------------------


def _conv_under_mkldnn_off(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    with torch.backends.mkldnn.flags(enabled=False):
        y = torch.nn.functional.conv2d(x, w, padding=1)
    return y.relu()


def _conv_inputs() -> tuple[torch.Tensor, ...]:
    return torch.randn(2, 8, 16, 16, requires_grad=True), torch.randn(
        16, 8, 3, 3, requires_grad=True
    )


def test_conv_under_mkldnn_flags_runs_eagers_kernel() -> None:
    """With oneDNN off eager's CPU convolution is another kernel (other roundings): the
    compiled program runs that one, bit for bit, and its gradients."""
    x, w = _conv_inputs()
    with torch.no_grad():
        assert not torch.equal(
            torch.nn.functional.conv2d(x, w, padding=1), _conv_under_mkldnn_off(x, w)
        )
    jitted = _check_like_eager(_conv_under_mkldnn_off, _conv_inputs, exact=True)
    assert thunder.compile_stats(jitted).compilations == 1
    assert torch.backends.mkldnn.enabled


def _attention_under(backends: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    def attend(q: torch.Tensor) -> torch.Tensor:
        with sdpa_kernel(backends):
            out = torch.nn.functional.scaled_dot_product_attention(q, q * 0.5, q)
        return out * 2

    return attend


@pytest.mark.parametrize(
    "backends",
    [SDPBackend.MATH, [SDPBackend.FLASH_ATTENTION], [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]],
)
def test_sdpa_kernel_picks_eagers_backend(backends: Any) -> None:
    attend = _attention_under(backends)
    _check_like_eager(attend, lambda: (torch.randn(2, 3, 64, 16, requires_grad=True),), exact=False)
    # the forward bit for bit: the math and flash kernels round differently
    q = torch.randn(2, 3, 64, 16)
    with torch.no_grad():
        torch.testing.assert_close(thunder.jit(attend)(q), attend(q), rtol=0, atol=0)
    assert torch.backends.cuda.math_sdp_enabled() and torch.backends.cuda.flash_sdp_enabled()


def test_sdpa_kernel_without_a_usable_backend_raises_like_eager() -> None:
    attend = _attention_under(SDPBackend.EFFICIENT_ATTENTION)  # (no CPU kernel)
    q = torch.randn(1, 2, 8, 16)
    with pytest.raises(RuntimeError) as eager:
        attend(q)
    with pytest.raises(RuntimeError) as compiled:
        thunder.jit(attend)(q)
    assert str(compiled.value) == str(eager.value)
    assert torch.backends.cuda.math_sdp_enabled() and torch.backends.cuda.flash_sdp_enabled()


def _cudnn_block(x: torch.Tensor, w: torch.Tensor) -> Any:
    with torch.backends.cudnn.flags(enabled=False, deterministic=True):
        inside = (torch.backends.cudnn.enabled, torch.backends.cudnn.deterministic)
        y = torch.nn.functional.conv1d(x, w).tanh()
    return y, inside, (torch.backends.cudnn.enabled, torch.backends.cudnn.deterministic)


def test_cudnn_flags_block_compiles_and_reads_its_flags() -> None:
    _check_like_eager(
        _cudnn_block, lambda: (torch.randn(2, 4, 9, requires_grad=True), torch.randn(3, 4, 2))
    )


def test_flag_context_managers_are_answered_inside() -> None:
    """The queries the context managers and the program make inside the blocks answer the
    program's settings, outside them the call's."""

    def flags(x: torch.Tensor) -> Any:
        seen = []
        with torch.backends.mkldnn.flags(enabled=False):
            seen.append(torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled)
            with sdpa_kernel([SDPBackend.MATH]):
                seen.append(torch.backends.cuda.flash_sdp_enabled())
                seen.append(torch.backends.cuda.math_sdp_enabled())
            seen.append(torch.backends.cuda.flash_sdp_enabled())
        seen.append(torch.backends.mkldnn.enabled)
        return x + len(seen), tuple(seen)

    _check_like_eager(flags, lambda: (torch.randn(3),))


@contextmanager
def _global_setting(set_to: Callable[[], None], restore: Callable[[], None]) -> Iterator[None]:
    set_to()
    try:
        yield
    finally:
        restore()


def test_global_settings_read_are_guarded() -> None:
    """A call made after the caller changed a setting the program read takes another program
    (and the first serves its setting again)."""

    def reads(x: torch.Tensor) -> torch.Tensor:
        if torch.are_deterministic_algorithms_enabled():
            x = x + 1
        if torch.get_float32_matmul_precision() == "medium":
            x = x * 3
        if torch.backends.cudnn.enabled:
            x = x - 5
        return x

    jitted = thunder.jit(reads)
    deterministic = torch.are_deterministic_algorithms_enabled()
    precision = torch.get_float32_matmul_precision()
    cudnn = torch.backends.cudnn.enabled
    settings = [
        lambda: None,
        lambda: torch.use_deterministic_algorithms(True),
        lambda: torch.set_float32_matmul_precision("medium"),
        lambda: setattr(torch.backends.cudnn, "enabled", False),
        lambda: None,
    ]

    def restore() -> None:
        torch.use_deterministic_algorithms(deterministic)
        torch.set_float32_matmul_precision(precision)
        torch.backends.cudnn.enabled = cudnn

    for setting in settings:
        with _global_setting(setting, restore):
            x = torch.randn(4)
            torch.testing.assert_close(jitted(x), reads(x))
    assert thunder.compile_stats(jitted).compilations == 4
    _no_eager_fallback(jitted)


def test_flags_block_after_the_caller_changed_them() -> None:
    """The flags the block saves and puts back are the call's: a call made with oneDNN off runs
    the block with it on (as asked) and leaves it off."""

    def conv_with_mkldnn(x: torch.Tensor, w: torch.Tensor) -> Any:
        with torch.backends.mkldnn.flags(enabled=True):
            y = torch.nn.functional.conv2d(x, w, padding=1)
        return y, torch.nn.functional.conv2d(x, w, padding=1), torch.backends.mkldnn.enabled

    jitted = thunder.jit(conv_with_mkldnn)
    for enabled in (True, False, True, False):
        with torch.backends.mkldnn.flags(enabled=enabled):
            x, w = _conv_inputs()
            with torch.no_grad():
                torch.testing.assert_close(jitted(x, w), conv_with_mkldnn(x, w), rtol=0, atol=0)
            assert torch.backends.mkldnn.enabled == enabled
    assert thunder.compile_stats(jitted).compilations == 2
    _no_eager_fallback(jitted)


def test_wav2vec2_ctc_training_step_compiles() -> None:
    """transformers' CTC heads compute their loss under ``cudnn.flags(enabled=False)``: a
    training step with labels is compiled, its loss and gradients eager's."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.Wav2Vec2Config(
        vocab_size=40,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        conv_dim=(16, 16),
        conv_stride=(4, 2),
        conv_kernel=(8, 4),
        num_conv_pos_embeddings=8,
        num_conv_pos_embedding_groups=4,
        mask_time_prob=0.0,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        feat_proj_dropout=0.0,
        layerdrop=0.0,
        ctc_loss_reduction="mean",
        pad_token_id=0,
    )
    # (eval mode: in training its feature encoder makes its output a leaf of autograd, which runs
    # split; the dropouts are off in either)
    model = transformers.Wav2Vec2ForCTC(config).eval()
    jitted = thunder.jit(model)
    params = [p for p in model.parameters() if p.requires_grad]
    for _ in range(2):
        x = torch.randn(2, 320)
        labels = torch.randint(1, 40, (2, 3))
        expected = model(input_values=x, labels=labels).loss
        e_grads = torch.autograd.grad(expected, params, allow_unused=True)
        got = jitted(input_values=x, labels=labels).loss
        j_grads = torch.autograd.grad(got, params, allow_unused=True)
        torch.testing.assert_close(got, expected)
        for g, e in zip(j_grads, e_grads, strict=True):
            if e is None:
                assert g is None or not g.any()
            else:
                torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)
    assert thunder.compile_stats(jitted).compilations == 1
    _no_eager_fallback(jitted)
    assert torch.backends.cudnn.enabled
