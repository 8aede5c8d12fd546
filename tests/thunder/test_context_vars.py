"""``contextvars.ContextVar.get`` of a value the calling context holds, inside a jitted function:
a guarded read (the prologue asks the variable again on every call), so a call in a context
holding another value takes another program, never a stale one. Compared with eager on fresh
random inputs over several calls, gradients included; transformers' output capturing
(``utils/output_capturing.py`` reads its collector so in every layer's hook) among them."""

from __future__ import annotations

import contextvars
import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from runs_by_torch import call_split

import thunder
from thunder import guard_tree

FLAG: contextvars.ContextVar[bool] = contextvars.ContextVar("flag", default=False)
NO_DEFAULT: contextvars.ContextVar[Any] = contextvars.ContextVar("no_default")
VALUE: contextvars.ContextVar[Any] = contextvars.ContextVar("value", default=None)

CACHES = ["constant values", "symbolic values"]


def _in_context(var: contextvars.ContextVar[Any], value: Any, fn: Callable[[], Any]) -> Any:
    """``fn()`` with ``var`` set to ``value`` (set and reset around it)."""
    token = var.set(value)
    try:
        return fn()
    finally:
        var.reset(token)


def _compiled_whole(jf: Any) -> None:
    stats = thunder.compile_stats(jf)
    assert stats.split_calls == 0, stats.last_split_reason
    assert stats.eager_fallbacks == 0, stats.last_eager_reason


def _grads_match(jf: Any, f: Any, *shape: int) -> None:
    x = torch.randn(*shape, requires_grad=True)
    xe = x.detach().clone().requires_grad_()
    out, expected = jf(x), f(xe)
    torch.testing.assert_close(out, expected)
    g = torch.randn_like(expected)
    out.backward(g)
    expected.backward(g)
    torch.testing.assert_close(x.grad, xe.grad)


def _flagged(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).sin() if FLAG.get() else x.cos() + 1


@pytest.mark.parametrize("cache", CACHES)
def test_a_flag_read_in_forward_follows_the_calling_context(cache: str) -> None:
    jf = thunder.jit(_flagged, cache=cache)
    runs: list[Callable[[Callable[[], Any]], Any]] = [
        lambda call: call(),
        lambda call: _in_context(FLAG, True, call),
        lambda call: contextvars.copy_context().run(lambda: _in_context(FLAG, True, call)),
        lambda call: _in_context(FLAG, False, call),
    ]
    for _ in range(3):
        for run in runs:
            run(lambda: _grads_match(jf, _flagged, 3, 4))
    _compiled_whole(jf)
    assert thunder.compile_stats(jf).compilations == 2  # one program per value, then cache hits


def test_the_guard_tree_checks_the_context_value() -> None:
    if guard_tree._cpp is None:
        pytest.skip("torch has no guard manager")
    jf = thunder.jit(_flagged)
    for flag in [False] * 4 + [True, False, True]:
        x = torch.randn(4)
        torch.testing.assert_close(_in_context(FLAG, flag, lambda: jf(x)), _flagged_as(flag, x))
    state = thunder.compile_stats(jf).last_program.prologue.guard_tree  # type: ignore[union-attr]
    assert state.tree is not None and state.hits >= 1
    assert thunder.compile_stats(jf).compilations == 2


def _flagged_as(flag: bool, x: torch.Tensor) -> torch.Tensor:
    return _in_context(FLAG, flag, lambda: _flagged(x))  # type: ignore[no-any-return]


class _Holder:
    def __init__(self) -> None:
        self.var: contextvars.ContextVar[float] = contextvars.ContextVar("held", default=1.0)


def test_another_variable_at_the_same_place_is_read_as_eager_reads_it() -> None:
    holder = _Holder()

    def f(x: torch.Tensor) -> torch.Tensor:
        return x * holder.var.get()

    jf = thunder.jit(f)
    for _ in range(3):
        x = torch.randn(3)
        _in_context(holder.var, 2.0, lambda: torch.testing.assert_close(jf(x), x * 2))
        torch.testing.assert_close(jf(x), f(x))
        old = holder.var
        holder.var = contextvars.ContextVar("other", default=3.0)  # set in no context yet
        _in_context(old, 2.0, lambda: torch.testing.assert_close(jf(x), x * 3))
    _compiled_whole(jf)


def test_get_with_a_default_and_a_variable_without_one() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        scale = NO_DEFAULT.get(None)
        try:
            shift = NO_DEFAULT.get()
        except LookupError:
            shift = -1.0
        return x * (scale if scale is not None else 0.5) + shift

    jf = thunder.jit(f)
    for value in [None, 2.0, None, 3.0, 2.0]:
        x = torch.randn(5)
        if value is None:
            torch.testing.assert_close(jf(x), f(x))
        else:
            torch.testing.assert_close(
                _in_context(NO_DEFAULT, value, lambda: jf(x)),
                _in_context(NO_DEFAULT, value, lambda: f(x)),
            )
    _compiled_whole(jf)


