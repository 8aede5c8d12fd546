"""End to end: in-place writes through views under thunder.jit do exactly what eager PyTorch does.

Every program is run eagerly and through ``thunder.jit`` on copies of the same input, for inputs
of one logical shape in several memory layouts (contiguous, transposed, stepped slices, a storage
offset, custom as_strided strides, expanded): one jitted function serves them all, so the cached
program must be right for any strides. After each call the outputs (values, shapes, strides,
whether they share the input's memory), the whole storage the input was cut from, and the input's
own strides must be eager's; when eager raises, thunder raises the same exception type.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import thunder
from thunder_executors import get_available_executors

# Writes through reshape results are compared with eager here: the mode that mimics it (the
# default refuses them, tests/thunder/test_reshape_inplace.py).
_jit = functools.partial(thunder.jit, reshape_inplace="warn")
_AVAILABLE = {e.name for e in get_available_executors()}
EXECUTORS: list[Any] = [None, ("torch",)]
if "torchcompile" in _AVAILABLE:
    EXECUTORS.append(("torchcompile", "torch"))
EXECUTOR_IDS = ["default" if e is None else "+".join(e) for e in EXECUTORS]

SHAPE = (4, 6)
LAYOUTS = [
    "contiguous",
    "transposed",
    "stepped",
    "offset",
    "transposed_stepped",
    "as_strided",
    "expanded",
]


def make_input(layout: str, seed: int, shape: tuple[int, int] = SHAPE, dtype: Any = None):
    """(base, a): ``a`` of ``shape`` cut from ``base`` with the layout's strides and offset."""
    dtype = dtype or torch.float32
    g = torch.Generator().manual_seed(seed)
    n, m = shape

    def vals(k: int) -> torch.Tensor:
        return torch.randn(k, generator=g, dtype=dtype)

    if layout == "contiguous":
        base = vals(n * m).reshape(n, m)
        return base, base
    if layout == "transposed":
        base = vals(n * m).reshape(m, n)
        return base, base.t()
    if layout == "stepped":
        base = vals(n * 2 * m).reshape(n, 2 * m)
        return base, base[:, ::2]
    if layout == "offset":
        base = vals(n * m + 5)
        return base, base[5:].view(n, m)
    if layout == "transposed_stepped":
        base = vals(2 * m * n).reshape(2 * m, n)
        return base, base[::2].t()
    if layout == "as_strided":
        base = vals((n - 1) * (m + 3) + m + 2)
        return base, base.as_strided((n, m), (m + 3, 1), 2)
    if layout == "expanded":
        base = vals(m).reshape(1, m)
        return base, base.expand(n, m)
    raise ValueError(layout)


def _call(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args)
    except Exception as e:  # noqa: BLE001 - the exception is the observed result
        return "raise", e


