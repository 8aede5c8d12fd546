"""torch's higher-order operators through thunder.jit: torch.cond, while_loop, map, scan and
associative_scan, against eager on fresh random inputs, forward and gradients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch._higher_order_ops import associative_scan, scan, while_loop
from torch._higher_order_ops import map as hop_map

import thunder
from thunder_ir import check_trace


def _leaves(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in _leaves(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _leaves(v)]
    return []


def check_against_eager(fn: Callable[..., Any], *make: Callable[[], torch.Tensor]) -> Any:
    """``fn`` jitted and eager on the same fresh inputs: outputs and the gradients of every input
    that requires grad are equal (two calls: the second one is a cache hit)."""
    jf = thunder.jit(fn)
    for _ in range(2):
        inputs = [m() for m in make]
        ref_inputs = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
        out, ref = jf(*inputs), fn(*ref_inputs)
        torch.testing.assert_close(out, ref)
        floats = [o for o in _leaves(ref) if o.requires_grad]
        if floats:
            outs = [o for o in _leaves(out) if o.requires_grad]
            assert len(outs) == len(floats)
            weights = [torch.randn_like(o) for o in floats]
            sum((o * w).sum() for o, w in zip(outs, weights)).backward()
            sum((o * w).sum() for o, w in zip(floats, weights)).backward()
            for x, r in zip(inputs, ref_inputs):
                if r.requires_grad:
                    assert (x.grad is None) == (r.grad is None)
                    if r.grad is not None:
                        torch.testing.assert_close(x.grad, r.grad)
    for trace in thunder.last_traces(jf):
        check_trace(trace, rerun_meta=False)
    assert thunder.compile_stats(jf).eager_fallbacks == 0
    return jf


def _randn(*shape: int, requires_grad: bool = True) -> Callable[[], torch.Tensor]:
    return lambda: torch.randn(*shape, requires_grad=requires_grad)


# -- cond ---------------------------------------------------------------------------------------


def test_cond_data_dependent_predicate_both_branches() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda a, b: a.cos() * b, lambda a, b: a.sin() + b, (x, y))

    jf = thunder.jit(f)
    seen = set()
    for _ in range(12):
        x = torch.randn(5, requires_grad=True)
        y = torch.randn(5, requires_grad=True)
        seen.add(bool(x.sum() > 0))
        out = jf(x, y)
        xr, yr = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
        ref = f(xr, yr)
        torch.testing.assert_close(out, ref)
        out.sum().backward()
        ref.sum().backward()
        torch.testing.assert_close(x.grad, xr.grad)
        torch.testing.assert_close(y.grad, yr.grad)
    assert seen == {True, False}
    assert thunder.compile_stats(jf).cache_misses == 1  # one program serves both branches
    assert "higher_order.cond" in str(thunder.last_traces(jf)[-1])
    assert "def cond_true" in str(thunder.last_traces(jf)[-1])


def test_cond_branch_reads_a_captured_parameter() -> None:
    model = torch.nn.Linear(4, 4)

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.mean() > 0, lambda a: model(a).relu(), lambda a: a * 2.0, (x,))

    jf = thunder.jit(f)
    for _ in range(6):
        x = torch.randn(3, 4)
        out = jf(x)
        ref = f(x)
        torch.testing.assert_close(out, ref)
        out.sum().backward()
        grads = [
            p.grad.clone() if p.grad is not None else torch.zeros_like(p)
            for p in model.parameters()
        ]
        model.zero_grad()
        ref.sum().backward()
        for g, p in zip(grads, model.parameters()):
            torch.testing.assert_close(g, p.grad if p.grad is not None else torch.zeros_like(p))
        model.zero_grad()


def test_cond_pytree_operands_and_outputs() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> Any:
        def t(d: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
            return d["a"] + d["b"], d["a"] * 2

        def e(d: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
            return d["a"] - d["b"], d["b"].exp()

        return torch.cond(y.max() > 0.5, t, e, ({"a": x, "b": y},))

    check_against_eager(f, _randn(3), _randn(3))


def test_cond_with_static_predicate_inlines_and_guards() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.shape[0] > 4, torch.cos, torch.sin, (x,))

    jf = thunder.jit(f)
    for n in (5, 3, 5):
        x = torch.randn(n)
        torch.testing.assert_close(jf(x), f(x))
    assert "higher_order" not in str(thunder.last_traces(jf)[-1])


def test_cond_mismatched_branch_outputs_name_both_shapes() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda a: a, lambda a: a[:2], (x,))

    with pytest.raises(
        thunder.HigherOrderOperatorError, match=r"cond_true.*f32\[4\].*cond_false.*f32\[2\]"
    ):
        thunder.jit(f)(torch.randn(4))


def test_cond_branch_that_raises_reports_the_users_error() -> None:
    """Eager traces both branches and raises (torch wraps the error): the jitted call raises
    eager's own exception, whichever branch the predicate selects."""

    def bad(a: torch.Tensor) -> torch.Tensor:
        raise KeyError("no such branch")

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, torch.cos, bad, (x,))

    jf = thunder.jit(f)
    for x in (torch.ones(4), -torch.ones(4)):
        with pytest.raises(Exception, match="no such branch"):
            f(x)
        with pytest.raises(Exception, match="no such branch"):
            jf(x)


