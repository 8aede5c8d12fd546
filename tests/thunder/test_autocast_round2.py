"""Autocast as eager applies it, where thunder runs torch's own callables and where eager's autocast
caches conversions:

- a torch callable no op mirrors (a fallback), called inside a CPU autocast region, runs under
  the same ``torch.autocast``: eager's autocast casts the aten ops inside it (``F.bilinear``,
  ``affine_grid``, ``nn.RNN``/``GRU``, ``tensordot``), and converts the inputs of the ops
  on torch's float32 list (``torch.fft``, ``linalg``, ``quantile``, ``view_as_complex``,
  reflection padding), in the forward and in the backward's re-run;
- CPU autocast's promote ops (``cat``, ``stack``, ``index_copy``);
- autocast's weight cache: a leaf requiring grad (a parameter) used twice in one autocast region
  with ``cache_enabled`` is converted once, so its gradients are summed in bfloat16 as eager's.

Each compares with eager on fresh random inputs over several calls: output dtypes and values,
and gradients; no call runs eagerly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

BF16 = torch.bfloat16


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (tuple, list)):
        return [y for z in x for y in _flat(z)]
    return [x]


def _copies(args: Sequence[Any]) -> list[Any]:
    return [
        a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
        for a in args
    ]


def _matches_eager(
    fn: Callable[..., Any],
    make: Callable[[int], Sequence[Any]],
    *,
    params: Sequence[torch.Tensor] = (),
    calls: int = 3,
    jf: Any = None,
) -> Any:
    """``fn`` jitted against eager on ``calls`` fresh argument lists: outputs (dtype and values)
    and the gradients of the arguments and ``params`` that require grad equal; no call ran
    eagerly."""
    jf = jf if jf is not None else thunder.jit(fn)
    for i in range(calls):
        args = make(i)
        ours, theirs = _copies(args), _copies(args)
        got, want = _flat(jf(*ours)), _flat(fn(*theirs))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if isinstance(w, torch.Tensor):
                assert g.dtype == w.dtype
                torch.testing.assert_close(g, w, equal_nan=True)
            else:
                assert g == w
        outs = [
            (g, w) for g, w in zip(got, want) if isinstance(w, torch.Tensor) and w.requires_grad
        ]
        assert all(g.requires_grad for g, _ in outs)
        wrt_ours = [a for a in ours if isinstance(a, torch.Tensor) and a.requires_grad]
        wrt_theirs = [a for a in theirs if isinstance(a, torch.Tensor) and a.requires_grad]
        if not outs or not (wrt_ours or params):
            continue
        cots = [torch.randn_like(w) for _, w in outs]
        got_grads = torch.autograd.grad(
            [g for g, _ in outs], [*wrt_ours, *params], cots, allow_unused=True
        )
        want_grads = torch.autograd.grad(
            [w for _, w in outs], [*wrt_theirs, *params], cots, allow_unused=True
        )
        for g, w in zip(got_grads, want_grads):
            assert (g is None) == (w is None)
            if w is not None:
                assert g.dtype == w.dtype
                torch.testing.assert_close(g, w)
    assert thunder.compile_stats(jf).eager_fallbacks == 0
    return jf


def _under_autocast(op: Callable[..., Any], cache: bool = True) -> Callable[..., Any]:
    def fn(*args: Any) -> Any:
        with torch.autocast("cpu", dtype=BF16, cache_enabled=cache):
            return op(*args)

    return fn


def _randn(*shape: int, grad: bool = True, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).requires_grad_(grad)


# -- composite torch callables: autocast casts the ops inside them ---------------------------------

COMPOSITES: dict[str, tuple[Callable[..., Any], Callable[[int], Sequence[Any]]]] = {
    "affine_grid": (
        lambda theta: F.affine_grid(theta, (2, 1, 4, 5), align_corners=False),
        lambda i: (_randn(2, 2, 3, seed=i),),
    ),
    "bilinear": (
        F.bilinear,
        lambda i: (
            _randn(3, 4, seed=i),
            _randn(3, 5, seed=i + 10),
            _randn(6, 4, 5, seed=i + 20),
            _randn(6, seed=i + 30),
        ),
    ),
    "tensordot": (
        lambda a, b: torch.tensordot(a, b, dims=1),
        lambda i: (_randn(3, 4, seed=i), _randn(4, 5, seed=i + 10)),
    ),
    "gru_cell": (
        lambda x, h, wi, wh: torch._VF.gru_cell(x, h, wi, wh),
        lambda i: (
            _randn(2, 3, seed=i),
            _randn(2, 4, seed=i + 10),
            _randn(12, 3, seed=i + 20),
            _randn(12, 4, seed=i + 30),
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite_torch_callable_computes_in_eager_dtypes_under_autocast(name):
    op, make = COMPOSITES[name]
    _matches_eager(_under_autocast(op), make)


@pytest.mark.parametrize("kind", ["RNN", "GRU"])  # (LSTM: oneDNN refuses bf16 on some CPUs)
def test_recurrent_module_under_autocast_matches_eager_with_parameter_gradients(kind):
    torch.manual_seed(0)
    module = getattr(torch.nn, kind)(4, 5, num_layers=2)

    def fn(x):
        with torch.autocast("cpu", dtype=BF16):
            return module(x)[0]

    # Its weights are leaves: eager's cache converts each once for all time steps, and so does
    # the backward's re-run (their gradients summed in bfloat16 before converted back).
    _matches_eager(fn, lambda i: (_randn(6, 3, 4, seed=i),), params=list(module.parameters()))


def test_recurrent_module_called_under_ambient_autocast():
    torch.manual_seed(0)
    module = torch.nn.GRU(4, 5)
    jm = thunder.jit(module)
    for i in range(3):
        x = _randn(6, 3, 4, seed=i, grad=False)
        with torch.autocast("cpu", dtype=BF16):
            got, want = jm(x)[0], module(x)[0]
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want)
    assert thunder.compile_stats(jm).eager_fallbacks == 0


# -- torch's CPU float32 list: inputs converted before the callable (and its fake run) ------------


def _spd(i: int) -> torch.Tensor:
    a = _randn(3, 3, seed=i, grad=False)
    return (a @ a.T + 3 * torch.eye(3)).requires_grad_()


FP32_LIST: dict[str, tuple[Callable[..., Any], Callable[[int], Sequence[Any]]]] = {
    # (complex outputs: without gradients, which thunder's autodiff does not take through them)
    "fft.rfft": (lambda x: torch.fft.rfft(x.to(BF16)), lambda i: (_randn(8, seed=i, grad=False),)),
    "fft.fftn": (
        lambda x: torch.fft.fftn(x.to(BF16)),
        lambda i: (_randn(3, 4, seed=i, grad=False),),
    ),
    "linalg.inv": (lambda a: torch.linalg.inv(a.to(BF16)), lambda i: (_spd(i),)),
    "pinverse": (lambda a: torch.pinverse(a.to(BF16)), lambda i: (_spd(i),)),
    "linalg.matrix_rank": (lambda a: torch.linalg.matrix_rank(a.to(BF16)), lambda i: (_spd(i),)),
    "linalg.lstsq": (
        lambda a, b: torch.linalg.lstsq(a.to(BF16), b.to(BF16)).solution,
        lambda i: (_spd(i), _randn(3, 2, seed=i + 10)),
    ),
    "quantile": (lambda x: torch.quantile(x.to(BF16), 0.3), lambda i: (_randn(8, seed=i),)),
    "view_as_complex": (
        lambda x: torch.view_as_complex(x.to(BF16)),
        lambda i: (_randn(4, 2, seed=i, grad=False),),
    ),
    "geqrf": (lambda a: torch.geqrf(a.detach().to(BF16))[1], lambda i: (_spd(i),)),
    "reflection_pad": (
        lambda x: F.pad(x.to(BF16), (2, 1), mode="reflect"),
        lambda i: (_randn(2, 3, 5, seed=i),),
    ),
}


@pytest.mark.parametrize("name", sorted(FP32_LIST))
def test_callable_on_the_cpu_float32_list_takes_bfloat16_under_autocast(name):
    op, make = FP32_LIST[name]
    _matches_eager(_under_autocast(op), make)


# -- CPU promote ops -------------------------------------------------------------------------------


def test_index_copy_promotes_to_float32_under_cpu_autocast():
    def op(a, src):  # without autocast, index_copy refuses the mixed dtypes
        return a.to(BF16).index_copy(0, torch.tensor([2, 0]), src)

    _matches_eager(_under_autocast(op), lambda i: (_randn(4, 3, seed=i), _randn(2, 3, seed=i + 1)))


@pytest.mark.parametrize("op", [torch.cat, torch.stack])
def test_cat_and_stack_promote_under_cpu_autocast(op):
    _matches_eager(
        _under_autocast(lambda a, b: op([a.to(BF16), b], 0)),
        lambda i: (_randn(2, 3, seed=i), _randn(2, 3, seed=i + 1)),
    )


def test_cat_of_float16_and_bfloat16_refused_as_in_eager():
    fn = _under_autocast(lambda a, b: torch.cat([a.to(torch.float16), b.to(BF16)]))
    a, b = torch.randn(2), torch.randn(2)
    with pytest.raises(RuntimeError) as eager:
        fn(a, b)
    with pytest.raises(RuntimeError) as ours:
        thunder.jit(fn)(a, b)
    assert str(eager.value) in str(ours.value)


# -- autocast's weight cache -----------------------------------------------------------------------


@pytest.mark.parametrize("cache", [True, False])
def test_weight_used_twice_is_converted_as_eager_converts_it(cache):
    # With the cache, eager converts w once: its two gradient contributions are summed in
    # bfloat16 before the conversion back (per use they would differ by a bfloat16 ulp).
    fn = _under_autocast(lambda x, w: (x @ w) @ w, cache)
    _matches_eager(fn, lambda i: (_randn(8, 8, seed=i, grad=False), _randn(8, 8, seed=i + 1)))


def test_weight_cache_holds_parameters_of_modules():
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)

    def fn(x):
        with torch.autocast("cpu", dtype=BF16):
            return lin(lin(x).relu())

    _matches_eager(fn, lambda i: (_randn(4, 8, seed=i),), params=list(lin.parameters()))


def test_weight_cache_does_not_hold_tensors_computed_in_the_program():
    def fn(x, p):
        w = p * 2  # not a leaf: eager converts it at each use
        with torch.autocast("cpu", dtype=BF16):
            return (x @ w) @ w

    _matches_eager(fn, lambda i: (_randn(8, 8, seed=i, grad=False), _randn(8, 8, seed=i + 1)))


def test_weight_cache_does_not_hold_inputs_that_are_not_leaves():
    def fn(x, w):
        with torch.autocast("cpu", dtype=BF16):
            return (x @ w) @ w

    jf = thunder.jit(fn)
    for i in range(3):
        x, p = _randn(8, 8, seed=i, grad=False), _randn(8, 8, seed=i + 1)
        cot = torch.randn(8, 8)
        ours, theirs = p.detach().clone().requires_grad_(), p.detach().clone().requires_grad_()
        got = jf(x, ours * 1)  # w is not a leaf
        want = fn(x, theirs * 1)
        torch.testing.assert_close(got, want)
        (g,) = torch.autograd.grad(got, ours, cot)
        (w,) = torch.autograd.grad(want, theirs, cot)
        torch.testing.assert_close(g, w)


def test_weight_cache_lives_for_one_outermost_region():
    # Leaving the outermost block empties eager's cache: the second block converts w again;
    # a nested block shares its enclosing block's cache.
    def fn(x, w):
        with torch.autocast("cpu", dtype=BF16):
            y = x @ w
            with torch.autocast("cpu", dtype=BF16):
                y = y @ w
        with torch.autocast("cpu", dtype=BF16):
            return (y @ w) @ w

    _matches_eager(fn, lambda i: (_randn(8, 8, seed=i, grad=False), _randn(8, 8, seed=i + 1)))


def test_weight_cache_off_in_a_nested_block():
    def fn(x, w):
        with torch.autocast("cpu", dtype=BF16):
            y = x @ w
            with torch.autocast("cpu", dtype=BF16, cache_enabled=False):
                y = (y @ w) @ w
            return y @ w

    _matches_eager(fn, lambda i: (_randn(8, 8, seed=i, grad=False), _randn(8, 8, seed=i + 1)))


def test_weight_shared_by_a_fallback_and_a_listed_op():
    # tensordot's mm converts a view of w (eager's cache holds no views), the matmul w itself:
    # two conversions, as in eager.
    def fn(x, w):
        with torch.autocast("cpu", dtype=BF16):
            return torch.tensordot(x, w, dims=1) @ w

    _matches_eager(fn, lambda i: (_randn(8, 8, seed=i, grad=False), _randn(8, 8, seed=i + 1)))


@pytest.mark.parametrize("op", [torch.hstack, torch.vstack, torch.column_stack])
def test_stacking_composites_promote_under_cpu_autocast(op):
    # torch's are cat, as the IR's decompositions are: promote applies inside them.
    _matches_eager(
        _under_autocast(lambda a, b: op([a.to(BF16), b])),
        lambda i: (_randn(2, 3, seed=i), _randn(2, 3, seed=i + 1)),
    )
    fn = _under_autocast(lambda a, b: op([a.to(torch.float16), b.to(BF16)]))
    a, b = torch.randn(2), torch.randn(2)
    with pytest.raises(RuntimeError) as eager:
        fn(a, b)
    with pytest.raises(RuntimeError) as ours:
        thunder.jit(fn)(a, b)
    assert str(eager.value) in str(ours.value)


def test_weight_shared_by_a_callable_that_only_converts_it_and_a_listed_op():
    # addbmm (a fallback) converts w itself, the cached conversion eager's matmul reuses: one
    # conversion, whose gradient sums both uses in bfloat16.
    def fn(b1, b2, w):
        with torch.autocast("cpu", dtype=BF16):
            return torch.addbmm(w, b1, b2) @ w

    _matches_eager(
        fn,
        lambda i: (
            _randn(3, 8, 8, seed=i, grad=False),
            _randn(3, 8, 8, seed=i + 1, grad=False),
            _randn(8, 8, seed=i + 2),
        ),
    )


def test_fallback_in_a_checkpointed_region_and_in_a_block_that_turns_autocast_off():
    from torch.utils.checkpoint import checkpoint

    def region(a, b, w):
        return F.bilinear(a, b, w).sin() @ w[0]

    def fn(a, b, w):
        with torch.autocast("cpu", dtype=BF16):
            with torch.autocast("cpu", enabled=False):
                off = F.bilinear(a, b, w)  # float32, as without autocast
            return checkpoint(region, a, b, w, use_reentrant=False).float() + off @ w[0]

    _matches_eager(
        fn, lambda i: (_randn(3, 4, seed=i), _randn(3, 4, seed=i + 1), _randn(4, 4, 4, seed=i + 2))
    )


@pytest.mark.parametrize("cache", [True, False])
def test_weight_cache_of_the_autocast_the_call_is_made_under(cache):
    def fn(x, w):
        return (x @ w) @ w

    jf = thunder.jit(fn)
    for i in range(3):
        x, w = _randn(8, 8, seed=i, grad=False), _randn(8, 8, seed=i + 1)
        ours, theirs = w.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        with torch.autocast("cpu", dtype=BF16, cache_enabled=cache):
            got, want = jf(x, ours), fn(x, theirs)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want)
        cot = torch.randn(8, 8).to(BF16)
        torch.testing.assert_close(
            torch.autograd.grad(got, ours, cot)[0], torch.autograd.grad(want, theirs, cot)[0]
        )
    assert thunder.compile_stats(jf).eager_fallbacks == 0
