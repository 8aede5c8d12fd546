"""torch.nn modules with fused fast paths (``nn.MultiheadAttention``, the ``nn.Transformer``
family): the checks they make about the ambient state while tracing (``_is_make_fx_tracing``, the
dispatch mode stack, grad mode, ``torch.backends.mha``) are answered for the compiled program,
which takes their traceable path and gives eager's results, outputs and gradients, on fresh
inputs, in eval mode under no_grad and in training, and again when the ambient state changes."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    _get_current_dispatch_mode,
    _get_current_dispatch_mode_stack,
)

import thunder

pytestmark = pytest.mark.filterwarnings("error:thunder.jit")  # never an eager fallback

E = 32  # model dimension
HEADS = 4


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float32)


def _padding(batch: int, seq: int, *, left_aligned: bool = True) -> torch.Tensor:
    """A key padding mask (True: padding) with a different amount of padding per row."""
    mask = torch.zeros(batch, seq, dtype=torch.bool)
    for i in range(batch):
        mask[i, seq - (i % seq) :] = True
    if not left_aligned:
        mask[-1, 0] = True
    return mask


def _causal(seq: int) -> torch.Tensor:
    return torch.nn.Transformer.generate_square_subsequent_mask(seq)


def _leaf(t: Any) -> Any:
    if isinstance(t, torch.Tensor) and t.is_floating_point():
        return t.detach().clone().requires_grad_(True)
    return t


def _first(out: Any) -> torch.Tensor:
    return out[0] if isinstance(out, tuple) else out


def _check_eval(module: torch.nn.Module, jitted: Any, args: tuple[Any, ...], kwargs: Any) -> None:
    module.eval()
    with torch.no_grad():
        expected = module(*args, **kwargs)
        got = jitted(*args, **kwargs)
    torch.testing.assert_close(got, expected, equal_nan=True)


def _check_train(module: torch.nn.Module, jitted: Any, args: tuple[Any, ...], kwargs: Any) -> None:
    module.train()
    e_args = tuple(_leaf(a) for a in args)
    j_args = tuple(_leaf(a) for a in args)
    expected = module(*e_args, **kwargs)
    got = jitted(*j_args, **kwargs)
    torch.testing.assert_close(got, expected, equal_nan=True)  # a row all padding: NaN
    params = list(module.parameters())
    e_inputs = [a for a in e_args if isinstance(a, torch.Tensor) and a.requires_grad]
    j_inputs = [a for a in j_args if isinstance(a, torch.Tensor) and a.requires_grad]
    cotangent = torch.randn_like(_first(expected))
    e_grads = torch.autograd.grad(_first(expected), params + e_inputs, cotangent, allow_unused=True)
    j_grads = torch.autograd.grad(_first(got), params + j_inputs, cotangent, allow_unused=True)
    for g, e in zip(j_grads, e_grads, strict=True):
        if e is None:
            assert g is None or not g.any()
        else:
            torch.testing.assert_close(g, e, equal_nan=True)


def _check(
    module: torch.nn.Module, make_args: Callable[[], tuple[Any, ...]], kwargs: Any, mode: str
) -> Any:
    """Eager and jitted on two sets of fresh inputs (the second call is the cached program)."""
    jitted = thunder.jit(module)
    for _ in range(2):
        args = make_args()
        if mode == "eval":
            _check_eval(module, jitted, args, kwargs)
        else:
            _check_train(module, jitted, args, kwargs)
    assert thunder.compile_stats(jitted).compilations == 1
    return jitted


def _trace_text(jitted: Any) -> str:
    return str(thunder.last_traces(jitted)[-1])


# -- nn.MultiheadAttention ----------------------------------------------------------------------

MHA_CALLS: dict[str, Callable[[bool], dict[str, Any]]] = {
    "plain": lambda bf: {},
    "no_weights": lambda bf: {"need_weights": False},
    "per_head_weights": lambda bf: {"average_attn_weights": False},
    "key_padding_mask": lambda bf: {"key_padding_mask": _padding(3, 5)},
    "key_padding_mask_no_weights": lambda bf: {
        "key_padding_mask": _padding(3, 5),
        "need_weights": False,
    },
    "attn_mask": lambda bf: {"attn_mask": _causal(5) < 0},
    "float_attn_mask": lambda bf: {"attn_mask": torch.randn(5, 5)},
    "is_causal": lambda bf: {"attn_mask": _causal(5), "is_causal": True, "need_weights": False},
    "both_masks": lambda bf: {"attn_mask": _causal(5) < 0, "key_padding_mask": _padding(3, 5)},
}


def _mha_inputs(batch_first: bool, *, cross: bool = False) -> tuple[torch.Tensor, ...]:
    def layout(t: torch.Tensor) -> torch.Tensor:
        return t if batch_first else t.transpose(0, 1).contiguous()

    x = layout(_randn(3, 5, E))
    if not cross:
        return (x, x, x)
    kv = layout(_randn(3, 7, E))
    return (x, kv, kv)


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("call", list(MHA_CALLS))
def test_multihead_attention_matches_eager(mode: str, batch_first: bool, call: str) -> None:
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(E, HEADS, batch_first=batch_first)
    kwargs = MHA_CALLS[call](batch_first)
    jitted = _check(mha, lambda: _mha_inputs(batch_first), kwargs, mode)
    # Where eager takes its fast path, its fused C++ kernel runs (the traceable path's results
    # differ: a query whose keys are all masked gives NaN there, 0 here); elsewhere the traceable
    # path, recorded op by op.
    fused = mode == "eval" and _eager_fast_path(mha, _mha_inputs(batch_first), kwargs)
    assert ("_native_multi_head_attention" in _trace_text(jitted)) == fused


def _eager_fast_path(module: torch.nn.Module, args: tuple[Any, ...], kwargs: Any) -> bool:
    """Whether eager's call in eval mode under no_grad runs the fused fast-path kernel."""
    module.eval()
    with torch.no_grad(), torch.profiler.profile() as prof:
        module(*args, **kwargs)
    return any(e.key == "aten::_native_multi_head_attention" for e in prof.key_averages())


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
@pytest.mark.parametrize("masks", ["key_padding_mask", "attn_mask", "both"])
def test_multihead_attention_fast_path_all_masked_rows_are_eagers(masks: str, cache: str) -> None:
    """A query whose keys are all masked: eager's fast path gives NaN there (its fused kernel),
    and so does the compiled program; rows with a key give eager's values."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(E, HEADS, batch_first=True).eval()
    jitted = thunder.jit(mha, cache=cache)
    for call in range(3):
        x = _randn(2, 4, E)
        padding = torch.zeros(2, 4, dtype=torch.bool)
        padding[call % 2] = True  # one sequence all padding
        causal_rows = torch.zeros(4, 4, dtype=torch.bool)
        causal_rows[call % 4] = True  # one query sees no key
        kwargs: dict[str, Any] = {"need_weights": False}
        if masks in ("key_padding_mask", "both"):
            kwargs["key_padding_mask"] = padding
        if masks in ("attn_mask", "both"):
            kwargs["attn_mask"] = causal_rows
        with torch.no_grad():
            expected = mha(x, x, x, **kwargs)[0]
            got = jitted(x, x, x, **kwargs)[0]
        assert expected.isnan().any()
        torch.testing.assert_close(got, expected, equal_nan=True)


MHA_VARIANTS: dict[str, Callable[[bool], tuple[torch.nn.Module, Callable[[], tuple[Any, ...]]]]] = {
    "cross_attention": lambda bf: (
        torch.nn.MultiheadAttention(E, HEADS, batch_first=bf),
        lambda: _mha_inputs(bf, cross=True),
    ),
    "kdim_vdim": lambda bf: (
        torch.nn.MultiheadAttention(E, HEADS, batch_first=bf, kdim=16, vdim=24),
        lambda: (
            _mha_inputs(bf)[0],
            _randn(3, 7, 16) if bf else _randn(7, 3, 16),
            _randn(3, 7, 24) if bf else _randn(7, 3, 24),
        ),
    ),
    "no_bias": lambda bf: (
        torch.nn.MultiheadAttention(E, HEADS, batch_first=bf, bias=False),
        lambda: _mha_inputs(bf),
    ),
    "bias_kv_zero_attn": lambda bf: (
        torch.nn.MultiheadAttention(E, HEADS, batch_first=bf, add_bias_kv=True, add_zero_attn=True),
        lambda: _mha_inputs(bf),
    ),
    "odd_heads": lambda bf: (
        torch.nn.MultiheadAttention(E + 1, 3, batch_first=bf),
        lambda: (x := (_randn(3, 5, E + 1) if bf else _randn(5, 3, E + 1)), x, x),
    ),
    "unbatched": lambda bf: (
        torch.nn.MultiheadAttention(E, HEADS, batch_first=bf),
        lambda: (x := _randn(5, E), x, x),
    ),
}


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("variant", list(MHA_VARIANTS))
def test_multihead_attention_variants_match_eager(
    mode: str, batch_first: bool, variant: str
) -> None:
    torch.manual_seed(0)
    mha, make_args = MHA_VARIANTS[variant](batch_first)
    _check(mha, make_args, {}, mode)


def test_multihead_attention_eval_with_grad_enabled() -> None:
    """Eval mode with grad on (the parameters require grad): not the fast path in eager either;
    gradients flow."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(E, HEADS, batch_first=True).eval()
    jitted = thunder.jit(mha)
    x = _randn(3, 5, E)
    expected, got = mha(x, x, x), jitted(x, x, x)
    torch.testing.assert_close(got, expected)
    e_grads = torch.autograd.grad(expected[0].sum(), list(mha.parameters()))
    j_grads = torch.autograd.grad(got[0].sum(), list(mha.parameters()))
    torch.testing.assert_close(j_grads, e_grads)