def test_the_variable_default_is_read_as_eager_reads_it() -> None:
    var: contextvars.ContextVar[dict[str, float]] = contextvars.ContextVar(
        "config", default={"scale": 2.0}
    )

    def f(x: torch.Tensor) -> torch.Tensor:
        return x * var.get()["scale"]

    jf = thunder.jit(f)
    for scale in [2.0, 2.0, 4.0, 4.0]:
        var.get()["scale"] = scale  # the default object itself, changed between calls
        x = torch.randn(3)
        torch.testing.assert_close(jf(x), x * scale)
        torch.testing.assert_close(_in_context(var, {"scale": -1.0}, lambda: jf(x)), -x)
    _compiled_whole(jf)


@pytest.mark.parametrize("cache", CACHES)
def test_a_number_in_the_context_changing_every_call(cache: str) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        scale = VALUE.get()
        return x * (1.0 if scale is None else scale)

    jf = thunder.jit(f, cache=cache)
    for i in range(6):
        x = torch.randn(4)
        value = None if i % 3 == 2 else float(i)
        torch.testing.assert_close(
            _in_context(VALUE, value, lambda: jf(x)), _in_context(VALUE, value, lambda: f(x))
        )
    _compiled_whole(jf)


def test_a_tensor_in_the_context_is_read_on_every_call() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        bias = VALUE.get()
        return x if bias is None else x * bias

    jf = thunder.jit(f)
    for _ in range(3):
        for bias in (torch.randn(4, requires_grad=True), None):
            x = torch.randn(2, 4, requires_grad=True)
            out = _in_context(VALUE, bias, lambda: jf(x))
            torch.testing.assert_close(out, x if bias is None else x * bias)
            if bias is not None:
                out.sum().backward()
                torch.testing.assert_close(bias.grad, x.detach().sum(0))
    shared = torch.randn(4)
    for _ in range(3):  # the same tensor, its data changed in place
        shared.normal_()
        x = torch.randn(2, 4)
        torch.testing.assert_close(_in_context(VALUE, shared, lambda: jf(x)), x * shared)
    _compiled_whole(jf)


def test_a_collector_in_the_context_gets_what_eager_appends() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        y = x.tanh()
        collected = VALUE.get()
        if collected is not None and "outputs" in collected:
            collected["outputs"].append(y * 2)
        return y + 1

    jf = thunder.jit(f)
    for i in range(6):
        x = torch.randn(3)
        mine: dict[str, list[torch.Tensor]] = {"outputs": []} if i % 2 else {}
        if i % 3 == 2:
            out = jf(x)
        else:
            out = _in_context(VALUE, mine, lambda: jf(x))
        torch.testing.assert_close(out, x.tanh() + 1)
        if "outputs" in mine and i % 3 != 2:
            assert len(mine["outputs"]) == 1
            torch.testing.assert_close(mine["outputs"][0], x.tanh() * 2)
    _compiled_whole(jf)


def test_read_set_and_reset_inside_the_call() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        before = VALUE.get()
        token = VALUE.set(10.0)
        try:
            inside = VALUE.get()
        finally:
            VALUE.reset(token)
        after = VALUE.get()
        return x * inside + (0.0 if before is None else before) + (0.0 if after is None else after)

    jf = thunder.jit(f)
    for value in [None, 1.0, 2.0, None, 2.0]:
        x = torch.randn(3)
        torch.testing.assert_close(
            _in_context(VALUE, value, lambda: jf(x)), _in_context(VALUE, value, lambda: f(x))
        )
        assert VALUE.get() is None
    _compiled_whole(jf)


def test_a_variable_left_set_runs_split_with_eager_effect() -> None:
    var: contextvars.ContextVar[int] = contextvars.ContextVar("left_set", default=0)

    def f(x: torch.Tensor) -> torch.Tensor:
        var.set(var.get() + 1)
        return x + var.get()

    def run() -> tuple[torch.Tensor, int]:
        x = torch.randn(3)
        out = call_split(thunder.jit(f), x, match="ContextVar left_set")
        torch.testing.assert_close(out, x + 1)
        return out, var.get()

    assert contextvars.copy_context().run(run)[1] == 1  # set in that context, as eager
    assert var.get() == 0


def test_token_old_value_like_eager() -> None:
    def nested(x: torch.Tensor) -> torch.Tensor:
        outer = VALUE.set(2.0)
        inner = VALUE.set(3.0)
        old = inner.old_value  # set by the function itself: known
        VALUE.reset(inner)
        VALUE.reset(outer)
        return x * old

    def from_outside(x: torch.Tensor) -> torch.Tensor:
        token = VALUE.set(2.0)
        old = token.old_value
        VALUE.reset(token)
        return x + (0.0 if old is None or old is contextvars.Token.MISSING else old)

    x = torch.randn(3)
    jn = thunder.jit(nested)
    torch.testing.assert_close(jn(x), x * 2)
    _compiled_whole(jn)
    for value in (None, 5.0):
        torch.testing.assert_close(
            _in_context(
                VALUE, value, lambda: call_split(thunder.jit(from_outside), x, match="old_value")
            ),
            _in_context(VALUE, value, lambda: from_outside(x)),
        )


