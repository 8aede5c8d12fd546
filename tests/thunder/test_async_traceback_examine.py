"""Coroutine, async generator and generator functions under thunder.jit (they run natively, as
eager makes their objects), the user's line on errors raised by a compiled program, and
thunder.examine agreeing with thunder.jit."""

import os
import subprocess
import sys
import textwrap
import traceback
import warnings

import pytest
import torch

import thunder

CACHES = ["constant values", "symbolic values"]


def _run_in_subprocess(source: str) -> str:
    """Runs ``source`` in a fresh interpreter (a crash must not take the test run down) and
    returns its output; it fails the test on a crash or a nonzero exit."""
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.parametrize("cache", CACHES)
def test_coroutine_functions_run_natively(cache: str) -> None:
    out = _run_in_subprocess(
        f"""
        import asyncio, functools, warnings, torch, thunder

        async def af(x, scale):
            await asyncio.sleep(0)
            return x * scale + x.sin()

        class Holder:
            @thunder.jit
            async def method(self, x):
                return x.cos() * 2

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            jf = thunder.jit(af, cache={cache!r})
            for i in range(4):
                x = torch.randn(3, requires_grad=True)
                coro = jf(x, 1.5 + i)
                assert type(coro).__name__ == "coroutine", type(coro)
                got = asyncio.run(coro)
                want = asyncio.run(af(x, 1.5 + i))
                torch.testing.assert_close(got, want)
                g, = torch.autograd.grad(got.sum(), x)
                w, = torch.autograd.grad(want.sum(), x)
                torch.testing.assert_close(g, w)
            coro = jf(torch.ones(2), 2.0)  # sent by hand, as the crash did
            try:
                coro.send(None)
                coro.send(None)
            except StopIteration as stop:
                torch.testing.assert_close(stop.value, torch.ones(2) * 2 + torch.ones(2).sin())
            stats = thunder.compile_stats(jf)
            assert stats.compilations == 0 and stats.split_calls == 0, stats
            assert stats.eager_fallbacks == 5, stats
            assert "coroutine function" in stats.last_eager_reason, stats.last_eager_reason
            h = Holder()
            x = torch.randn(3)
            torch.testing.assert_close(asyncio.run(h.method(x)), x.cos() * 2)
            jp = thunder.jit(functools.partial(af, scale=3.0))
            torch.testing.assert_close(asyncio.run(jp(x)), x * 3.0 + x.sin())
        messages = [str(w.message) for w in caught if "coroutine function" in str(w.message)]
        assert len(messages) == 3, messages  # once per jitted function
        assert all("runs natively" in m for m in messages), messages
        assert not [w for w in caught if "never awaited" in str(w.message)]
        print("ok")
        """
    )
    assert out.strip().endswith("ok")


def test_async_generator_functions_run_natively() -> None:
    out = _run_in_subprocess(
        """
        import asyncio, warnings, torch, thunder

        async def agen(x, n):
            for i in range(n):
                yield x * i
                await asyncio.sleep(0)

        async def collect(it):
            return [v async for v in it]

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            jf = thunder.jit(agen)
            for n in (2, 3, 3):
                x = torch.randn(4)
                got = asyncio.run(collect(jf(x, n)))
                want = asyncio.run(collect(agen(x, n)))
                assert len(got) == len(want) == n
                for a, b in zip(got, want):
                    torch.testing.assert_close(a, b)
            stats = thunder.compile_stats(jf)
            assert stats.compilations == 0 and stats.split_calls == 0, stats
            assert "async generator function" in stats.last_eager_reason
        assert len([w for w in caught if "async generator function" in str(w.message)]) == 1
        print("ok")
        """
    )
    assert out.strip().endswith("ok")


def test_function_returning_a_coroutine_gets_eagers_coroutine() -> None:
    out = _run_in_subprocess(
        """
        import asyncio, warnings, torch, thunder

        def make(x):
            async def inner():
                return x * 2 + 1
            y = x.exp()
            return inner(), y

        warnings.simplefilter("ignore")
        jf = thunder.jit(make)
        for i in range(10):  # past the calls run eagerly before tracing is tried again
            x = torch.randn(3)
            coro, y = jf(x)
            ecoro, ey = make(x)
            assert type(coro).__name__ == "coroutine", type(coro)
            torch.testing.assert_close(asyncio.run(coro), asyncio.run(ecoro))
            torch.testing.assert_close(y, ey)
        stats = thunder.compile_stats(jf)
        assert stats.split_calls == 0, stats
        assert "coroutine" in stats.last_eager_reason, stats
        print("ok")
        """
    )
    assert out.strip().endswith("ok")