def test_cond_branch_writing_outside_state_is_refused() -> None:
    log: list[Any] = []

    def f(x: torch.Tensor) -> torch.Tensor:
        def t(a: torch.Tensor) -> torch.Tensor:
            log.append(1)
            return a

        return torch.cond(x.sum() > 0, t, torch.sin, (x,))

    # torch's contract (eager refuses it too): the program's error, thunder's message
    with pytest.raises(thunder.HigherOrderOperatorError, match="torch.cond's true_fn"):
        thunder.jit(f)(torch.randn(4))
    assert log == []


def test_cond_branch_writing_its_input_is_refused() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda a: a.add_(1), lambda a: a + 1, (x,))

    x = torch.randn(4)
    before = x.clone()
    with pytest.raises(thunder.HigherOrderOperatorError, match="in place"):  # eager's contract too
        thunder.jit(f)(x)
    torch.testing.assert_close(x, before)


# -- while_loop ---------------------------------------------------------------------------------


def test_while_loop_forward_and_gradients() -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> Any:
        def cond_fn(i: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
            return (i < 4) & (a.abs().sum() < 100)

        def body_fn(i: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return i + 1, torch.tanh(a * w) + a

        return while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), x))

    check_against_eager(f, _randn(3), _randn(3))


def test_while_loop_data_dependent_trip_count() -> None:
    def f(x: torch.Tensor) -> Any:
        return while_loop(lambda a: a.sum() < 50.0, lambda a: (a * 1.5 + 1.0,), (x,))

    jf = thunder.jit(f)
    for _ in range(4):
        x = torch.rand(4)
        torch.testing.assert_close(jf(x), f(x))


# -- map and scan -----------------------------------------------------------------------------


