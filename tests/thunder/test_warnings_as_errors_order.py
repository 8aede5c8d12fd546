"""A program's ``warnings.warn`` under filters that make it an error (``pytest -W error``,
``simplefilter("error")``) raises as eager's does: at the user's line, before the program's
later in-place writes and random draws. Without the error filter the call runs compiled and
matches eager."""

from __future__ import annotations

import traceback
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

CACHES = ["constant values", "symbolic values"]


def _warn_then_write_and_draw(x: torch.Tensor) -> torch.Tensor:
    warnings.warn("deprecated thing", DeprecationWarning)
    x.add_(1)
    n = torch.randn(x.shape)
    return x * 2 + n


def _write_then_warn(x: torch.Tensor) -> torch.Tensor:
    x.mul_(3)
    warnings.warn(f"rows {x.shape[0]}", UserWarning)
    return x + torch.rand(x.shape)


def _legacy_loss_then_write(x: torch.Tensor) -> torch.Tensor:
    loss = F.mse_loss(x, torch.zeros_like(x), size_average=True)
    x.sub_(1)
    return loss + torch.randn(()).abs()


def _raised(fn: Callable[..., Any], x: torch.Tensor, seed: int) -> tuple[Any, ...]:
    """What ``fn(x)`` does under ``simplefilter("error")``: the exception, where its traceback
    ends, ``x`` after, and whether the default generator advanced."""
    torch.manual_seed(seed)
    state = torch.get_rng_state()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(Warning) as info:
            fn(x)
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    return (
        type(info.value),
        str(info.value),
        last.filename,
        last.lineno,
        x.clone(),
        torch.equal(torch.get_rng_state(), state),
    )


def _ran(fn: Callable[..., Any], x: torch.Tensor, seed: int) -> tuple[Any, ...]:
    torch.manual_seed(seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(x)
    seen = [(w.category, str(w.message), w.filename, w.lineno) for w in caught]
    return out, x.clone(), seen, torch.rand(1)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn", [_warn_then_write_and_draw, _write_then_warn, _legacy_loss_then_write]
)
def test_a_warning_as_error_raises_before_later_effects_as_eager(
    fn: Callable[..., Any], cache: str
) -> None:
    jf = thunder.jit(fn, cache=cache)
    for call, rows in enumerate((2, 3, 3, 4, 4)):
        x = torch.randn(rows, 3)
        expected = _raised(fn, x.clone(), call)
        got = _raised(jf, x.clone(), call)
        assert got[:4] == expected[:4]
        torch.testing.assert_close(got[4], expected[4])
        assert got[5] == expected[5]
        # the next call without the error filter runs and matches eager
        x_e, x_j = x.clone(), x.clone()
        out_e, after_e, seen_e, next_e = _ran(fn, x_e, call)
        out_j, after_j, seen_j, next_j = _ran(jf, x_j, call)
        torch.testing.assert_close(out_j, out_e)
        torch.testing.assert_close(after_j, after_e)
        assert seen_j == seen_e
        torch.testing.assert_close(next_j, next_e)