def test_multihead_attention_output_layout_is_eagers() -> None:
    """Eager's fast path returns a contiguous batch-first output: so does the compiled one."""
    mha = torch.nn.MultiheadAttention(E, HEADS, batch_first=True).eval()
    x = _randn(3, 5, E)
    with torch.no_grad():
        expected, got = mha(x, x, x)[0], thunder.jit(mha)(x, x, x)[0]
    assert got.stride() == expected.stride()


def test_ambient_state_changes_between_calls() -> None:
    """Grad mode toggled, then the fast path disabled: each call is eager's, each change another
    program (guarded), and the first programs serve their state again."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(E, HEADS, batch_first=True).eval()
    jitted = thunder.jit(mha)
    old = torch.backends.mha.get_fastpath_enabled()
    try:
        for grad, fastpath in [
            (False, True),
            (True, True),
            (False, True),
            (False, False),
            (True, False),
            (False, True),
        ]:
            torch.backends.mha.set_fastpath_enabled(fastpath)
            x = _randn(3, 5, E)
            with torch.set_grad_enabled(grad):
                expected, got = mha(x, x, x), jitted(x, x, x)
            torch.testing.assert_close(got, expected)
            assert got[0].requires_grad == expected[0].requires_grad == grad
    finally:
        torch.backends.mha.set_fastpath_enabled(old)
    assert thunder.compile_stats(jitted).compilations == 4


class _CountingMode(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.calls += 1
        return func(*args, **(kwargs or {}))


class _OtherMode(_CountingMode):
    pass


def test_multihead_attention_under_a_dispatch_mode() -> None:
    """Under a TorchDispatchMode (as FlopCounterMode is) the call runs eagerly, with a warning:
    the mode sees the aten calls eager makes (a compiled program's fused kernels would bypass
    it), and the module's own fast-path question is answered by torch itself. Calls without a
    mode keep their program."""
    mha = torch.nn.MultiheadAttention(E, HEADS, batch_first=True).eval()
    jitted = thunder.jit(mha)
    with torch.no_grad(), pytest.warns(UserWarning, match="dispatch mode"):
        for under_mode in [False, True, True, False]:
            x = _randn(3, 5, E)
            mode, eager_mode = _CountingMode(), _CountingMode()
            with eager_mode if under_mode else _nothing():
                expected = mha(x, x, x)
            with mode if under_mode else _nothing():
                got = jitted(x, x, x)
            torch.testing.assert_close(got, expected)
            assert mode.calls == eager_mode.calls
    assert thunder.compile_stats(jitted).compilations == 1


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _dispatch_state(x: torch.Tensor) -> torch.Tensor:
    if any(type(m) is _OtherMode for m in _get_current_dispatch_mode_stack()):
        return x + 1
    if _get_current_dispatch_mode() is not None:
        return x + 2
    return x * 3


def test_dispatch_mode_stack_queries_answer_as_eager() -> None:
    """A program that asks for the dispatch mode stack gives eager's answer under every stack:
    calls under a mode run eagerly (warned once), the call without one keeps its program."""
    jitted = thunder.jit(_dispatch_state)
    x = torch.ones(3)
    contexts: list[Callable[[], Any]] = [_nothing, _CountingMode, _OtherMode]
    with pytest.warns(UserWarning, match="dispatch mode"):
        for make in [*contexts, *contexts, _CountingMode, _nothing, _OtherMode]:
            with make():
                expected = _dispatch_state(x)
                got = jitted(x)
            torch.testing.assert_close(got, expected)
    stats = thunder.compile_stats(jitted)
    assert stats.compilations == 1
    assert stats.eager_fallbacks == 6


# -- the nn.Transformer family -------------------------------------------------------------------

LAYER_OPTIONS = list(itertools.product([False, True], ["relu", "gelu"]))


def _layer_kwargs(norm_first: bool, activation: str, batch_first: bool = True) -> dict[str, Any]:
    return {
        "d_model": E,
        "nhead": HEADS,
        "dim_feedforward": 64,
        "dropout": 0.0,
        "activation": activation,
        "norm_first": norm_first,
        "batch_first": batch_first,
    }


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize(("norm_first", "activation"), LAYER_OPTIONS)
def test_transformer_encoder_layer_matches_eager(
    mode: str, norm_first: bool, activation: str
) -> None:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(**_layer_kwargs(norm_first, activation))
    _check(layer, lambda: (_randn(3, 5, E),), {}, mode)
    _check(layer, lambda: (_randn(3, 5, E),), {"src_key_padding_mask": _padding(3, 5)}, mode)
    _check(layer, lambda: (_randn(3, 5, E),), {"src_mask": _causal(5), "is_causal": True}, mode)


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize(("norm_first", "activation"), LAYER_OPTIONS)
def test_transformer_decoder_layer_matches_eager(
    mode: str, norm_first: bool, activation: str
) -> None:
    torch.manual_seed(0)
    layer = torch.nn.TransformerDecoderLayer(**_layer_kwargs(norm_first, activation))
    masks = {"tgt_mask": _causal(7), "memory_key_padding_mask": _padding(3, 5)}
    _check(layer, lambda: (_randn(3, 7, E), _randn(3, 5, E)), {}, mode)
    _check(layer, lambda: (_randn(3, 7, E), _randn(3, 5, E)), masks, mode)


def _transformer(norm_first: bool, activation: str, batch_first: bool) -> Any:
    kwargs = _layer_kwargs(norm_first, activation, batch_first)
    model = torch.nn.Transformer(**kwargs, num_encoder_layers=2, num_decoder_layers=1)

    def inputs() -> tuple[torch.Tensor, torch.Tensor]:
        src, tgt = _randn(3, 5, E), _randn(3, 7, E)
        return (src, tgt) if batch_first else (src.transpose(0, 1), tgt.transpose(0, 1))

    return model, inputs


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize(("norm_first", "activation"), LAYER_OPTIONS)
def test_transformer_matches_eager(mode: str, norm_first: bool, activation: str) -> None:
    torch.manual_seed(0)
    model, inputs = _transformer(norm_first, activation, batch_first=True)
    padding = _padding(3, 5)
    masks = {
        "src_key_padding_mask": padding,
        "memory_key_padding_mask": padding,
        "tgt_mask": _causal(7),
    }
    _check(model, inputs, {}, mode)
    _check(model, inputs, masks, mode)


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("batch_first", [True, False])
def test_transformer_masks_match_eager(mode: str, batch_first: bool) -> None:
    torch.manual_seed(0)
    model, inputs = _transformer(False, "relu", batch_first)
    # A causal target mask without the hint: torch looks at its data to pass the hint instead.
    _check(model, inputs, {"tgt_mask": _causal(7)}, mode)
    # The encoder's padded outputs are the decoder's memory here (no memory mask): eager's.
    _check(model, inputs, {"src_key_padding_mask": _padding(3, 5)}, mode)


ENCODER_MASKS: dict[str, Callable[[], torch.Tensor]] = {
    "left_aligned": lambda: _padding(3, 5),
    "not_left_aligned": lambda: _padding(3, 5, left_aligned=False),
    "a_row_all_padding": lambda: torch.tensor([[False] * 5, [True] * 5, [False] * 3 + [True] * 2]),
    "no_padding": lambda: torch.zeros(3, 5, dtype=torch.bool),
    "float": lambda: torch.zeros(3, 5).masked_fill(_padding(3, 5), float("-inf")),
}


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("mask_check", [True, False])
@pytest.mark.parametrize("norm", [True, False])
@pytest.mark.parametrize("mask", list(ENCODER_MASKS))
def test_transformer_encoder_padding_matches_eager(
    mode: str, mask_check: bool, norm: bool, mask: str
) -> None:
    """nn.TransformerEncoder in eval under no_grad runs its layers on a nested tensor when the
    mask is left aligned (or mask_check is off), and pads its output with zeros: the same values
    at the padded positions too; one program for masks of any data."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(**_layer_kwargs(False, "relu"))
    encoder = torch.nn.TransformerEncoder(
        layer, 2, norm=torch.nn.LayerNorm(E) if norm else None, mask_check=mask_check
    )
    _check(
        encoder, lambda: (_randn(3, 5, E),), {"src_key_padding_mask": ENCODER_MASKS[mask]()}, mode
    )