def _tensors(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def assert_same_as_eager(
    fn: Callable[..., Any],
    jf: Callable[..., Any],
    layout: str,
    seed: int,
    *,
    exact: bool = True,
    make: Callable[[str, int], tuple[torch.Tensor, torch.Tensor]] = make_input,
) -> None:
    base_e, a_e = make(layout, seed)
    base_j, a_j = make(layout, seed)
    kind_e, out_e = _call(fn, a_e)
    kind_j, out_j = _call(jf, a_j)
    where = f"layout {layout}"
    if kind_e == "raise":
        assert kind_j == "raise", f"{where}: eager raised {out_e!r}, thunder returned"
        assert type(out_j) is type(out_e), f"{where}: eager {out_e!r}, thunder {out_j!r}"
    else:
        assert kind_j == "ok", f"{where}: thunder raised {out_j!r}"
        tol = {"rtol": 0, "atol": 0} if exact else {}
        outs_e, outs_j = _tensors(out_e), _tensors(out_j)
        assert len(outs_e) == len(outs_j)
        ptr_e, ptr_j = base_e.untyped_storage().data_ptr(), base_j.untyped_storage().data_ptr()
        for i, (e, j) in enumerate(zip(outs_e, outs_j)):
            msg = f"{where}: output {i}"
            torch.testing.assert_close(j, e, **tol, msg=lambda m, msg=msg: f"{msg}: {m}")
            shares_e = e.untyped_storage().data_ptr() == ptr_e
            shares_j = j.untyped_storage().data_ptr() == ptr_j
            assert shares_e == shares_j, f"{msg}: shares the input's memory: eager {shares_e}"
            if shares_e:
                assert (e.stride(), e.storage_offset()) == (j.stride(), j.storage_offset()), msg
            assert (e is a_e) == (j is a_j), f"{msg}: is the input itself: eager {e is a_e}"
    torch.testing.assert_close(base_j, base_e, rtol=0, atol=0, msg=lambda m: f"{where}: base: {m}")
    assert (a_j.shape, a_j.stride(), a_j.storage_offset()) == (
        a_e.shape,
        a_e.stride(),
        a_e.storage_offset(),
    ), f"{where}: the input's layout changed"


def jit(fn: Callable[..., Any], executors: Any) -> Callable[..., Any]:
    return _jit(fn) if executors is None else _jit(fn, executors=executors)


# -- writes through each view op ---------------------------------------------------------------

VIEWS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "diagonal": lambda a: a.diagonal(),
    "diagonal_offset": lambda a: a.diagonal(-1),
    "slice": lambda a: a[1:, ::2],
    "basic_index": lambda a: a[None, 2, ..., 1:5],
    "select": lambda a: a.select(1, 2),
    "narrow": lambda a: a.narrow(0, 1, 2),
    "transpose": lambda a: a.transpose(0, 1),
    "permute": lambda a: a.permute(1, 0),
    "t": lambda a: a.t(),
    "T": lambda a: a.T,
    "mT": lambda a: a.mT,
    "expand": lambda a: a[:1].expand(3, 6),
    "as_strided": lambda a: a.as_strided((2, 3), (3, 1), 1),
    "unfold": lambda a: a.unfold(1, 2, 2),
    "view": lambda a: a.view(2, 12),
    "view_as": lambda a: a.view_as(a.t()),
    "unsqueeze": lambda a: a.unsqueeze(1),
    "squeeze": lambda a: a.unsqueeze(0).squeeze(0),
    "movedim": lambda a: a.movedim(0, 1),
    "split": lambda a: a.split(2, dim=1)[1],
    "chunk": lambda a: a.chunk(2, dim=0)[1],
    "unbind": lambda a: a.unbind(1)[3],
    "reshape": lambda a: a.reshape(2, 12),
    "flatten": lambda a: a.flatten(),
    "reshape_as": lambda a: a.reshape_as(a.t()),
    "contiguous": lambda a: a.contiguous(),
    "detach": lambda a: a.detach(),
    "chain_t_slice_diagonal": lambda a: a.t()[1:].diagonal(),
    "chain_unsqueeze_transpose_index": lambda a: a.unsqueeze(0).transpose(1, 2)[0, ::2, 1:],
    "chain_reshape_permute_select": lambda a: (
        a.reshape(4, 2, 3).permute(2, 0, 1).select(0, 1).narrow(0, 1, 2)
    ),
    "chain_split_t_unbind": lambda a: a.split([1, 3])[1].t().unbind(0)[2],
}


@pytest.mark.parametrize("executors", EXECUTORS, ids=EXECUTOR_IDS)
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_write_through_view_updates_the_base(view: str, executors: Any) -> None:
    make_view = VIEWS[view]

    def f(a):
        v = make_view(a)
        v.add_(1.5)
        v.mul_(2)
        return a, v, a * 2  # the base after the write, the view, a read of the base after it

    jf = jit(f, executors)
    for seed, layout in enumerate(LAYOUTS):
        assert_same_as_eager(f, jf, layout, seed)


@pytest.mark.parametrize("executors", EXECUTORS, ids=EXECUTOR_IDS)
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_view_made_before_a_write_of_the_base_sees_it(view: str, executors: Any) -> None:
    make_view = VIEWS[view]

    def f(a):
        v = make_view(a)
        a.mul_(-1)
        a[0] = 3.0
        return v * 1, v

    jf = jit(f, executors)
    for seed, layout in enumerate(LAYOUTS):
        assert_same_as_eager(f, jf, layout, seed)