def test_copy_context_run_inside_runs_split_like_eager() -> None:
    def inner(x: torch.Tensor) -> torch.Tensor:
        FLAG.set(True)  # in the copy only
        return x * 2 if FLAG.get() else x

    def f(x: torch.Tensor) -> torch.Tensor:
        return contextvars.copy_context().run(inner, x) + FLAG.get()

    jf = thunder.jit(f)
    for _ in range(2):
        x = torch.randn(3)
        torch.testing.assert_close(call_split(jf, x, match="copy_context"), f(x))
        assert FLAG.get() is False


def test_a_call_from_another_thread_reads_its_own_context() -> None:
    jf = thunder.jit(_flagged)
    x = torch.randn(4)
    torch.testing.assert_close(_in_context(FLAG, True, lambda: jf(x)), _flagged_as(True, x))
    results: list[torch.Tensor] = []
    thread = threading.Thread(target=lambda: results.append(jf(x)))  # (a new, empty context)
    _in_context(FLAG, True, thread.start)
    thread.join()
    torch.testing.assert_close(results[0], _flagged_as(False, x))


# -- transformers' output capturing ---------------------------------------------------------------


def _gpt2() -> Any:
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=100, attn_pdrop=0.0, resid_pdrop=0.0
    )
    config.embd_pdrop = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 100, (1, 4))
    # Installs the capturing hooks on every block: each reads the collector context variable.
    model(ids, output_hidden_states=True, output_attentions=True, use_cache=False)
    return model


def _collector() -> Any:
    return pytest.importorskip("transformers.utils.output_capturing")._active_collector


def test_a_gpt2_block_compiles_and_matches_eager_over_calls() -> None:
    model = _gpt2()
    block = model.transformer.h[0]
    assert block._forward_hooks  # the capturing hook
    jb = thunder.jit(block)
    for i in range(4):
        x = torch.randn(2, 5, 32, requires_grad=True)
        xe = x.detach().clone().requires_grad_()
        if i % 2:  # inside the capturing context, as the model's forward runs its layers
            mine: dict[str, list[Any]] = {"hidden_states": []}
            theirs: dict[str, list[Any]] = {"hidden_states": []}
            out = _in_context(_collector().context_var, mine, lambda: jb(x))
            expected = _in_context(_collector().context_var, theirs, lambda: block(xe))
            assert len(mine["hidden_states"]) == len(theirs["hidden_states"]) == 2
            for a, b in zip(mine["hidden_states"], theirs["hidden_states"]):
                torch.testing.assert_close(a, b)
        else:
            out, expected = jb(x), block(xe)
        torch.testing.assert_close(out, expected)
        out.sum().backward()
        expected.sum().backward()
        torch.testing.assert_close(x.grad, xe.grad)
        for p in block.parameters():
            p.grad = None
    _compiled_whole(jb)


def test_gpt2_with_jitted_blocks_captures_what_eager_captures() -> None:
    model = _gpt2()
    ids = torch.randint(0, 100, (2, 6))
    blocks = list(model.transformer.h)
    expected = [
        model(ids, output_hidden_states=flag, output_attentions=flag, use_cache=False)
        for flag in (True, False)
    ]
    jitted = [thunder.jit(b) for b in blocks]
    for i, jb in enumerate(jitted):
        model.transformer.h[i] = jb
    for _ in range(2):
        for flag, ref in zip((True, False), expected):
            out = model(ids, output_hidden_states=flag, output_attentions=flag, use_cache=False)
            torch.testing.assert_close(out.logits, ref.logits)
            if flag:
                for got, want in zip(
                    (*out.hidden_states, *out.attentions), (*ref.hidden_states, *ref.attentions)
                ):
                    torch.testing.assert_close(got, want)
            else:
                assert out.hidden_states is None and out.attentions is None
    for jb in jitted:
        _compiled_whole(jb)


def test_a_llama_decoder_layer_compiles_and_matches_eager() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.LlamaForCausalLM(config)
    ids = torch.randint(0, 100, (1, 4))
    model(ids, output_hidden_states=True, use_cache=False)
    layer = model.model.layers[0]
    assert layer._forward_hooks  # the capturing hook
    jl = thunder.jit(layer)
    positions = torch.arange(5)[None]
    for i in range(4):
        x = torch.randn(1, 5, 32, requires_grad=True)
        xe = x.detach().clone().requires_grad_()
        rotary = model.model.rotary_emb(x.detach(), positions)
        kwargs = dict(position_embeddings=rotary, position_ids=positions)
        if i % 2:
            mine: dict[str, list[Any]] = {"hidden_states": []}
            theirs: dict[str, list[Any]] = {"hidden_states": []}
            out = _in_context(_collector().context_var, mine, lambda: jl(x, **kwargs))
            expected = _in_context(_collector().context_var, theirs, lambda: layer(xe, **kwargs))
            for a, b in zip(mine["hidden_states"], theirs["hidden_states"], strict=True):
                torch.testing.assert_close(a, b)
        else:
            out, expected = jl(x, **kwargs), layer(xe, **kwargs)
        torch.testing.assert_close(out, expected)
        out.sum().backward()
        expected.sum().backward()
        torch.testing.assert_close(x.grad, xe.grad)
    _compiled_whole(jl)
