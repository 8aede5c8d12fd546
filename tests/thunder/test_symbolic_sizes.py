"""Symbolic tensor sizes under ``cache="symbolic values"``: one program for every size that
satisfies what the traced path relied on, checked by the prologue, never a stale result."""

from __future__ import annotations

import warnings

import pytest
import torch

import thunder
from thunder_ir import IntegerProxy, TensorProxy

SYM = "symbolic values"


def _compiles(jf: object) -> int:
    return thunder.compile_stats(jf).compilations


def test_one_program_serves_every_length() -> None:
    jf = thunder.jit(lambda x: (x * 2).sum(-1), cache=SYM)
    for n in range(5, 15):
        x = torch.randn(2, n)
        torch.testing.assert_close(jf(x), (x * 2).sum(-1))
    assert _compiles(jf) == 1
    trace = thunder.last_traces(jf)[-1]
    assert any(isinstance(s, IntegerProxy) for s in trace.args[0].shape)
    prologue = str(thunder.last_prologue_traces(jf)[-1])
    assert "x.shape" in prologue and ">= 2" in prologue


def test_sizes_of_one_and_zero_are_their_own_program() -> None:
    # Broadcasting and empty tensors behave differently there; each gets a program of its own.
    jf = thunder.jit(lambda x, y: x + y, cache=SYM)
    for a, b in (
        ((3, 4), (3, 4)),
        ((3, 4), (1, 4)),
        ((3, 5), (1, 5)),
        ((3, 6), (3, 6)),
        ((0, 6), (1, 6)),
    ):
        x, y = torch.randn(a), torch.randn(b)
        torch.testing.assert_close(jf(x, y), x + y)
    assert _compiles(jf) == 3


def test_broadcast_relies_on_equal_sizes() -> None:
    jf = thunder.jit(lambda x, y: x + y, cache=SYM)
    jf(torch.randn(3, 4), torch.randn(1, 4))
    prologue = str(thunder.last_prologue_traces(jf)[-1])
    assert "x_size1 == y_size1" in prologue
    with pytest.raises(RuntimeError):  # as eager: the sizes must match
        jf(torch.randn(3, 4), torch.randn(1, 5))


def _halves_stacked(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[1] // 2
    return torch.stack([x[:, :h], x[:, h:]]) * 2


def test_stack_of_sizes_computed_apart_relies_on_them_being_equal() -> None:
    # n // 2 and n - n // 2 are different symbolic sizes, equal for an even n: stack takes them
    # as equal (a constraint), as broadcasting does; it raised "stack expects each tensor to be
    # equal size" for two equal sizes (GPT-J's and Cohere's rotary embeddings).
    jf = thunder.jit(_halves_stacked, cache=SYM)
    for n in (8, 12, 6):
        x = torch.randn(3, n)
        torch.testing.assert_close(jf(x), _halves_stacked(x))
    assert _compiles(jf) == 1
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        jf(torch.randn(3, 7))  # as eager


def test_repeat_interleave_keeps_sizes_symbolic() -> None:
    # It ran through the torch fallback, which specializes sizes (GPT-J's and CodeGen's rotary
    # embeddings compiled once per sequence length).
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.repeat_interleave(x, 2, 1) + x.repeat_interleave(2, dim=1)

    jf = thunder.jit(f, cache=SYM)
    for n in (8, 11, 6):
        x = torch.randn(2, n)
        torch.testing.assert_close(jf(x), f(x))
    assert _compiles(jf) == 1


def test_branch_on_a_size_is_a_constraint() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] > 6:
            return x.exp()
        return x.sin()

    jf = thunder.jit(f, cache=SYM)
    for n in (3, 4, 7, 9, 5, 12):
        x = torch.randn(2, n)
        torch.testing.assert_close(jf(x), f(x))
    assert _compiles(jf) == 2


def test_dead_invalid_reshape_still_raises() -> None:
    def f(a: torch.Tensor) -> torch.Tensor:
        a.reshape(4, -1)
        return a * 2

    jf = thunder.jit(f, cache=SYM)
    jf(torch.randn(8))
    with pytest.raises(RuntimeError, match="invalid"):
        jf(torch.randn(6))