@pytest.mark.parametrize("executors", EXECUTORS, ids=EXECUTOR_IDS)
def test_two_writes_through_overlapping_views(executors: Any) -> None:
    def f(a):
        rows = a[1:3]
        cols = a[:, 1:4]
        diag = a.diagonal()
        rows.add_(1)
        cols.mul_(2)
        diag.copy_(rows[:, 0].sum() * torch.ones(4))
        return a, rows, cols, diag, rows + cols[1:3, :1]

    jf = jit(f, executors)
    for seed, layout in enumerate(LAYOUTS):
        assert_same_as_eager(f, jf, layout, seed)


@pytest.mark.parametrize("executors", EXECUTORS, ids=EXECUTOR_IDS)
def test_writes_seen_through_views_made_earlier(executors: Any) -> None:
    def f(a):
        u = a.t()
        flat = a.reshape(-1)  # a view or a copy, by the strides of a
        d = a.diagonal()
        d.fill_(0.0)
        a[:, -1:] += 1
        return u.sum(0), u, flat, d

    jf = jit(f, executors)
    for seed, layout in enumerate(LAYOUTS):
        assert_same_as_eager(f, jf, layout, seed, exact=executors != ("torchcompile", "torch"))


@pytest.mark.parametrize("executors", EXECUTORS, ids=EXECUTOR_IDS)
def test_write_through_views_of_an_intermediate(executors: Any) -> None:
    def f(a):
        h = a * 2 + 1
        v = h.t()[::2]
        v.sub_(3)
        h.diagonal().zero_()
        return h, v, h.sum()

    jf = jit(f, executors)
    for seed, layout in enumerate(LAYOUTS):
        assert_same_as_eager(f, jf, layout, seed, exact=executors != ("torchcompile", "torch"))