@pytest.mark.parametrize("cache", CACHES)
def test_gradients_after_an_error_call_match_eager(cache: str) -> None:
    def f(w: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
        warnings.warn("slow path", UserWarning)
        buf.add_(1)
        return (w * w + buf).sum()

    jf = thunder.jit(f, cache=cache)
    for rows in (2, 2, 5):
        w0, buf0 = torch.randn(rows), torch.randn(rows)
        for g in (f, jf):
            buf = buf0.clone()
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                with pytest.raises(UserWarning, match="slow path"):
                    g(w0.clone().requires_grad_(), buf)
            torch.testing.assert_close(buf, buf0)
        outs, grads, bufs = [], [], []
        for g in (f, jf):
            w, buf = w0.clone().requires_grad_(), buf0.clone()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = g(w, buf)
            out.backward()
            outs.append(out.detach())
            grads.append(w.grad)
            bufs.append(buf)
        torch.testing.assert_close(outs[1], outs[0])
        torch.testing.assert_close(grads[1], grads[0])
        torch.testing.assert_close(bufs[1], bufs[0])


@pytest.mark.parametrize(
    "make_filter",
    [
        lambda: warnings.simplefilter("error", DeprecationWarning),
        lambda: warnings.filterwarnings("error", message="other message"),
        lambda: warnings.filterwarnings("error", module="some_other_module"),
        lambda: warnings.filterwarnings("error", category=UserWarning, lineno=1),
    ],
)
def test_error_filters_that_do_not_match_keep_the_compiled_call(
    make_filter: Callable[[], None],
) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        warnings.warn("a user warning", UserWarning)
        x.add_(1)
        return x * 2

    jf = thunder.jit(f)
    for _ in range(3):
        x = torch.randn(3)
        x_e, x_j = x.clone(), x.clone()
        with warnings.catch_warnings(record=True) as caught_e:
            warnings.simplefilter("always")
            make_filter()
            out_e = f(x_e)
        with warnings.catch_warnings(record=True) as caught_j:
            warnings.simplefilter("always")
            make_filter()
            out_j = jf(x_j)
        torch.testing.assert_close(out_j, out_e)
        torch.testing.assert_close(x_j, x_e)
        assert [(str(w.message), w.lineno) for w in caught_j] == [
            (str(w.message), w.lineno) for w in caught_e
        ]
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_a_matching_message_filter_raises_as_eager() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        warnings.warn("deprecated: use g", FutureWarning)
        x.add_(1)
        return x

    jf = thunder.jit(f)
    for call in range(3):
        x = torch.randn(3)
        results = []
        for g in (f, jf):
            y = x.clone()
            with warnings.catch_warnings():
                warnings.filterwarnings("error", message="deprecated")
                with pytest.raises(FutureWarning) as info:
                    g(y)
            last = traceback.extract_tb(info.value.__traceback__)[-1]
            results.append((str(info.value), last.filename, last.lineno, y))
        assert results[1][:3] == results[0][:3]
        torch.testing.assert_close(results[1][3], results[0][3])


class _WarnsAndWritesItsBuffer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        warnings.warn("module warning", FutureWarning)
        self.count.add_(1)
        return x + self.count + torch.randn(2)


def _warns_for_its_caller(x: torch.Tensor) -> torch.Tensor:
    warnings.warn("caller's warning", DeprecationWarning, stacklevel=2)
    x.add_(1)
    return x * torch.rand(x.shape)


@pytest.mark.parametrize("cache", CACHES)
def test_a_modules_buffer_is_untouched_after_a_warning_as_error(cache: str) -> None:
    m = _WarnsAndWritesItsBuffer()
    jm_source = _WarnsAndWritesItsBuffer()
    jm = thunder.jit(jm_source, cache=cache)
    for call in range(4):
        raised = []
        for module in (m, jm):
            torch.manual_seed(call)
            state = torch.get_rng_state()
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                with pytest.raises(FutureWarning) as info:
                    module(torch.ones(2))
            last = traceback.extract_tb(info.value.__traceback__)[-1]
            raised.append((last.filename, last.lineno, torch.equal(torch.get_rng_state(), state)))
        assert raised[1] == raised[0]
        torch.testing.assert_close(jm_source.count, m.count)
        outs = []
        for module in (m, jm):
            torch.manual_seed(call)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outs.append(module(torch.full((2,), float(call))))
        torch.testing.assert_close(outs[1], outs[0])
        torch.testing.assert_close(jm_source.count, m.count)


def test_a_warning_attributed_to_the_caller_raises_at_the_callers_line() -> None:
    jf = thunder.jit(_warns_for_its_caller)
    for call in range(3):
        x = torch.randn(3)
        got = []
        for fn in (_warns_for_its_caller, jf):
            y = x.clone()
            torch.manual_seed(call)
            state = torch.get_rng_state()
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                with pytest.raises(DeprecationWarning) as info:
                    fn(y)  # the same line for both
            last = traceback.extract_tb(info.value.__traceback__)[-1]
            unchanged = torch.equal(torch.get_rng_state(), state)
            got.append((str(info.value), last.filename, last.lineno, unchanged, y))
        assert got[1][:4] == got[0][:4]
        torch.testing.assert_close(got[1][4], got[0][4])


def test_filters_changed_between_calls_in_one_block_are_seen() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        warnings.warn("changing filters", UserWarning)
        x.add_(1)
        return x * 2

    jf = thunder.jit(f)
    for fn in (f, jf):
        x = torch.zeros(2)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn(x)
            warnings.simplefilter("error")
            with pytest.raises(UserWarning):
                fn(x)
            warnings.simplefilter("ignore")
            fn(x)
            warnings.filterwarnings("error", category=UserWarning, append=True)
            fn(x)  # "ignore" comes first
            warnings.resetwarnings()
            warnings.simplefilter("error")
            with pytest.raises(UserWarning):
                fn(x)
        assert len(caught) == 1
        torch.testing.assert_close(x, torch.full((2,), 3.0))