def test_size_arithmetic_is_traced() -> None:
    # Seed 001: every size is computed in the trace, none is a number from nowhere.
    def f(a: torch.Tensor, dim0: int, dim1: int) -> tuple[torch.Tensor, ...]:
        dim2 = a.size(2) - dim0 - dim1
        return torch.split(a, (dim0, dim1, dim2), dim=2)

    jf = thunder.jit(f, cache=SYM)
    for n, d0, d1 in ((32, 2, 8), (40, 3, 9), (17, 5, 4)):
        a = torch.randn(2, 3, n)
        for got, want in zip(jf(a, d0, d1), f(a, d0, d1)):
            torch.testing.assert_close(got, want)
    assert _compiles(jf) == 1
    trace = thunder.last_traces(jf)[0]
    defined = {p.name for p in trace.args}

    def visit(bsym: object) -> None:
        for sub in bsym.subsymbols:  # type: ignore[attr-defined]
            visit(sub)
        for p in (*bsym.flat_proxy_args, *bsym.flat_proxy_outs):  # type: ignore[attr-defined]
            for s in p.shape if isinstance(p, TensorProxy) else ():
                if isinstance(s, IntegerProxy):
                    assert s.name in defined, f"{s.name} in {bsym.sym.name} is never computed"  # type: ignore[attr-defined]
        defined.update(p.name for p in bsym.flat_proxy_outs)  # type: ignore[attr-defined]

    for bsym in trace.bound_symbols:
        # A size may be computed inside the op that uses it (printed as its subsymbols).
        defined.update(p.name for sub in bsym.subsymbols for p in _all_outputs(sub))
        visit(bsym)


def _all_outputs(bsym: object) -> list[object]:
    outs = list(bsym.flat_proxy_outs)  # type: ignore[attr-defined]
    for sub in bsym.subsymbols:  # type: ignore[attr-defined]
        outs.extend(_all_outputs(sub))
    return outs


FUNCTIONS = [
    lambda x: x.view(-1, 4).softmax(-1),
    lambda x: torch.cat([x, x * 2], dim=1).mean(),
    lambda x: x.reshape(x.shape[0], -1, 2).transpose(1, 2) * 3,
    lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:]),
    lambda x: x[:, 1:] * x.shape[1],
    lambda x: torch.zeros(x.shape[0], 2) + x[:, :2],
    lambda x: x.unsqueeze(0).expand(3, *x.shape).sum(0),
    lambda x: torch.arange(x.shape[1]) * x,
    lambda x: x @ x.t(),
]