@pytest.mark.parametrize("cache", CACHES)
def test_generator_function_runs_natively_and_lazily(cache: str) -> None:
    def gen(x, n):
        for i in range(n):
            yield x * i + x.sin()

    jf = thunder.jit(gen, cache=cache)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (2, 3, 3):
            x = torch.randn(3)
            xe = x.clone()
            got, want = jf(x, n), gen(xe, n)
            x.add_(10)  # the body runs when resumed: it sees the write, as eager's does
            xe.add_(10)
            got_values, want_values = list(got), list(want)
            assert len(got_values) == len(want_values) == n
            for a, b in zip(got_values, want_values):
                torch.testing.assert_close(a, b)
    stats = thunder.compile_stats(jf)
    assert stats.compilations == 0 and stats.split_calls == 0, stats
    assert stats.eager_fallbacks == 3
    assert "generator function" in stats.last_eager_reason
    assert len([w for w in caught if "generator function" in str(w.message)]) == 1


@pytest.mark.parametrize("cache", CACHES)
def test_returned_generator_stays_lazy_as_in_eager(cache: str) -> None:
    def lazy(x):
        return (x * i for i in range(3))

    jf = thunder.jit(lazy, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(10):
            x = torch.randn(3)
            xe = x.clone()
            got, want = jf(x), lazy(xe)
            x.mul_(-3)
            xe.mul_(-3)
            got_values, want_values = list(got), list(want)
            assert len(got_values) == 3
            for a, b in zip(got_values, want_values):
                torch.testing.assert_close(a, b)
    stats = thunder.compile_stats(jf)
    assert stats.split_calls == 0, stats
    assert "generator" in stats.last_eager_reason


def _helper(x, idx):
    return x[idx]  # the line the note names


def _indexes(x, idx):
    y = x * 2
    return _helper(y, idx)


_HELPER_LINE = _helper.__code__.co_firstlineno + 1


@pytest.mark.parametrize("cache", CACHES)
def test_compiled_program_error_names_the_users_line(cache: str) -> None:
    jf = thunder.jit(_indexes, cache=cache)
    for i in range(3):  # compiled, then cached
        x = torch.randn(3 + i)
        torch.testing.assert_close(jf(x, torch.tensor(1)), _indexes(x, torch.tensor(1)))
    for _ in range(2):
        x = torch.randn(3)
        with pytest.raises(IndexError) as eager:
            _indexes(x, torch.tensor(7))
        with pytest.raises(IndexError) as compiled:
            jf(x, torch.tensor(7))
        assert str(compiled.value) == str(eager.value)
        text = "".join(traceback.format_exception(compiled.value))
        assert f"{__file__}:{_HELPER_LINE}" in text, text
        assert "return x[idx]" in text, text
        notes = getattr(compiled.value, "__notes__", [])
        assert len(notes) == 1, notes


def _scaled_by_item(x):
    return x * x.sum().item() + torch.Tensor.item(x[0]) * x


def test_examine_lists_item_as_supported_as_jit_compiles_it() -> None:
    report = thunder.examine(_scaled_by_item, torch.randn(3), show=False)
    assert not report.unsupported, report
    assert report.supported["torch.Tensor.item"] == 2, report
    assert len(report.data_reads) == 2, report.data_reads
    assert report.split_reason is None and report.eager_reason is None, report
    jf = thunder.jit(_scaled_by_item)
    for _ in range(3):
        x = torch.randn(3)
        torch.testing.assert_close(jf(x), _scaled_by_item(x))
    stats = thunder.compile_stats(jf)
    assert stats.split_calls == 0 and stats.eager_fallbacks == 0, stats


def _metadata(x):
    n = x.dim() + x.numel() + x.size(0) + int(x.is_complex()) + x.element_size()
    return torch.sin(x) * n


def test_examine_of_a_jitted_function_examines_the_users_function() -> None:
    def nested(x):
        return jitted_inner(x) * 2

    jitted_inner = thunder.jit(_metadata)
    x = torch.randn(2, 3)
    direct = thunder.examine(_metadata, x, show=False)
    assert not direct.fallback and not direct.unsupported, direct
    for examined in (
        thunder.examine(thunder.jit(_metadata), x, show=False),
        thunder.examine(nested, x, show=False),
        thunder.examine(thunder.jit(nested), x, show=False),
    ):
        assert examined.supported == direct.supported, examined
        assert not examined.fallback and not examined.unsupported, examined
    plain = thunder.examine(thunder.jit(lambda t: t * 2), x, show=False)
    assert not plain.supported and not plain.fallback and not plain.unsupported, plain

    module = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    assert (
        thunder.examine(thunder.jit(module), x, show=False).supported
        == thunder.examine(module, x, show=False).supported
    )

    class Scaler:
        @thunder.jit
        def scale(self, t):
            return torch.cos(t).sum().item() * t

    report = thunder.examine(Scaler().scale, x, show=False)
    assert set(report.supported) == {"torch.cos", "torch.Tensor.sum", "torch.Tensor.item"}, report


def test_examine_says_a_generator_function_runs_natively() -> None:
    def gen(x):
        yield torch.sin(x)

    for examined in (gen, thunder.jit(gen)):
        report = thunder.examine(examined, torch.randn(3), show=False)
        assert "generator function" in report.eager_reason, report
        assert "runs natively" in report.eager_reason, report
        assert not report.unsupported, report