@pytest.mark.parametrize("executors", EXECUTORS, ids=EXECUTOR_IDS)
@pytest.mark.parametrize("part", ["real", "imag"])
def test_write_through_real_and_imag(part: str, executors: Any) -> None:
    def f(a):
        v = getattr(a, part)
        v.mul_(3)
        return a, v

    def make(layout: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        return make_input(layout, seed, dtype=torch.complex64)

    jf = jit(f, executors)
    for seed, layout in enumerate(LAYOUTS):
        assert_same_as_eager(f, jf, layout, seed, make=make)


# -- the issue's examples, verbatim ------------------------------------------------------------


def test_issue_example_diagonal_add() -> None:
    def f3(y):
        v = y.diagonal(); v.add_(2); return y  # fmt: skip  # noqa: E702

    a = torch.randn(3, 3).t(); b = a.clone().t().contiguous().t()  # fmt: skip  # noqa: E702
    _jit(f3)(a); f3(b); assert torch.equal(a, b)  # fmt: skip  # noqa: E702


def test_issue_example_div_then_sliced_diagonal() -> None:
    def f3b(y):
        y.div_(0.25); v = y.diagonal(); v[-2:] += 0.001; return y  # fmt: skip  # noqa: E702

    a = torch.randn(3, 3).t(); b = a.clone().t().contiguous().t()  # fmt: skip  # noqa: E702
    out = _jit(f3b)(a)
    assert out is a
    f3b(b)
    assert torch.equal(a, b)


# -- random view chains and writes -------------------------------------------------------------


def _view_steps(shape: tuple[int, ...]) -> list[str]:
    """View expressions valid for a tensor ``x`` of ``shape``."""
    nd = len(shape)
    steps = ["x.unsqueeze(0)", "x.detach()"]
    if nd >= 1:
        n = shape[0]
        steps += [f"x[{n // 2}:]", "x[::2]", f"x.narrow(0, 0, {max(n - 1, 1)})", "x.select(0, -1)"]
        steps += [f"x.unfold(0, 1, {max(n // 2, 1)})", "x.flatten()", "x.movedim(0, -1)"]
        steps += [f"x.split({max(n // 2, 1)})[0]", "x.unbind(0)[0]"]
    if nd >= 2:
        steps += ["x.t()" if nd == 2 else "x.transpose(0, 1)", "x.diagonal()", "x[:, 1:]"]
        steps += [
            f"x.reshape({shape[0] * shape[1]}, -1)",
            "x.mT",
            "x.permute(1, 0, *range(2, x.ndim))",
        ]
    if nd >= 1 and shape[0] == 1:
        steps.append("x.squeeze(0)")
    return steps


WRITES = [
    "v.add_(1.25)",
    "v.mul_(-2)",
    "v.fill_(0.5)",
    "v.zero_()",
    "v.copy_(v * 3 - 1)",
    "v[...] = 7.0",
    "v.clamp_(min=0.0)",
    "v += a.sum()",
]


@st.composite
def programs(draw: Any) -> tuple[str, str]:
    x = torch.empty(SHAPE)
    lines = []
    for i in range(draw(st.integers(1, 3))):
        steps = [s for s in _view_steps(tuple(x.shape))]
        step = draw(st.sampled_from(steps))
        try:
            x = eval(step, {"x": x})
        except Exception:  # noqa: BLE001 - not valid for this shape: stop the chain here
            break
        lines.append(f"x = {step}")
        if x.numel() == 0:
            break
    lines.append("v = x")
    lines.append(draw(st.sampled_from(WRITES)))
    ret = draw(st.sampled_from(["a, v", "a", "v * 1, a.sum()"]))
    body = "\n".join(f"    {line}" for line in ["x = a", *lines])
    source = f"def f(a):\n{body}\n    return {ret}\n"
    return source, draw(st.sampled_from(LAYOUTS))


@settings(max_examples=60, deadline=None)
@given(programs())
def test_random_view_chains_and_writes(program: tuple[str, str]) -> None:
    source, layout = program
    ns: dict[str, Any] = {"torch": torch}
    exec(compile(source, "<random view chain>", "exec"), ns)
    f = ns["f"]
    jf = _jit(f)
    try:
        for seed, lay in enumerate((layout, "contiguous", "transposed")):
            assert_same_as_eager(f, jf, lay, seed)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{source}") from None


# -- gradients -----------------------------------------------------------------------------------


def _grads(fn: Callable[..., Any], *inputs: torch.Tensor) -> tuple[Any, list[torch.Tensor]]:
    out = fn(*inputs)
    loss = sum(o.sum() for o in _tensors(out))
    return out, list(torch.autograd.grad(loss, inputs, allow_unused=True))


@pytest.mark.parametrize("executors", [None, ("torch",)], ids=["default", "torch"])
@pytest.mark.parametrize(
    "program",
    ["diagonal_add", "diagonal_mul_used", "view_before_write", "slice_copy", "two_views"],
)
def test_gradients_through_writes_into_views_of_intermediates(program: str, executors: Any) -> None:
    def diagonal_add(x, y):
        h = x * 1
        h.diagonal().add_(2)
        return h.sum()

    def diagonal_mul_used(x, y):
        h = x * 1
        h.diagonal().mul_(y[0])
        return (h * h).sum()

    def view_before_write(x, y):
        h = x * 2
        v = h.t()
        h.add_(y)
        return (v * v).sum()

    def slice_copy(x, y):
        h = x * 3 + 1
        h[1:, ::2].copy_(y[:2, :2] * 3)
        return h * x

    def two_views(x, y):
        h = x.t() * y
        d = h.diagonal()
        r = h[1]
        d.mul_(2)
        r.sub_(d.sum())
        return h, d, r

    fn = locals()[program]
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    y = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    if program in ("view_before_write", "two_views", "diagonal_add", "diagonal_mul_used"):
        x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        y = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    out_e, grads_e = _grads(fn, x, y)
    out_j, grads_j = _grads(jit(fn, executors), x, y)
    for e, j in zip(_tensors(out_e), _tensors(out_j)):
        torch.testing.assert_close(j, e)
    for e, j in zip(grads_e, grads_j):
        assert (e is None) == (j is None)
        if e is not None:
            torch.testing.assert_close(j, e)


def test_gradients_when_a_non_leaf_input_is_written_through_a_view() -> None:
    def f(x):
        x[1:].mul_(3)
        x.diagonal().add_(1)
        return x.sum()

    w = torch.randn(4, 4, requires_grad=True)
    x_e, x_j = w * 1, w * 1
    out_e, out_j = f(x_e), _jit(f)(x_j)
    torch.testing.assert_close(out_j, out_e)
    torch.testing.assert_close(x_j, x_e)
    # The caller's later use of the written input takes the gradient through the write.
    (g_e,) = torch.autograd.grad(out_e + (x_e * x_e).sum(), w)
    (g_j,) = torch.autograd.grad(out_j + (x_j * x_j).sum(), w)
    torch.testing.assert_close(g_j, g_e)


def test_write_from_a_tensor_requiring_grad_makes_the_destination_require_grad() -> None:
    def f(x, buf):
        buf[:2].copy_(x * 2)
        return x.sum()

    w = torch.randn(2, requires_grad=True)
    buf_e, buf_j = torch.zeros(3), torch.zeros(3)
    out_e, out_j = f(w, buf_e), _jit(f)(w, buf_j)
    assert buf_j.requires_grad == buf_e.requires_grad
    torch.testing.assert_close(buf_j, buf_e)
    (g_e,) = torch.autograd.grad(out_e + (buf_e**2).sum(), w)
    (g_j,) = torch.autograd.grad(out_j + (buf_j**2).sum(), w)
    torch.testing.assert_close(g_j, g_e)


@pytest.mark.parametrize(
    "write",
    [lambda x: x.add_(1), lambda x: x.diagonal().add_(1), lambda x: x[1:].t().zero_()],
    ids=["itself", "diagonal", "slice_t"],
)
def test_writing_into_a_leaf_that_requires_grad_raises_like_eager(write: Any) -> None:
    def f(x):
        write(x)
        return x.sum()

    x = torch.randn(3, 3, requires_grad=True)
    with pytest.raises(RuntimeError) as eager:
        f(x)
    before = x.detach().clone()
    with pytest.raises(RuntimeError) as jitted:
        _jit(f)(x)
    assert str(jitted.value) == str(eager.value)
    assert torch.equal(x.detach(), before)


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_gradient_through_a_write_into_a_reshape_is_eagers(layout: str) -> None:
    # The reshape is a view of h or a copy, by the strides h has: torch.autograd records the
    # program's torch calls, as in eager, whichever it is.
    def f(x):
        h = x * 1
        h.reshape(-1)[::2].add_(1)
        return (h * h).sum()

    w = torch.randn(3, 3, requires_grad=True)
    x = w if layout == "contiguous" else w.t()
    out_e, out_j = f(x), _jit(f)(x)
    torch.testing.assert_close(out_j, out_e)
    (g_e,) = torch.autograd.grad(out_e, w)
    (g_j,) = torch.autograd.grad(out_j, w)
    torch.testing.assert_close(g_j, g_e)


def test_eager_errors_of_autograd_are_kept() -> None:
    # exp saves its result for the backward; writing into it makes eager's backward raise.
    def f(w):
        c = w.exp()
        c.add_(1.5)
        return c

    w = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        f(w).sum().backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _jit(f)(w).sum().backward()


# -- what stays free to decompose and fuse -------------------------------------------------------


def test_views_nobody_writes_still_decompose_and_fuse() -> None:
    from thunder_executors import transform_for_execution
    from thunder_ir import ops as ltorch
    from thunder_ir import trace_function

    def f(a):
        h = ltorch.mul(a, 2)
        return ltorch.add(ltorch.diagonal(ltorch.transpose(h, 0, 1)), 1)

    trace = trace_function(f, torch.randn(4, 4))
    printed = transform_for_execution(trace, ("torch",)).python()
    assert "torch.Tensor." not in printed  # decomposed into prims
    if "torchcompile" in _AVAILABLE:
        ex = transform_for_execution(trace, ("torchcompile", "torch"))
        assert len(ex.fusion_regions) == 1
        assert "torch.Tensor." not in ex.python()


def test_views_of_a_written_tensor_run_as_torch_views() -> None:
    def f(y):
        v = y.diagonal()
        v.add_(2)
        return y

    jf = _jit(f)
    jf(torch.randn(3, 3))
    printed = str(thunder.last_traces(jf)[-1])
    assert "torch.Tensor.diagonal(y)" in printed
    assert "torch.Tensor.add_(" in printed


@pytest.mark.parametrize("read_between", [True, False])
def test_reads_torch_autograd_sees_are_kept_when_it_records(read_between: bool) -> None:
    # A view of a base that does not require grad, written from a value that does: torch rebuilds
    # the view's history when the view is next read, and an in-place op on it before any read
    # raises (torch 2.13). Whether eager raises thus depends on a read whose result is unused.
    def f(a, w):
        a[0] = w.sum()
        if read_between:
            _unused = a * 2
        a.mul_(2)
        return a

    outcomes = []
    for fn in (f, _jit(f)):
        w = torch.ones(3, requires_grad=True)
        a = torch.arange(9.0).reshape(3, 3)  # a view of the arange
        try:
            outcomes.append(("ok", fn(a, w).detach()))
        except RuntimeError as e:
            outcomes.append(("raise", str(e)))
    assert outcomes[0][0] == outcomes[1][0]
    if outcomes[0][0] == "ok":
        torch.testing.assert_close(outcomes[1][1], outcomes[0][1])
    else:
        assert outcomes[0][1] == outcomes[1][1]


@pytest.mark.parametrize("program", ["read_before_write", "read_between_writes", "view_read"])
def test_backward_uses_the_values_read_before_later_writes(program: str) -> None:
    # The writes go into tensors that do not require grad, so thunder's autodiff runs; the
    # backward needs a value read from them (a + b) as it was when read, not recomputed later.
    def read_before_write(a, b, w):
        t = (a + b) * w
        a.add_(b)
        return t

    def read_between_writes(a, b, w):
        a.add_(1)
        t = (a + b) * w
        a.mul_(2)
        return t

    def view_read(a, b, w):
        t = (a.t()[0] + b[0]) * w[0]
        a[0].zero_()
        return t

    fn = locals()[program]
    results = []
    for f in (fn, _jit(fn)):
        a, b = torch.arange(9.0).reshape(3, 3), torch.ones(3, 3)
        w = torch.linspace(-1, 1, 9).reshape(3, 3).requires_grad_()
        out = f(a, b, w)
        (g,) = torch.autograd.grad(out.sum(), w)
        results.append((out.detach(), g, a))
    for e, j in zip(*results):
        torch.testing.assert_close(j, e, rtol=0, atol=0)


def test_in_place_activations_and_residuals_keep_thunders_autodiff() -> None:
    # Writes into intermediates that eager's autograd has not saved are functionalized: thunder
    # differentiates the program (its own backward trace, rematerialization, fusion).
    def f(x, w1, w2):
        h = x @ w1
        h += x
        torch.nn.functional.relu(h, inplace=True)
        out = h @ w2
        out[:, 0].mul_(2)
        return out.sum()

    x = torch.randn(4, 3)
    w1, w2 = torch.randn(3, 3, requires_grad=True), torch.randn(3, 2, requires_grad=True)
    jf = _jit(f)
    out_j, out_e = jf(x, w1, w2), f(x, w1, w2)
    torch.testing.assert_close(out_j, out_e)
    for g_j, g_e in zip(torch.autograd.grad(out_j, (w1, w2)), torch.autograd.grad(out_e, (w1, w2))):
        torch.testing.assert_close(g_j, g_e)
    backward = str(thunder.last_backward_traces(jf)[-1])
    assert "torch.autograd records" not in backward and "torch.mm(" in backward


def test_in_place_op_reading_its_destination_through_a_view_matches_eager() -> None:
    # a.add_(a[:, :1]) reads rows it has already written: what it computes depends on the order
    # torch writes in, so the differentiated program runs it as eager does.
    def f(a, w):
        c = w.sum(0)
        a.add_(a[:, 0::3])
        return a, c * 2

    results = []
    for fn in (f, _jit(f)):
        a = (torch.arange(24.0) * 0.25 - 1.0).reshape(2, 3, 4)
        w = torch.linspace(-1, 1, 24).reshape(2, 3, 4).requires_grad_()
        out, c = fn(a, w)
        (g,) = torch.autograd.grad(c.sum(), w)
        results.append((out, g, a))
    for e, j in zip(*results):
        torch.testing.assert_close(j, e, rtol=0, atol=0)


@pytest.mark.parametrize("op", ["fill", "zero", "add"])
def test_writes_into_an_expanded_input_beside_a_differentiated_write(op: str) -> None:
    # The write into `a` (no gradient) stays the op itself while `c` (gradient) is
    # functionalized: fill_ and zero_ may write an expanded tensor, add_ may not, as in eager.
    def f(a, w):
        c = w.sum(0)
        if op == "fill":
            a.fill_(1.5)
        elif op == "zero":
            a.zero_()
        else:
            a.add_(1.0)
        c.add_(1.5)
        return a, c * 2

    outcomes = []
    for fn in (f, _jit(f)):
        base = torch.full((1,), 0.25)
        a = base.expand(6)
        w = torch.linspace(-1, 1, 6).requires_grad_()
        try:
            out, c = fn(a, w)
        except RuntimeError as e:
            outcomes.append(("raised", str(e), base.tolist()))
            continue
        (g,) = torch.autograd.grad(c.sum(), w)
        outcomes.append((out.tolist(), g.tolist(), base.tolist()))
    assert outcomes[0] == outcomes[1]


def _write_of_a_written_value(a: torch.Tensor, w: torch.Tensor) -> Any:
    c = a * 2 + 1
    c.add_(w)  # c carries w's gradient from here on
    a.add_(c)  # and carries it into a
    return a


def _read_after_a_written_value(a: torch.Tensor, w: torch.Tensor) -> Any:
    c = a * 2 + 1
    c.add_(w)
    a.add_(1.5)
    first = a[0]
    a.add_(c)
    return a * 3, first


def _write_through_a_view(a: torch.Tensor, w: torch.Tensor) -> Any:
    c = a.clone()
    c[1:].mul_(w[1:])
    a[:2].add_(c[:2])
    return a.sum(0, keepdim=True), c


@pytest.mark.parametrize(
    "f", [_write_of_a_written_value, _read_after_a_written_value, _write_through_a_view]
)
def test_gradient_written_into_a_value_flows_on_from_it(f: Callable[..., Any]) -> None:
    # A value written with one that carries a gradient carries it too: into the next write,
    # and to every later read (before, thunder lost w's gradient and returned tensors that did
    # not require grad).
    results = []
    for fn in (f, _jit(f)):
        a = torch.linspace(-1, 2, 4)
        w = torch.linspace(0.5, 1.5, 4).requires_grad_()
        out = fn(a, w)
        outs = out if isinstance(out, tuple) else (out,)
        loss = sum((o * torch.arange(1.0, o.numel() + 1).view(o.shape)).sum() for o in outs)
        (g,) = torch.autograd.grad(loss + a.sum(), w)
        results.append(([o.tolist() for o in outs], [o.requires_grad for o in outs], g, a))
    (e_out, e_req, e_g, e_a), (j_out, j_req, j_g, j_a) = results
    assert j_out == e_out and j_req == e_req and e_req[0]
    torch.testing.assert_close(j_g, e_g)
    torch.testing.assert_close(j_a, e_a)


def _returns_a_view_of_a_returned_intermediate(w: torch.Tensor) -> Any:
    c = w.sum(1)
    d = c.unsqueeze(0).expand(2, *c.shape).diagonal(0, 0, 1)
    return c, d, c.narrow(0, 1, 2).t() if c.ndim > 1 else c[1:]


def test_differentiated_view_of_a_returned_intermediate_is_a_view() -> None:
    # A view sharing memory with an output stays torch's view when the program is
    # differentiated: eager's strides, and memory shared with the output (before, a copy).
    f = _returns_a_view_of_a_returned_intermediate
    w = torch.randn(3, 4, requires_grad=True)
    expected, actual = f(w), _jit(f)(w)
    for e, a in zip(expected, actual):
        assert a.stride() == e.stride() and a.storage_offset() == e.storage_offset()
        torch.testing.assert_close(a, e)
    assert actual[1].untyped_storage().data_ptr() == actual[0].untyped_storage().data_ptr()
    weights = [torch.randn(e.shape) for e in expected]
    (g_e,) = torch.autograd.grad(sum((e * k).sum() for e, k in zip(expected, weights)), w)
    (g_a,) = torch.autograd.grad(sum((a * k).sum() for a, k in zip(actual, weights)), w)
    torch.testing.assert_close(g_a, g_e)