@pytest.mark.parametrize("fn", FUNCTIONS, ids=range(len(FUNCTIONS)))
def test_values_and_gradients_match_eager(fn: object) -> None:
    jf = thunder.jit(fn, cache=SYM)
    for n in (4, 6, 8, 2, 10, 12):
        x = torch.randn(n, 2 * n, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_()
        out, ref = jf(x), fn(x_ref)  # type: ignore[operator]
        torch.testing.assert_close(out, ref)
        out.sum().backward()
        ref.sum().backward()
        torch.testing.assert_close(x.grad, x_ref.grad)
    assert _compiles(jf) <= 2


def test_module_parameters_keep_static_sizes() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    jm = thunder.jit(model, cache=SYM)
    for n in (3, 5, 9):
        x = torch.randn(n, 8)
        torch.testing.assert_close(jm(x), model(x))
    assert _compiles(jm) == 1
    trace = thunder.last_traces(jm)[-1]
    weights = [a for a in trace.args if isinstance(a, TensorProxy) and a.name.endswith("weight")]
    assert weights and all(all(isinstance(s, int) for s in w.shape) for w in weights)


class _Cache:
    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None


def test_tensors_inside_argument_objects_have_symbolic_sizes() -> None:
    # A KV cache object passed in: its tensors grow on every call.
    def step(x: torch.Tensor, cache: _Cache) -> torch.Tensor:
        assert cache.keys is not None
        keys = torch.cat([cache.keys, x], dim=1)
        cache.keys = keys
        return keys.softmax(1).sum(1)

    jf = thunder.jit(step, cache=SYM)
    cache, ref_cache = _Cache(), _Cache()
    cache.keys = ref_cache.keys = torch.randn(2, 3)
    for _ in range(6):
        x = torch.randn(2, 1)
        torch.testing.assert_close(jf(x, cache), step(x, ref_cache))
        torch.testing.assert_close(cache.keys, ref_cache.keys)
    assert _compiles(jf) == 1


def test_torchcompile_region_compiles_once_for_all_sizes() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ((x * 2).sin() + y).sum(-1).exp()

    jf = thunder.jit(f, cache=SYM, executors=("torchcompile", "torch"))
    for n in (3, 4, 7, 9):
        x, y = torch.randn(4, n), torch.randn(4, n)
        torch.testing.assert_close(jf(x, y), f(x, y))
    assert _compiles(jf) == 1
    trace = thunder.last_traces(jf)[-1]
    regions = [b.sym.impl for b in trace.bound_symbols if b.sym.module == "torchcompile"]
    assert regions and all(r.options.get("dynamic") is True for r in regions)
    assert all(r.calls == 1 for r in regions)  # compiled on the first call only


def test_recompile_warning_names_the_change_and_useful_options() -> None:
    jf = thunder.jit(lambda x: x.sum(-1), recompile_limit=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (3, 4, 5):
            jf(torch.randn(2, n))
    (w,) = [c for c in caught if "recompile limit" in str(c.message)]
    assert "x.shape: (2, 4) -> (2, 5)" in str(w.message)
    assert "cache='symbolic values'" in str(w.message)

    jg = thunder.jit(lambda x: x * 2, recompile_limit=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jg(torch.ones(2))
        jg(torch.ones(2, dtype=torch.float64))
    (w,) = [c for c in caught if "recompile limit" in str(c.message)]
    assert "dtype" in str(w.message) and "symbolic" not in str(w.message)

    js = thunder.jit(lambda x: x[:, :3] if x.shape[1] > 3 else x, cache=SYM, recompile_limit=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        js(torch.randn(2, 5))
        js(torch.randn(2, 2))
    (w,) = [c for c in caught if "recompile limit" in str(c.message)]
    assert "pass cache='symbolic values'" not in str(w.message)
    assert "x_size1 > 3" in str(w.message)


_INPUT_VIEWS = {
    "diagonal": lambda w: w.diagonal(0, 1, 0),
    "diagonal_offset": lambda w: w.diagonal(1),
    "transpose": lambda w: w.t(),
    "narrow": lambda w: w.narrow(1, 1, 2),
    "select": lambda w: w[1],
    "unflatten": lambda w: w.view(-1),
}


@pytest.mark.parametrize("view", sorted(_INPUT_VIEWS))
def test_view_of_an_input_returned_with_a_gradient_is_eager_view(view: str) -> None:
    # Differentiated under symbolic sizes, a returned view of an input is torch's own view (its
    # strides and memory), as without them; before, ops whose decomposition computes a size
    # (diagonal) ran as that decomposition: a copy with other strides.
    f = _INPUT_VIEWS[view]
    jf = thunder.jit(f, cache=SYM)
    for shape in ((3, 4), (5, 6)):
        w = torch.randn(*shape, requires_grad=True)
        expected, actual = f(w), jf(w)
        assert actual.shape == expected.shape and actual.stride() == expected.stride()
        assert actual.storage_offset() == expected.storage_offset()
        assert actual.untyped_storage().data_ptr() == w.untyped_storage().data_ptr()
        torch.testing.assert_close(actual, expected)
        weights = torch.randn(expected.shape)
        (g_e,) = torch.autograd.grad((expected * weights).sum(), w)
        (g_a,) = torch.autograd.grad((actual * weights).sum(), w)
        torch.testing.assert_close(g_a, g_e)


@pytest.mark.parametrize("key", [slice(4, None, 2), slice(1, None, 3), slice(2, 5)])
def test_gradient_of_a_slice_that_becomes_empty(key: slice) -> None:
    # One program serves lengths where the slice has elements and lengths where it has none; the
    # gradient (padding the slice's gradient back) has the input's size for both.
    def f(w: torch.Tensor) -> torch.Tensor:
        return w[key] * 2

    jf = thunder.jit(f, cache=SYM)
    for n in (9, 6, 4, 3, 2, 7):
        w = torch.randn(n, requires_grad=True)
        expected, actual = f(w), jf(w)
        torch.testing.assert_close(actual, expected)
        weights = torch.randn(expected.shape)
        (g_e,) = torch.autograd.grad((expected * weights).sum(), w, allow_unused=True)
        (g_a,) = torch.autograd.grad((actual * weights).sum(), w, allow_unused=True)
        torch.testing.assert_close(g_a, g_e)


@pytest.mark.parametrize("rows", [(3, 2, 1, 5), (4, 6)])
def test_gradient_of_a_symbolic_size_one_broadcast(rows: tuple[int, ...]) -> None:
    # w[0::3] has a symbolic length that is 1 when tracing (and on every call the program serves
    # after that, a constraint): multiplying by ``a`` broadcasts it, and its gradient is summed
    # over the rows. The backward raised on a reshape of the whole gradient to (1, n).
    def f(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return a * w[0::3]

    jf = thunder.jit(f, cache=SYM)
    for n, m in zip(rows, (4, 5, 4, 3)):
        a = torch.randn(n, m)
        w = torch.randn(min(n, 3), m, requires_grad=True)
        expected, actual = f(a, w), jf(a, w)
        torch.testing.assert_close(actual, expected)
        weights = torch.randn(expected.shape)
        (g_e,) = torch.autograd.grad((expected * weights).sum(), w)
        (g_a,) = torch.autograd.grad((actual * weights).sum(), w)
        torch.testing.assert_close(g_a, g_e)


def _write_through_overlapping_windows(w: torch.Tensor) -> torch.Tensor:
    c = w * 2 + 1
    c.unfold(0, 2, 1).add_(1.5)  # the windows share elements: eager adds twice to those
    return c * w


def test_write_through_overlapping_windows_is_eager() -> None:
    # Under symbolic sizes the number of windows is not known when compiling: the write is
    # treated as one that may repeat elements (torch.autograd records it as in eager). Before,
    # it was functionalized as if each element were written once: wrong values.
    f = _write_through_overlapping_windows
    jf = thunder.jit(f, cache=SYM)
    for n in (4, 6, 2, 5):
        w = torch.randn(n, requires_grad=True)
        expected, actual = f(w), jf(w)
        torch.testing.assert_close(actual, expected)
        (g_e,) = torch.autograd.grad(expected.sum(), w)
        (g_a,) = torch.autograd.grad(actual.sum(), w)
        torch.testing.assert_close(g_a, g_e)


def test_write_through_a_symbolic_expand_raises_as_eager() -> None:
    def f(w: torch.Tensor) -> torch.Tensor:
        c = w[:1] * 2
        c.expand(w.shape[0]).add_(1.0)
        return c * w

    jf = thunder.jit(f, cache=SYM)
    for n in (4, 6):
        w = torch.randn(n, requires_grad=True)
        with pytest.raises(RuntimeError, match="single memory location"):
            f(w)
        with pytest.raises(RuntimeError, match="single memory location"):
            jf(w)


def test_a_failed_constraint_names_the_conjuncts_that_fail_with_the_values() -> None:
    """The recompile reason says which relation between sizes no longer holds, with the sizes'
    values, not the whole constraint (CANINE's had 24 terms)."""

    def f(x, n):
        return x[: n * 2] + n

    j = thunder.jit(f, cache="symbolic values")
    j(torch.randn(8), 3)
    j(torch.randn(9), 2)  # served by the same program
    assert thunder.compile_stats(j).compilations == 1
    j(torch.randn(8), 5)
    reason = thunder.compile_stats(j).last_recompile_reason
    assert reason is not None
    assert "((2 * n) <= x_size0) does not hold (n = 5, x_size0 = 8)" in reason
    assert "(n >= 0) does not hold" not in reason
