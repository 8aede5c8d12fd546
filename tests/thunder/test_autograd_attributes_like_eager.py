"""Reads of a tensor's autograd and memory attributes inside a jitted program (``is_leaf``,
``_is_view()``, ``_base``, ``grad_fn``, ``grad``, ``_version``, ``requires_grad``) decide as
in eager on every call, where the fact changes back and forth between calls: the facts of
the call's own tensors are guarded values of the prologue (the program compiles, another fact
is another program), and a call run split never reuses a split program made for other facts.
Results and gradients are compared with eager on fresh random inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch._dynamo

import thunder

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*such calls run split:UserWarning"),
    pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor:UserWarning"),
]

CACHES = [{}, {"cache": "symbolic values"}]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# How each call's argument is made from a leaf requiring grad: the leaf itself, a non-leaf,
# a view (non-leaf), a view of a leaf not requiring grad (a leaf), a plain leaf.
MAKERS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "leaf": lambda p: p,
    "computed": lambda p: p * 1.5,
    "view": lambda p: p[:],
    "detached view": lambda p: p.detach()[:],
    "detached": lambda p: p.detach(),
}
ORDER = ["leaf", "computed", "view", "leaf", "detached view", "detached", "computed", "leaf"]
# The first call runs split (a view's base is torch's): the later ones must not reuse it.
VIEW_FIRST = ["view", "computed", "view", "leaf", "detached view", "detached", "detached view"]


def _check_like_eager(fn: Callable[..., Any], jf: Callable[..., Any], order=ORDER) -> None:
    """Each call: a fresh leaf, the argument made from it the same way for both, the results
    and the leaf's gradients equal."""
    for kind in order:
        data = torch.randn(5, dtype=torch.float64)
        pe = data.clone().requires_grad_()
        pj = data.clone().requires_grad_()
        expected = fn(MAKERS[kind](pe))
        actual = jf(MAKERS[kind](pj))
        torch.testing.assert_close(actual, expected, msg=lambda m, k=kind: f"{k}: {m}")
        if expected.requires_grad:
            expected.sum().backward()
            actual.sum().backward()
            torch.testing.assert_close(pj.grad, pe.grad, msg=lambda m, k=kind: f"{k}: {m}")


@pytest.mark.parametrize("options", CACHES)
def test_is_leaf_and_is_view_of_an_argument_compile_and_recompile(options):
    def fn(x):
        if x.is_leaf and not x._is_view():
            return x * 2
        return x * 3

    jf = thunder.jit(fn, **options)
    _check_like_eager(fn, jf)
    assert thunder.compile_stats(jf).split_calls == 0  # guarded, not run split


@pytest.mark.parametrize("options", CACHES)
def test_base_and_grad_fn_none_of_an_argument(options):
    def fn(x):
        y = x.sin()
        if x._base is None:
            y = y + 1
        if x.grad_fn is None:
            y = y * 2
        if x._is_view():
            y = y - 3
        return y

    jf = thunder.jit(fn, **options)
    _check_like_eager(fn, jf)
    _check_like_eager(fn, jf, ORDER[::-1])