def test_map_with_unmapped_arguments() -> None:
    def f(xs: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return hop_map(lambda x, v: (x * v).sin() @ v, xs, w)

    check_against_eager(f, _randn(5, 3), _randn(3))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dim", [0, 1])
def test_scan_carry_and_outputs(reverse: bool, dim: int) -> None:
    def f(init: torch.Tensor, xs: torch.Tensor, w: torch.Tensor) -> Any:
        def combine(c: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            n = torch.tanh(c * w + x)
            return n, (n * x).sum(0, keepdim=True)

        return scan(combine, init, xs, dim=dim, reverse=reverse)

    shape = (4, 3) if dim == 0 else (3, 4)
    check_against_eager(f, _randn(3), _randn(*shape), _randn(3))


@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_matches_eager_generic_mode(reverse: bool) -> None:
    def f(xs: torch.Tensor, ys: torch.Tensor) -> Any:
        def combine(a: Any, b: Any) -> Any:  # associative: (sum, product) pairs
            return (a[0] + b[0], a[1] * b[1])

        return associative_scan(combine, (xs, ys), 1, reverse=reverse, combine_mode="generic")

    check_against_eager(f, _randn(2, 6), _randn(2, 6))


def test_cond_nested_in_scan() -> None:
    def f(init: torch.Tensor, xs: torch.Tensor) -> Any:
        def combine(c: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            n = torch.cond(x.sum() > 0, lambda a, b: a + b, lambda a, b: a * b, (c, x))
            return n, n.clone()

        return scan(combine, init, xs)

    check_against_eager(f, _randn(3), _randn(5, 3))


# -- torch.autograd.Function --------------------------------------------------------------------


class ScaledGrad(torch.autograd.Function):
    """Forward x * 2; backward deliberately not the true gradient (g * 3 + saved y)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, y: torch.Tensor, k: float) -> torch.Tensor:
        ctx.save_for_backward(y)
        ctx.k = k
        return x * 2 + y.sin()

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        (y,) = ctx.saved_tensors
        gx = g * 3 + y if ctx.needs_input_grad[0] else None
        gy = g * ctx.k if ctx.needs_input_grad[1] else None
        return gx, gy, None


class SplitNonDifferentiable(torch.autograd.Function):
    @staticmethod
    def forward(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.exp(), x.argmax(-1)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(output[0])

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, g: torch.Tensor, _g_index: torch.Tensor) -> torch.Tensor:
        (e,) = ctx.saved_tensors
        return g * e * 0.5  # not the true gradient: the user's rule must win


def test_autograd_function_custom_backward_is_honoured() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ScaledGrad.apply(x, y, 1.5).tanh()

    jf = check_against_eager(f, _randn(4), _randn(4))
    assert "higher_order.autograd_function" in str(thunder.last_traces(jf)[-1])


def test_autograd_function_only_one_input_requires_grad() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ScaledGrad.apply(x, y, 0.5)

    check_against_eager(f, _randn(4), _randn(4, requires_grad=False))


def test_autograd_function_setup_context_non_differentiable_once_differentiable() -> None:
    def f(x: torch.Tensor) -> Any:
        e, idx = SplitNonDifferentiable.apply(x)
        return e * 2, idx

    jf = check_against_eager(f, _randn(3, 5))
    out = jf(torch.randn(3, 5, requires_grad=True))
    assert out[0].requires_grad and not out[1].requires_grad


def test_autograd_function_in_a_module_under_no_grad() -> None:
    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return ScaledGrad.apply(x, self.w, 2.0).sum()

    m = M()
    jm = thunder.jit(m)
    x = torch.randn(4, requires_grad=True)
    out, ref = jm(x), m(x)
    torch.testing.assert_close(out, ref)
    out.backward()
    g_thunder, x.grad = m.w.grad.clone(), None
    m.w.grad = None
    ref.backward()
    torch.testing.assert_close(g_thunder, m.w.grad)
    with torch.no_grad():
        out = jm(x)
    assert not out.requires_grad
    torch.testing.assert_close(out, m(x).detach())


def test_autograd_function_backward_with_wrong_gradient_count() -> None:
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return x + y

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            return g

    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return Bad.apply(x, y)

    x, y = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        f(x, y).sum().backward()  # eager: in the backward
    # compiled: the forward runs (eagerly, with a warning), as eager's; the backward raises
    with pytest.warns(UserWarning, match="incorrect number of gradients"):
        out = thunder.jit(f)(x, y)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        out.sum().backward()


def test_higher_order_functions_under_autocast_compute_as_eager() -> None:
    def f(x: torch.Tensor, w: torch.Tensor, xs: torch.Tensor) -> Any:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = x @ w  # bfloat16 operands reach the branches
            y = torch.cond(h.sum() > 0, lambda a: a @ w, lambda a: a @ w.t() + 1, (h,))
            c, ys = scan(lambda c, v: (c + (v @ w).float(), v @ w), x[0].float(), xs)
        return y, c, ys

    jf = thunder.jit(f)
    for _ in range(4):
        x, w, xs = torch.randn(3, 3), torch.randn(3, 3), torch.randn(2, 3)
        out, ref = jf(x, w, xs), f(x, w, xs)
        for o, r in zip(out, ref):
            assert o.dtype == r.dtype
            torch.testing.assert_close(o, r, atol=3e-2, rtol=3e-2)
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_unused_higher_order_result_is_dropped_and_dead_code_inside_removed() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        def body(a: torch.Tensor) -> torch.Tensor:
            _unused = a.exp()
            return a.cos()

        _dead = torch.cond(x.sum() > 0, torch.sin, torch.cos, (x,))
        return torch.cond(x.sum() > 1, body, torch.sin, (x,))

    jf = check_against_eager(f, _randn(4, requires_grad=False))
    execution = str(thunder.last_traces(jf)[-1])
    assert execution.count("higher_order.cond") == 1
    assert "exp" not in execution


def test_autograd_function_where_torch_autograd_records_the_program() -> None:
    """An in-place write into an input where gradients flow: torch.autograd records the compiled
    program, and the user's backward is still the one that runs."""

    def f(x: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
        buf.add_(ScaledGrad.apply(x, x.cos(), 2.0))
        return buf.sum()

    jf = thunder.jit(f)
    x = torch.randn(4, requires_grad=True)
    buf, ref_buf = torch.zeros(4), torch.zeros(4)
    out = jf(x, buf)
    out.backward()
    got, x.grad = x.grad.clone(), None
    ref = f(x, ref_buf)
    ref.backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(buf, ref_buf)
    torch.testing.assert_close(got, x.grad)
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_checkpoint_inside_a_cond_branch_and_cond_inside_a_checkpoint() -> None:
    from torch.utils.checkpoint import checkpoint

    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        def heavy(a: torch.Tensor) -> torch.Tensor:
            return checkpoint(lambda b: (b @ w).tanh() @ w, a, use_reentrant=False)

        y = torch.cond(x.sum() > 0, heavy, lambda a: a * 2.0, (x,))

        def region(a: torch.Tensor) -> torch.Tensor:
            return torch.cond(a.mean() > 0, lambda b: b.sin(), lambda b: b.cos() * w, (a,))

        return checkpoint(region, y, use_reentrant=False)

    check_against_eager(f, _randn(4, 4), _randn(4, 4))


def test_jitted_function_inside_a_jitted_function_merges_guards() -> None:
    import warnings

    state = {"k": 2.0}

    def inner(a: torch.Tensor) -> torch.Tensor:
        return a.sin() * state["k"]

    jinner = thunder.jit(inner)

    def outer(x: torch.Tensor) -> torch.Tensor:
        return jinner(x) + 1

    jouter = thunder.jit(outer)
    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(jouter(x), inner(x) + 1)
        state["k"] = 5.0  # read inside the inner function: guarded by the outer program
        torch.testing.assert_close(jouter(x), inner(x) + 1)
    assert thunder.compile_stats(jouter).cache_misses == 2
    assert thunder.compile_stats(jinner).cache_misses == 0  # never ran its own cache


def test_symbolic_values_cache_with_a_cond_program() -> None:
    def f(x: torch.Tensor, k: float) -> torch.Tensor:
        return torch.cond(x.sum() > k, lambda a: a * k, lambda a: a - k, (x,))

    jf = thunder.jit(f, cache="symbolic values")
    for k in (0.0, 1.5, -2.0):
        x = torch.randn(4)
        torch.testing.assert_close(jf(x, k), f(x, k))
    assert thunder.compile_stats(jf).cache_misses == 1


def test_examine_and_cse_keep_higher_order_calls() -> None:
    from thunder_executors import transform_for_execution
    from thunder_transforms import constant_fold, cse, dce

    def f(x: torch.Tensor) -> Any:
        a = torch.cond(x.sum() > 0, torch.sin, torch.cos, (x,))
        b = torch.cond(x.sum() > 0, torch.sin, torch.tan, (x,))
        return a + b

    jf = thunder.jit(f)
    x = torch.randn(4)
    torch.testing.assert_close(jf(x), f(x))
    trace = thunder.last_traces(jf)[0]
    after = cse(trace)
    check_trace(after)
    assert str(after).count("higher_order.cond") == 2  # different branches: both kept
    for transform in (constant_fold, dce, cse):
        trace = transform(trace)
        check_trace(trace)
        assert str(trace).count("higher_order.cond") == 2
        torch.testing.assert_close(
            transform_for_execution(trace, ["torch"]).python_callable()(x), f(x)
        )


def test_outputs_never_share_memory_with_operands() -> None:
    """torch's higher-order ops return new tensors (eager refuses functions that return an
    input or a view of one): writing into an output leaves the operands as they were."""

    def f(x: torch.Tensor, y: torch.Tensor) -> Any:
        a = torch.cond(x.sum() > 0, lambda t: t, lambda t: t * 2, (x[0:2],))
        b = torch.cond(x.sum() > 0, lambda t: t.view(2, 2), lambda t: t.reshape(2, 2), (y,))
        zero = torch.zeros((), dtype=torch.int64)
        _, c = while_loop(lambda i, t: i < 2, lambda i, t: (i + 1, t), (zero, y))
        a.add_(1)
        b.mul_(2)
        c.sub_(3)
        return a, b, c

    def reference(x: torch.Tensor, y: torch.Tensor) -> Any:
        a = x[0:2].clone() if x.sum() > 0 else x[0:2] * 2
        return a + 1, y.view(2, 2) * 2, y - 3

    jf = thunder.jit(f)
    for sign in (1.0, -1.0):
        x, y = torch.rand(3) * sign + sign, torch.randn(4)
        x0, y0 = x.clone(), y.clone()
        torch.testing.assert_close(jf(x, y), reference(x0, y0))
        torch.testing.assert_close(x, x0)
        torch.testing.assert_close(y, y0)


def test_jitted_submodule_inside_a_jitted_model() -> None:
    import warnings

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = thunder.jit(torch.nn.Linear(4, 4))
            self.head = torch.nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.inner(x).relu())

    model = Model()
    jm = thunder.jit(model)
    x = torch.randn(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = jm(x)
    ref = model(x)
    torch.testing.assert_close(out, ref)
    out.sum().backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ref.sum().backward()
    for g, p in zip(got, model.parameters()):
        torch.testing.assert_close(g, p.grad)
    assert thunder.compile_stats(jm).eager_fallbacks == 0


def test_while_loop_that_runs_no_step_has_the_identity_gradient() -> None:
    """The loop body never runs: the output is the input, so its gradient passes unchanged.
    (Eager torch 2.13 returns twice this gradient here, as if the body had run once.)"""

    def f(x: torch.Tensor) -> torch.Tensor:
        return while_loop(lambda a: a.sum() > 1e9, lambda a: (a * 2,), (x,))[0] * 3

    x = torch.randn(3, requires_grad=True)
    out = thunder.jit(f)(x)
    torch.testing.assert_close(out, x.detach() * 3)
    out.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 3.0))


def test_map_and_scan_over_an_empty_dimension_are_clear_errors() -> None:
    with pytest.raises(thunder.HigherOrderOperatorError, match="cannot be 0"):
        thunder.jit(lambda xs: hop_map(lambda x: x * 2, xs))(torch.zeros(0, 3))
    with pytest.raises(thunder.HigherOrderOperatorError, match="cannot have size 0"):
        thunder.jit(lambda xs: scan(lambda c, x: (c + x, c * 2), torch.zeros(3), xs))(
            torch.zeros(0, 3)
        )
