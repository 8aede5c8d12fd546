"""thunder.jit on functions: results, caching, guards on the inputs, options."""

from __future__ import annotations

import warnings

import pytest
import torch
from runs_by_torch import call_split

import thunder


def add(a, b):
    return a + b


def test_jit_matches_eager_and_caches():
    j = thunder.jit(add)
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    torch.testing.assert_close(j(a, b), a + b)
    a2, b2 = torch.randn(2, 3), torch.randn(2, 3)
    torch.testing.assert_close(j(a2, b2), a2 + b2)
    assert thunder.cache_misses(j) == 1
    assert thunder.cache_hits(j) == 1


def test_last_traces_and_prologue_are_python():
    j = thunder.jit(add)
    j(torch.randn(2), torch.randn(2))
    traces = thunder.last_traces(j)
    assert "torch.add(a, b)" in traces[-1].python()
    prologue = thunder.last_prologue_traces(j)[-1].python()
    assert "def prologue(args, kwargs)" in prologue
    assert thunder.last_backward_traces(j) == []
    stats = thunder.compile_stats(j)
    assert stats.compilations == 1 and stats.last_compile_seconds > 0


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t.reshape(3, 2).clone(),
        lambda t: t.double(),
        lambda t: t.clone().requires_grad_(True),
        lambda t: torch.randn(4, 5),
    ],
    ids=["shape", "dtype", "requires_grad", "new-shape"],
)
def test_input_metadata_change_recompiles(change):
    j = thunder.jit(lambda a: a * 2)
    a = torch.randn(2, 3)
    j(a)
    b = change(a)
    torch.testing.assert_close(j(b), b * 2)
    assert thunder.cache_misses(j) == 2
    j(a)
    j(b)
    assert thunder.cache_hits(j) == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_device_change_recompiles():  # pragma: no cover - CPU CI
    j = thunder.jit(lambda a: a * 2)
    j(torch.randn(2))
    j(torch.randn(2, device="cuda"))
    assert thunder.cache_misses(j) == 2


def test_requires_grad_inputs_go_through_thunder_autodiff():
    j = thunder.jit(lambda a, b: (a * b).sum())
    a = torch.randn(3, requires_grad=True)
    b = torch.randn(3)
    out = j(a, b)
    out.backward()
    torch.testing.assert_close(a.grad, b)
    backward = thunder.last_backward_traces(j)
    assert backward and "def computation_backward(" in backward[-1].python()
    assert "def computation_forward(" in thunder.last_traces(j)[-1].python()


def test_requires_grad_change_recompiles():
    j = thunder.jit(lambda a, b: (a * b).sum())
    a, b = torch.randn(3), torch.randn(3)
    j(a, b)
    assert not thunder.last_backward_traces(j)
    a.requires_grad_()
    j(a, b).backward()
    torch.testing.assert_close(a.grad, b)
    assert thunder.cache_misses(j) == 2
    assert "a.requires_grad: False -> True" in thunder.compile_stats(j).last_recompile_reason


def branch_on_grad_mode(a):
    return a * 2 if torch.is_grad_enabled() else a * 3


def test_grad_mode_is_in_the_key():
    # The traced code branches on ambient grad mode: a cached program must not outlive it.
    j = thunder.jit(branch_on_grad_mode)
    a = torch.ones(2)
    torch.testing.assert_close(j(a), a * 2)
    with torch.no_grad():
        torch.testing.assert_close(j(a), a * 3)
    torch.testing.assert_close(j(a), a * 2)
    assert thunder.cache_misses(j) == 2 and thunder.cache_hits(j) == 1
    reason = thunder.compile_stats(j).last_recompile_reason
    assert "grad mode (torch.is_grad_enabled()): True -> False" in reason


def test_program_compiled_without_grad_is_not_reused_with_grad():
    j = thunder.jit(lambda a: (a.sin() * a).sum())
    a = torch.randn(4, requires_grad=True)
    with torch.no_grad():
        assert j(a).grad_fn is None
    out = j(a)
    out.backward()
    torch.testing.assert_close(a.grad, a.detach().cos() * a.detach() + a.detach().sin())
    assert thunder.last_backward_traces(j)


def test_disable_torch_autograd_compiles_without_autodiff():
    j = thunder.jit(lambda a: (a * a).sum(), disable_torch_autograd=True)
    a = torch.randn(3, requires_grad=True)
    j(a).backward()  # torch's autograd records the execution trace's torch calls
    torch.testing.assert_close(a.grad, 2 * a.detach())
    assert thunder.last_backward_traces(j) == []


def test_constant_values_recompile_per_number():
    j = thunder.jit(lambda a, n: a * n)
    a = torch.ones(2)
    torch.testing.assert_close(j(a, 2), a * 2)
    torch.testing.assert_close(j(a, 3), a * 3)
    torch.testing.assert_close(j(a, 2), a * 2)
    assert (thunder.cache_misses(j), thunder.cache_hits(j)) == (2, 1)