@pytest.mark.parametrize("options", CACHES)
def test_truncated_backprop_detaches_a_hidden_state_with_history(options):
    # The idiom of recurrent training loops: ``h.detach() if h.grad_fn is not None else h``.
    def step(h, w):
        if h.grad_fn is not None:
            h = h.detach()
        return torch.tanh(h @ w)

    # A learned initial state: a leaf requiring grad, as the later states are not.
    jf = thunder.jit(step, **options)
    we, h0e = torch.randn(4, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    wj, h0j = we.clone().requires_grad_(), h0e.clone().requires_grad_()
    we.requires_grad_()
    h0e.requires_grad_()
    for fresh in [True, False, False, True, False]:
        if fresh:
            he, hj = h0e, h0j
        he = step(he, we)
        hj = jf(hj, wj)
        torch.testing.assert_close(hj, he)
        he.sum().backward(retain_graph=True)
        hj.sum().backward(retain_graph=True)
        torch.testing.assert_close(wj.grad, we.grad)
        torch.testing.assert_close(h0j.grad, h0e.grad)


class _Scaled(torch.nn.Module):
    """A module whose tensor attribute is sometimes a leaf (a plain tensor), sometimes made
    from a parameter (a tied or reparametrized weight, a non-leaf), and a training utility's
    check of its parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4, dtype=torch.float64)
        self.scale = torch.ones(4, dtype=torch.float64)

    def forward(self, x):
        out = self.lin(x)
        if self.scale.is_leaf:
            out = out * 2
        else:
            out = out * self.scale
        leaves = sum(1 for p in self.parameters() if p.is_leaf and p.grad_fn is None)
        return out + leaves


@pytest.mark.parametrize("options", CACHES)
def test_a_module_checks_is_leaf_of_its_tensors(options):
    eager = _Scaled()
    model = _Scaled()
    model.load_state_dict(eager.state_dict())
    jm = thunder.jit(model, **options)
    for computed in [False, True, True, False, True]:
        x = torch.randn(3, 4, dtype=torch.float64)
        if computed:
            eager.scale = eager.lin.bias * 3
            model.scale = model.lin.bias * 3
        else:  # a leaf requiring grad, as the computed one does
            eager.scale = torch.ones(4, dtype=torch.float64, requires_grad=True)
            model.scale = torch.ones(4, dtype=torch.float64, requires_grad=True)
        expected, actual = eager(x), jm(x)
        torch.testing.assert_close(actual, expected)
        expected.sum().backward()
        actual.sum().backward()
        for (name, pe), pj in zip(eager.named_parameters(), model.parameters()):
            torch.testing.assert_close(pj.grad, pe.grad, msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.parametrize("options", CACHES)
def test_is_leaf_of_tensors_in_nested_containers(options):
    def fn(d):
        out = d["a"][0] * 1
        for t in d["b"]:
            out = out + (t if t.is_leaf else 2 * t)
        return out

    jf = thunder.jit(fn, **options)
    for pattern in [(True, True), (False, True), (True, False), (True, True), (False, False)]:
        data = [torch.randn(3, dtype=torch.float64) for _ in range(3)]
        results = []
        for f in (fn, jf):
            leaves = [t.clone().requires_grad_() for t in data]
            b = [leaves[i + 1] if leaf else leaves[i + 1] * 1 for i, leaf in enumerate(pattern)]
            out = f({"a": (leaves[0],), "b": b})
            out.sum().backward()
            results.append((out, [t.grad for t in leaves]))
        torch.testing.assert_close(results[1], results[0])


# -- what still runs split: a later call with another fact never reuses a stale program -------


@pytest.mark.parametrize("options", CACHES)
def test_grad_is_none_branch_with_grad_set_between_calls(options):
    def fn(x):
        if x.grad is None:
            return x * 2
        return x * x.grad

    jf = thunder.jit(fn, **options)
    data = torch.randn(4, dtype=torch.float64)
    pe, pj = data.clone().requires_grad_(), data.clone().requires_grad_()
    for set_grad in [False, True, False, True, True, False]:
        if set_grad:
            g = torch.randn(4, dtype=torch.float64)
            pe.grad, pj.grad = g.clone(), g.clone()
        else:
            pe.grad = pj.grad = None
        for make in (MAKERS["leaf"], MAKERS["computed"]):
            torch.testing.assert_close(jf(make(pj)), fn(make(pe)))


@pytest.mark.parametrize("options", CACHES)
def test_version_changed_in_place_between_calls(options):
    def fn(x, y):
        if x._version > y._version:
            return x + y
        return x - y

    jf = thunder.jit(fn, **options)
    x, y = torch.randn(4), torch.randn(4)
    for bump in ["x", "y", "y", "x", "x", None]:
        if bump == "x":
            x.add_(0)
        elif bump == "y":
            y.add_(0)
        torch.testing.assert_close(jf(x, y), fn(x, y))


@pytest.mark.parametrize("options", CACHES)
def test_requires_grad_read_inside_no_grad(options):
    def fn(x):
        with torch.no_grad():
            y = x * 2
            flags = (x.requires_grad, y.requires_grad)
        if flags[0]:
            return x * 3 + y, flags
        return x * 4 + y, flags

    jf = thunder.jit(fn, **options)
    for rg in [True, False, True, False]:
        data = torch.randn(3, dtype=torch.float64)
        xe, xj = data.clone().requires_grad_(rg), data.clone().requires_grad_(rg)
        (oe, fe), (oj, fj) = fn(xe), jf(xj)
        assert fj == fe
        torch.testing.assert_close(oj, oe)
        if rg:
            oe.sum().backward()
            oj.sum().backward()
            torch.testing.assert_close(xj.grad, xe.grad)
    with torch.no_grad():
        for rg in [True, False]:
            x = torch.randn(3).requires_grad_(rg)
            assert jf(x)[1] == fn(x)[1]


@pytest.mark.parametrize("options", CACHES)
def test_grad_fn_name_and_base_read_natively(options):
    # What torch answers (a non-leaf's grad_fn, a view's base) runs split; a later call with
    # another leaf or view fact gets its own program, compiled or split.
    def fn(x):
        if x.grad_fn is not None and x.grad_fn.name() == "MulBackward0":
            y = x * 2
        else:
            y = x * 3
        if x._base is not None:
            y = y + x._base.sum()
        return y

    for order in (ORDER, ORDER[::-1], VIEW_FIRST):
        torch._dynamo.reset()
        _check_like_eager(fn, thunder.jit(fn, **options), order)


@pytest.mark.parametrize("options", CACHES)
def test_a_views_base_read_natively_then_other_facts(options):
    def fn(x):
        if x._base is not None:
            return x * x._base.sum()
        return x * 3

    for order in (VIEW_FIRST, ["detached view", "detached", "detached view", "detached"]):
        torch._dynamo.reset()
        jf = thunder.jit(fn, **options)
        _check_like_eager(fn, jf, order)
        assert thunder.compile_stats(jf).split_calls > 0


@pytest.mark.parametrize("options", CACHES)
def test_data_ptr_of_the_same_tensor_twice_or_two_tensors(options):
    def fn(x, y):
        if x.data_ptr() == y.data_ptr():
            return x * 2
        return x + y

    jf = thunder.jit(fn, **options)
    for same in [True, False, True, False]:
        x = torch.randn(3)
        y = x if same else torch.randn(3)
        torch.testing.assert_close(jf(x, y), fn(x, y))


@pytest.mark.parametrize("options", CACHES)
def test_a_program_written_in_place_reads_torchs_is_leaf(options):
    # ``x.add_(w)`` makes a leaf not requiring grad a non-leaf: torch answers afterwards.
    def fn(x, w):
        x.add_(w)
        if x.is_leaf:
            return x * 2
        return x * 3

    jf = thunder.jit(fn, **options)
    for rg in [False, True, False]:
        data, wdata = torch.randn(3), torch.randn(3)
        we, wj = wdata.clone().requires_grad_(rg), wdata.clone().requires_grad_(rg)
        expected = fn(data.clone(), we)
        actual = jf(data.clone(), wj)
        torch.testing.assert_close(actual, expected)
        if rg:
            expected.sum().backward()
            actual.sum().backward()
            torch.testing.assert_close(wj.grad, we.grad)


@pytest.mark.parametrize("options", CACHES)
def test_is_leaf_of_tensors_the_program_computes(options):
    # Decided by the trace where certain (a result requiring no grad is a leaf), else torch's.
    def fn(x, w):
        flags = []
        for y in (x * 2, x.argmax(), (x > 0), x.detach() * 2, torch.ones(3) * x, w * x):
            flags.append((y.is_leaf, y.is_leaf and y.grad_fn is None))
        return x * w, flags

    jf = thunder.jit(fn, **options)
    for rg, no_grad in [(True, False), (False, False), (True, True), (True, False), (False, True)]:
        data = torch.randn(3, dtype=torch.float64)
        w = torch.randn(3, dtype=torch.float64)
        xe, xj = data.clone().requires_grad_(rg), data.clone().requires_grad_(rg)
        with torch.set_grad_enabled(not no_grad):
            (oe, fe), (oj, fj) = fn(xe, w), jf(xj, w)
        assert fj == fe, (rg, no_grad)
        torch.testing.assert_close(oj, oe)
        if oe.requires_grad:
            oe.sum().backward()
            oj.sum().backward()
            torch.testing.assert_close(xj.grad, xe.grad)
    assert thunder.compile_stats(jf).split_calls == 0


class _Based(torch.nn.Module):
    """A module whose tensor attribute is sometimes a view (its base read natively: split)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4, dtype=torch.float64)
        self.extra = torch.ones(4, dtype=torch.float64)

    def forward(self, x):
        out = self.lin(x)
        if self.extra._base is not None:
            return out * self.extra._base.sum()
        return out + self.extra


@pytest.mark.parametrize("options", CACHES)
def test_a_split_module_is_chosen_by_its_tensor_attributes_facts(options):
    eager = _Based()
    model = _Based()
    model.load_state_dict(eager.state_dict())
    jm = thunder.jit(model, **options)
    for view in [True, False, True, False]:
        x = torch.randn(3, 4, dtype=torch.float64)
        extra = torch.randn(2, 4, dtype=torch.float64)
        eager.extra = extra[0] if view else extra[0].clone()
        model.extra = extra[0] if view else extra[0].clone()
        expected, actual = eager(x), jm(x)
        torch.testing.assert_close(actual, expected)
        expected.sum().backward()
        actual.sum().backward()
        for (name, pe), pj in zip(eager.named_parameters(), model.parameters()):
            torch.testing.assert_close(pj.grad, pe.grad, msg=lambda m, n=name: f"{n}: {m}")
