"""Bad arguments get eager's error inside a jitted program (grad mode, autocast, inference
mode, a custom autograd.Function's ctx), and a clear error from thunder.jit's own options; the
jitted function still computes what eager does on the next good call."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

import thunder

CACHES = [None, "symbolic values"]


@pytest.fixture(autouse=True)
def _torch_state_restored() -> Iterator[None]:
    """Eager's ``autocast.__enter__`` leaves autocast switched on, and its nesting counted up,
    when a later setter rejects its argument: each test starts and ends with the process state
    it found. (A nesting left above zero keeps autocast's cast weights cached across later
    autocast blocks, so later tests' training steps would read stale weights.)"""
    grad = torch.is_grad_enabled()
    autocast = torch.is_autocast_enabled("cpu")
    dtype = torch.get_autocast_dtype("cpu")
    cache = torch.is_autocast_cache_enabled()
    nesting = _autocast_nesting()
    yield
    torch.set_grad_enabled(grad)
    torch.set_autocast_enabled("cpu", autocast)
    torch.set_autocast_dtype("cpu", dtype)
    torch.set_autocast_cache_enabled(cache)
    for _ in range(_autocast_nesting() - nesting):
        torch.autocast_decrement_nesting()
    assert _autocast_nesting() == nesting


def _autocast_nesting() -> int:
    """torch has no getter: count up and back down."""
    depth = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    return depth


def _outcome(fn: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = fn(*args)
        except Exception as e:
            return (type(e), str(e))
    return ("ok", out)


def _same_error(eager: Callable[..., Any], jitted: Callable[..., Any], *args: Any) -> None:
    expected = _outcome(eager, *args)
    assert expected[0] is not "ok", "eager accepts these arguments"  # noqa: F632
    assert _outcome(jitted, *args) == expected


def _assert_good_calls_match(
    eager: Callable[..., Any], jitted: Callable[..., Any], make_args: Callable[[], tuple[Any, ...]]
) -> None:
    """Fresh random inputs over several calls (the cache serves the later ones): values,
    dtypes, requires_grad and gradients as eager's."""
    for _ in range(3):
        args = make_args()
        twins = tuple(
            a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
            for a in args
        )
        expected = eager(*args)
        got = jitted(*twins)
        assert got.dtype == expected.dtype
        assert got.requires_grad == expected.requires_grad
        torch.testing.assert_close(got, expected)
        if expected.requires_grad:
            expected.float().sum().backward()
            got.float().sum().backward()
            for a, t in zip(args, twins):
                if isinstance(a, torch.Tensor) and a.requires_grad:
                    torch.testing.assert_close(t.grad, a.grad)


# -- grad mode ----------------------------------------------------------------------------------


def _scaled_under_grad_mode(x: torch.Tensor, flag: Any) -> torch.Tensor:
    with torch.set_grad_enabled(flag):
        return x * 2


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("flag", ["no", 0, 1, None, 0.0, torch.tensor(False)], ids=repr)
def test_set_grad_enabled_rejects_a_non_bool_as_eager(cache: str | None, flag: Any) -> None:
    jf = thunder.jit(_scaled_under_grad_mode, cache=cache)
    _same_error(_scaled_under_grad_mode, jf, torch.randn(3, requires_grad=True), flag)
    assert torch.is_grad_enabled()
    for good in (True, False):
        _assert_good_calls_match(
            _scaled_under_grad_mode, jf, lambda: (torch.randn(3, requires_grad=True), good)
        )


def _no_grad_then_mode(x: torch.Tensor, mode: Any) -> torch.Tensor:
    cm = torch.set_grad_enabled(True)  # (entered below: the mode is checked at construction)
    cm.__enter__()
    torch._C._set_grad_enabled(mode)
    y = x * 3
    torch._C._set_grad_enabled(True)
    cm.__exit__(None, None, None)
    return y


@pytest.mark.parametrize("mode", ["off", 1])
def test_the_grad_mode_setter_rejects_a_non_bool_as_eager(mode: Any) -> None:
    jf = thunder.jit(_no_grad_then_mode)
    _same_error(_no_grad_then_mode, jf, torch.randn(3, requires_grad=True), mode)
    _assert_good_calls_match(
        _no_grad_then_mode, jf, lambda: (torch.randn(3, requires_grad=True), False)
    )


def _under_inference_mode(x: torch.Tensor, mode: Any) -> torch.Tensor:
    cm = torch.inference_mode()
    cm.mode = mode
    with cm:
        y = x.sum()
    return x * 2 + (y > 1e9)


@pytest.mark.parametrize("mode", ["", [], "no"], ids=repr)
def test_inference_mode_rejects_what_eager_rejects(mode: Any) -> None:
    jf = thunder.jit(_under_inference_mode)
    _same_error(_under_inference_mode, jf, torch.randn(3, requires_grad=True), mode)
    for good in (False, 0, None):  # (eager converts these)
        _assert_good_calls_match(
            _under_inference_mode, jf, lambda: (torch.randn(3, requires_grad=True), good)
        )


# -- autocast -----------------------------------------------------------------------------------


def _matmul_under_autocast(a: torch.Tensor, b: torch.Tensor, settings: dict) -> torch.Tensor:
    with torch.autocast("cpu", **settings):
        return a @ b


BAD_AUTOCAST = [
    {"dtype": torch.bfloat16, "enabled": "false"},  # bool("false") is True: not a choice
    {"dtype": torch.bfloat16, "enabled": 1},
    {"dtype": torch.bfloat16, "enabled": None},
    {"dtype": torch.bfloat16, "enabled": torch.float16},
    {"dtype": "bf16"},
    {"dtype": torch.bfloat16, "cache_enabled": "x"},
    {"dtype": torch.bfloat16, "cache_enabled": 0},
]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("settings", BAD_AUTOCAST, ids=repr)
def test_autocast_rejects_bad_arguments_as_eager(cache: str | None, settings: dict) -> None:
    jf = thunder.jit(_matmul_under_autocast, cache=cache)

    def eager(*args: Any) -> Any:
        try:
            return _matmul_under_autocast(*args)
        finally:  # eager's failed __enter__ leaves autocast on; the jitted call must not see it
            torch.set_autocast_enabled("cpu", False)

    expected = _outcome(eager, torch.randn(2, 2), torch.randn(2, 2), settings)
    assert expected[0] is TypeError
    got = _outcome(jf, torch.randn(2, 2), torch.randn(2, 2), settings)
    torch.set_autocast_enabled("cpu", False)
    assert got == expected
    for good in ({"dtype": torch.bfloat16}, {"dtype": torch.bfloat16, "enabled": False}):
        _assert_good_calls_match(
            _matmul_under_autocast,
            jf,
            lambda: (torch.randn(2, 3, requires_grad=True), torch.randn(3, 2), good),
        )


GLOBAL_AUTOCAST = torch.autocast("cpu", dtype=torch.bfloat16, enabled="false")  # type: ignore[arg-type]


def _under_global_autocast(x: torch.Tensor) -> torch.Tensor:
    with GLOBAL_AUTOCAST:
        return x @ x


def test_an_autocast_object_from_outside_is_checked_as_eager() -> None:
    _same_error(_under_global_autocast, thunder.jit(_under_global_autocast), torch.randn(2, 2))


# -- torch.autograd.Function's ctx --------------------------------------------------------------


def _function(forward: Callable[..., Any]) -> type:
    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor, extra: Any) -> Any:
            return forward(ctx, x, extra)

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            return grads[0] * 2, None

    return F


def _saves(ctx: Any, x: torch.Tensor, extra: Any) -> torch.Tensor:
    ctx.save_for_backward(x, extra)
    return x * 2


def _marks_non_differentiable(ctx: Any, x: torch.Tensor, extra: Any) -> torch.Tensor:
    y = x * 2
    ctx.mark_non_differentiable(extra)
    return y


def _sets_materialize_grads(ctx: Any, x: torch.Tensor, extra: Any) -> torch.Tensor:
    ctx.set_materialize_grads(extra)
    return x * 2


def _marks_dirty(ctx: Any, x: torch.Tensor, extra: Any) -> torch.Tensor:
    ctx.mark_dirty(extra)
    return x * 2


CTX_CASES = [
    (_saves, 3, None),
    (_saves, [1], None),
    (_marks_non_differentiable, 3, "tensor"),
    (_sets_materialize_grads, "x", True),
    (_sets_materialize_grads, 0, True),
    (_marks_dirty, 3, None),
]


@pytest.mark.parametrize("requires_grad", [True, False])
@pytest.mark.parametrize(
    ("forward", "bad", "good"), CTX_CASES, ids=[f"{f.__name__}-{b!r}" for f, b, _ in CTX_CASES]
)
def test_ctx_methods_reject_what_eager_rejects(
    forward: Any, bad: Any, good: Any, requires_grad: bool
) -> None:
    F = _function(forward)

    def f(x: torch.Tensor, extra: Any) -> Any:
        if isinstance(extra, str) and extra == "tensor":
            extra = x.detach() + 1
        return F.apply(x, extra)

    jf = thunder.jit(f)
    x = torch.randn(3, requires_grad=requires_grad)
    expected = _outcome(f, x, bad)
    got = _outcome(jf, x.detach().clone().requires_grad_(requires_grad), bad)
    if expected[0] == "ok":  # eager checks what is saved only where it records a gradient
        assert got[0] == "ok"
        torch.testing.assert_close(got[1], expected[1])
    else:
        assert got == expected
    if forward is _marks_dirty:
        return  # (in-place forwards run split: not this test's subject)
    _assert_good_calls_match(f, jf, lambda: (torch.randn(3, requires_grad=True), good))


class _TwoOutputs(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> Any:
        a, b = x * 2, x * 3
        ctx.mark_non_differentiable(a)
        ctx.mark_non_differentiable(b)  # replaces the first, as eager's ctx does
        return a, b

    @staticmethod
    def backward(ctx: Any, ga: torch.Tensor, gb: torch.Tensor) -> torch.Tensor:
        return ga * 2


def test_a_later_mark_non_differentiable_replaces_the_earlier() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        a, b = _TwoOutputs.apply(x)
        assert not b.requires_grad
        return a

    _assert_good_calls_match(f, thunder.jit(f), lambda: (torch.randn(3, requires_grad=True),))


# -- thunder.jit's own options ------------------------------------------------------------------


def _add_one(x: torch.Tensor) -> torch.Tensor:
    return x + 1


BAD_OPTIONS = [
    ({"executors": [3]}, TypeError, r"executors must be .*got 3 \(int\)"),
    ({"executors": [None]}, TypeError, r"executors must be .*got None"),
    ({"executors": [["torch"]]}, TypeError, r"executors must be .*got \['torch'\]"),
    ({"executors": ("torch", None)}, TypeError, r"executors must be .*got None"),
    ({"executors": {"torch": 1}}, TypeError, r"option executors must be a list or tuple"),
    ({"executors": 3}, TypeError, r"option executors must be a list or tuple"),
    (
        {"executors": ["nonexistent"]},
        ValueError,
        r"unknown executor 'nonexistent'; known:.*torch",
    ),
    ({"transforms": 3}, TypeError, r"option transforms must be a list or tuple.*got 3"),
    ({"transforms": "abc"}, TypeError, r"option transforms must be a list or tuple"),
    ({"transforms": [3]}, TypeError, r"transforms must be thunder.Transform objects, got 3"),
    ({"lookasides": 3}, TypeError, r"option lookasides must be a list or tuple.*got 3"),
    ({"lookasides": {torch.sin: 3}}, TypeError, r"option lookasides must be a list or tuple"),
    ({"recompile_limit": True}, TypeError, r"recompile_limit must be a positive int.*True"),
    ({"recompile_limit": 2.0}, TypeError, r"recompile_limit must be a positive int.*2\.0"),
    ({"recompile_limit": "a"}, TypeError, r"recompile_limit must be a positive int.*'a'"),
    ({"recompile_limit": 0}, ValueError, r"recompile_limit must be a positive int.*0"),
    ({"cache": 3}, TypeError, r"option cache must be a string.*got 3 \(int\)"),
    ({"cache": "sometimes"}, ValueError, r"unknown cache option 'sometimes'"),
    ({"sharp_edges": True}, TypeError, r"option sharp_edges must be a string.*True"),
    ({"sharp_edges": "bogus"}, ValueError, r"unknown sharp_edges option 'bogus'"),
    ({"reshape_inplace": 3}, TypeError, r"option reshape_inplace must be 'error' or 'warn'"),
    ({"reshape_inplace": "ignore"}, ValueError, r"reshape_inplace must be 'error' or 'warn'"),
    ({"disable_torch_autograd": "yes"}, TypeError, r"disable_torch_autograd must be True"),
    ({"dce": 1}, TypeError, r"option dce must be True or False"),
    ({"warn_on_recompile": None}, TypeError, r"warn_on_recompile must be True or False"),
    ({"bogus_option": 3}, TypeError, r"unknown option\(s\) 'bogus_option'"),
]


@pytest.mark.parametrize(
    ("options", "error", "match"),
    BAD_OPTIONS,
    ids=[f"{next(iter(o))}-{i}" for i, (o, _, _) in enumerate(BAD_OPTIONS)],
)
def test_jit_options_are_checked_with_a_clear_error(options: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        thunder.jit(_add_one, **options)


@pytest.mark.parametrize(
    "options",
    [
        {"executors": "torch"},
        {"executors": []},
        {"executors": ("torch_ops", "torch")},
        {"recompile_limit": None},
        {"recompile_limit": 3},
        {"cache": thunder.CACHE_OPTIONS.SYMBOLIC_VALUES},
        {"cache": "no caching"},
        {"sharp_edges": "warn"},
        {"reshape_inplace": "error"},
        {"transforms": ()},
        {"lookasides": []},
    ],
    ids=repr,
)
def test_good_jit_options_still_compile(options: dict) -> None:
    _assert_good_calls_match(
        _add_one, thunder.jit(_add_one, **options), lambda: (torch.randn(3, requires_grad=True),)
    )


def test_the_torch_compile_backend_checks_its_options_as_jit() -> None:
    from thunder.dynamo import ThunderCompiler

    with pytest.raises(TypeError, match=r"disable_torch_autograd must be True or False.*'no'"):
        ThunderCompiler(disable_torch_autograd="no")
    with pytest.raises(TypeError, match=r"executors must be .*got 3 \(int\)"):
        ThunderCompiler(executors=[3])
    with pytest.raises(TypeError, match=r"recompile_limit must be a positive int.*True"):
        ThunderCompiler(recompile_limit=True)