def test_symbolic_values_reuse_one_program():
    j = thunder.jit(lambda a, n: a * n, cache="symbolic values")
    a = torch.ones(2)
    for n in (2, 3, 4):
        torch.testing.assert_close(j(a, n), a * n)
    assert (thunder.cache_misses(j), thunder.cache_hits(j)) == (1, 2)


def test_no_caching_compiles_every_call():
    j = thunder.jit(add, cache=thunder.CACHE_OPTIONS.NO_CACHING)
    a = torch.ones(2)
    j(a, a)
    j(a, a)
    assert thunder.cache_misses(j) == 2 and thunder.cache_hits(j) == 0


def test_nested_and_keyword_inputs():
    def f(xs, *, scale, opts):
        return xs[0] * scale + xs[1] * opts["w"]

    j = thunder.jit(f)
    xs = [torch.randn(3), torch.randn(3)]
    want = xs[0] * 2 + xs[1] * 0.5
    torch.testing.assert_close(j(xs, scale=2, opts={"w": 0.5}), want)
    torch.testing.assert_close(j(xs, scale=2, opts={"w": 0.5}), want)
    assert thunder.cache_hits(j) == 1
    torch.testing.assert_close(j(xs, scale=3, opts={"w": 0.5}), xs[0] * 3 + xs[1] * 0.5)
    # another structure of the arguments: a new cache entry, not an error
    xs3 = [torch.randn(3), torch.randn(3), torch.randn(3)]
    torch.testing.assert_close(j(xs3, scale=1, opts={"w": 1.0}), xs3[0] + xs3[1])


def test_returns_structures_and_constants():
    j = thunder.jit(lambda a: {"double": a * 2, "pair": (a + 1, 7), "none": None})
    a = torch.randn(2)
    out = j(a)
    torch.testing.assert_close(out["double"], a * 2)
    torch.testing.assert_close(out["pair"][0], a + 1)
    assert out["pair"][1] == 7 and out["none"] is None


def test_cache_lookup_with_many_entries():
    # constant values given: a program per size (by default sizes become symbolic at the third)
    j = thunder.jit(add, recompile_limit=64, cache="constant values")
    inputs = [(torch.randn(i + 1), torch.randn(i + 1)) for i in range(64)]
    for a, b in inputs:
        j(a, b)
    for a, b in inputs:
        torch.testing.assert_close(j(a, b), a + b)
    assert thunder.cache_misses(j) == 64 and thunder.cache_hits(j) == 64


def test_recompile_limit_warns_with_what_changed_and_runs_eagerly():
    j = thunder.jit(lambda a: a + 1, recompile_limit=2)
    j(torch.randn(1))
    j(torch.randn(2))
    with pytest.warns(
        UserWarning, match=r"recompile limit \(2.*What changed: a\.shape: \(2,\) -> \(3,\)"
    ):
        out = j(torch.ones(3))
    torch.testing.assert_close(out, torch.full((3,), 2.0))
    assert thunder.compile_stats(j).eager_fallbacks == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        j(torch.ones(4))  # warned once per function


def test_unknown_option_lists_the_known_ones():
    with pytest.raises(TypeError, match=r"(?s)unknown option\(s\) 'fusion_level'.*recompile_limit"):
        thunder.jit(add, fusion_level=3)
    with pytest.raises(ValueError, match="unknown cache option"):
        thunder.jit(add, cache="sometimes")


def test_transform_hooks_are_called():
    seen = []

    class Record(thunder.Transform):
        def transform_traces_pre_prologue(self, prologue, computation, epilogue, **kwargs):
            seen.append("pre")
            return prologue, computation, epilogue

        def transform_trace_post_optimization(self, computation, **kwargs):
            seen.append("post")
            return computation

    j = thunder.jit(add, transforms=[Record()])
    j(torch.ones(1), torch.ones(1))
    assert seen == ["pre", "post"]


def test_examine_lists_supported_fallback_and_unsupported_ops(capsys):
    def f(x):
        out = torch.empty(3)
        torch.xlogy(x, x, out=out)  # torch runs it: the call runs split, not refused
        resized = torch.resize_as_(x.clone(), x)  # a storage write torch makes: split too
        as_numpy = torch.from_numpy(x.numpy() * 2)  # data handed to NumPy: not compiled
        out = torch.special.bessel_j0(torch.nn.functional.gelu(x)).sum()
        return out, torch.nonzero(x), resized, as_numpy

    report = thunder.examine(f, torch.randn(3))
    assert any("gelu" in name for name in report.supported)
    assert any("nonzero" in name for name in report.supported)
    assert any("bessel_j0" in name for name in report.fallback)
    assert any("xlogy" in name for name in report.fallback)
    assert any("resize_as_" in name for name in report.fallback)
    assert any("numpy" in name for name in report.unsupported)
    out = capsys.readouterr().out
    assert "UNSUPPORTED" in out and "torch fallback" in out