@pytest.mark.parametrize(("norm_first", "activation"), LAYER_OPTIONS)
def test_transformer_encoder_one_program_for_all_masks(norm_first: bool, activation: str) -> None:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(**_layer_kwargs(norm_first, activation))
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=not norm_first).eval()
    jitted = thunder.jit(encoder)
    with torch.no_grad():
        for name in ["left_aligned", "not_left_aligned", "a_row_all_padding", "left_aligned"]:
            x, mask = _randn(3, 5, E), ENCODER_MASKS[name]()
            torch.testing.assert_close(
                jitted(x, src_key_padding_mask=mask),
                encoder(x, src_key_padding_mask=mask),
                equal_nan=True,  # a row all padding, on the ordinary path: NaN in eager too
            )
    assert thunder.compile_stats(jitted).compilations == 1


def test_a_forward_set_on_one_module_does_not_reject_the_others():
    # One module's own forward (set before jit, as tensor parallelism or accelerate do) beside
    # modules running their class's forward: every call is served, and setting another
    # module's forward later recompiles.
    import types

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(3, 3)
            self.b = torch.nn.Linear(3, 3)

        def forward(self, x):
            return self.b(self.a(x))

    net = Net()
    net.a.forward = types.MethodType(
        lambda self, x: torch.nn.functional.linear(x, self.weight) * 2, net.a
    )
    jm = thunder.jit(net)
    for _ in range(2):
        x = torch.randn(2, 3)
        torch.testing.assert_close(jm(x), net(x))
    assert thunder.compile_stats(jm).compilations == 1 and thunder.cache_hits(jm) == 1
    net.b.forward = types.MethodType(lambda self, x: x + 1, net.b)
    x = torch.randn(2, 3)
    torch.testing.assert_close(jm(x), net(x))
    assert thunder.compile_stats(jm).compilations == 2