def test_op_without_grad_rule_runs_split_and_torch_differentiates_it(monkeypatch):
    from thunder_ir import prims
    from thunder_transforms.autodiff import VJP_RULES

    monkeypatch.delitem(VJP_RULES, prims.sin)
    j = thunder.jit(lambda a: a.sin().sum())
    a = torch.randn(3, requires_grad=True)
    got = call_split(j, a, match="cannot differentiate.*disable_torch_autograd")
    (grad,) = torch.autograd.grad(got, a)  # torch differentiates what thunder cannot
    torch.testing.assert_close(grad, a.detach().cos())
    with torch.no_grad():
        j(torch.randn(3, requires_grad=True))  # no gradients wanted: no autodiff needed


def test_a_different_function_argument_is_a_different_program():
    def apply(x, fn):
        return fn(x)

    j = thunder.jit(apply)
    x = torch.randn(4)
    for fn in (torch.sin, torch.cos, torch.sin, lambda t: t * 3):
        torch.testing.assert_close(j(x, fn), fn(x))
    assert thunder.cache_misses(j) == 3 and thunder.cache_hits(j) == 1


def test_symbolic_size_arithmetic_is_lean_in_the_execution_trace():
    """Seed 001's split: the sizes are computed from the inputs in the trace, and arithmetic
    nobody reads (the split outputs' sizes) or that changes nothing (``i + 0``, ``i // 1``) is
    not in the code that runs."""

    def foo(a, dim0, dim1):
        dim2 = a.size(2) - dim0 - dim1
        return torch.split(a, (dim0, dim1, dim2), dim=2)

    jf = thunder.jit(foo, cache="symbolic values")
    a = torch.randn(8, 16, 32)
    for d0, d1 in ((2, 8), (5, 5), (1, 30)):
        out, ref = jf(a, d0, d1), foo(a, d0, d1)
        assert [o.shape for o in out] == [r.shape for r in ref]
        for o, r in zip(out, ref):
            torch.testing.assert_close(o, r)
    assert thunder.compile_stats(jf).cache_misses == 1
    code = str(thunder.last_traces(jf)[-1])
    number_ops = [line for line in code.splitlines() if "operator." in line]
    assert len(number_ops) == 2, code  # 32 - dim0, then - dim1
    assert "floordiv" not in code


# A custom op whose meta kernel is stricter than its real one, counting the calls of each.
_PICKY = {"meta_refuses": True, "traces": 0, "runs": 0}


@torch.library.custom_op("thunder_test::picky_double", mutates_args=())
def _picky_double(x: torch.Tensor) -> torch.Tensor:
    _PICKY["runs"] += 1
    return x * 2


@_picky_double.register_fake
def _(x):
    _PICKY["traces"] += 1
    if _PICKY["meta_refuses"]:
        raise RuntimeError("picky_double: the meta kernel refuses these inputs")
    return torch.empty_like(x)


def test_inputs_whose_tracing_failed_run_eagerly_without_retracing_until_a_retry():
    """Tracing that fails where eager runs is not retried on every call (a retrace costs
    milliseconds): those inputs run eagerly, and tracing is tried again after a wait that
    doubles with each failure, so a program whose state changed compiles in the end."""
    jf = thunder.jit(lambda x: torch.ops.thunder_test.picky_double(x) + 1)
    stats = thunder.compile_stats(jf)

    def call(expect_traces: int, expect_runs: int) -> None:
        x = torch.randn(3)
        torch.testing.assert_close(jf(x), x * 2 + 1)
        assert (_PICKY["traces"], _PICKY["runs"]) == (expect_traces, expect_runs)

    _PICKY.update(meta_refuses=True, traces=0, runs=0)
    try:
        with pytest.warns(UserWarning, match="meta kernel refuses"):
            call(1, 1)  # the failed trace, then eager
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for k in range(8):  # the first wait: eager runs alone
                call(1, 2 + k)
            call(2, 10)  # tried again: fails again
            for k in range(16):  # the wait doubled
                call(2, 11 + k)
            assert stats.eager_fallbacks == 26 and stats.compilations == 0
        _PICKY["meta_refuses"] = False  # from now on it traces (the meta kernel runs twice)
        call(4, 27)
        call(4, 28)
        assert stats.compilations == 1 and stats.cache_hits == 1 and stats.eager_fallbacks == 26
    finally:
        _PICKY["meta_refuses"] = False


def test_other_inputs_trace_while_failed_ones_run_eagerly():
    def f(x):
        return torch.ops.thunder_test.picky_double(x) if x.dim() == 1 else x - 1

    jf = thunder.jit(f)
    _PICKY["meta_refuses"] = True
    try:
        with pytest.warns(UserWarning, match="meta kernel refuses"):
            jf(torch.randn(3))
        y = torch.randn(2, 2)
        torch.testing.assert_close(jf(y), y - 1)
        assert thunder.compile_stats(jf).compilations == 1
    finally:
        _PICKY["meta_refuses"] = False
