"""A program returning a view of an input (or of its base, or of another output) that the caller
or the program later writes in place, with arguments that overlap, share a base or are one
tensor: the view is eager's (a view autograd knows, made again from the caller's tensor), so the
values, ``requires_grad`` and gradients match eager's after the write, and eager's own error is
raised where eager raises (a view taken under no_grad, a saved tensor overwritten)."""

from __future__ import annotations

import pytest
import torch

import thunder


def view_and_product(a, b, w):
    t1 = (a + b) * w
    t2 = a[0]
    return t1, t2


def view_of_a_written_input(a, b, w):
    t2 = a[1:]
    a.mul_(2)
    return t2, (a + b).sum() * w


def transposed_view(a, b, w):
    return a.t()[0], (a * b).sum() * w


def detached_view(a, b, w):
    return a.detach()[1:], (a * b).sum() * w


def view_of_a_detached_output(a, b, w):
    y = a.detach()
    return y, y[1:], (a * b).sum() * w


def view_under_no_grad(a, b, w):
    with torch.no_grad():
        v = a[1:]
    return v, (a * b).sum() * w


def view_of_an_output(a, b, w):
    y = a * 2
    return y, y[1:], b.sum() * w


def written_through_out_and_views(a, b, w):
    # (the program of the fuzz test's failure: ``out=`` runs split, by torch, between two graphs)
    t1 = (a + b) * w
    t2 = a[0]
    torch.mul(b, 2, out=a)
    a.clamp_(max=1.0)
    b.mul_(w)
    b[0] = w.sum()
    return t1, t2


N = 3


def _base(shape, leaf_requires_grad):
    base = torch.randn(shape, requires_grad=leaf_requires_grad)
    return (base, base * 1) if leaf_requires_grad else (None, base)


# Argument pairs: (leaf to differentiate too or None, the tensor the caller writes, a, b).
def overlapping(two_d):
    leaf, B = _base((N + 1, 2 * N) if two_d else (2 * N + 2,), False)
    return leaf, B, *((B[:N, :N], B[1:, :N]) if two_d else (B[:N], B[1 : N + 1]))


def disjoint(two_d):
    leaf, B = _base((N + 1, 2 * N) if two_d else (2 * N + 2,), False)
    return leaf, B, *((B[:N, :N], B[:N, N:]) if two_d else (B[:N], B[N : 2 * N]))


def strided(two_d):  # transposed, or stepped
    leaf, B = _base((N + 1, 2 * N) if two_d else (2 * N + 2,), False)
    return leaf, B, *((B[:N, :N], B[:N, :N].t()) if two_d else (B[:N], B[1 : 2 * N : 2]))


def one_tensor_twice(two_d):
    leaf, x = _base((N, N) if two_d else (N,), False)
    return leaf, x, x, x


def equal_views(two_d):
    leaf, B = _base((N + 1, 2 * N) if two_d else (2 * N + 2,), False)
    return leaf, B, *((B[:N, :N], B[:N, :N]) if two_d else (B[:N], B[:N]))


def base_and_view(two_d):
    leaf, B = _base((N, N) if two_d else (N,), False)
    return leaf, B, B, B[:]


def distinct(two_d):
    shape = (N, N) if two_d else (N,)
    return None, torch.randn(shape), torch.randn(shape), torch.randn(shape)


def overlapping_nonleaf(two_d):
    leaf, B = _base((N + 1, 2 * N) if two_d else (2 * N + 2,), True)
    return leaf, B, *((B[:N, :N], B[1:, :N]) if two_d else (B[:N], B[1 : N + 1]))


def distinct_nonleaf(two_d):
    shape = (N, N) if two_d else (N,)
    leaf, a = _base(shape, True)
    return leaf, a, a, torch.randn(shape)


PATTERNS = [
    overlapping,
    disjoint,
    strided,
    one_tensor_twice,
    equal_views,
    base_and_view,
    distinct,
    overlapping_nonleaf,
    distinct_nonleaf,
]


def nothing(outs, view, written, w):
    pass


def write_the_base(outs, view, written, w):
    written.mul_(w.sum())


def write_the_view(outs, view, written, w):
    outs[view].mul_(w.sum())


def write_another_output(outs, view, written, w):
    outs[1 - view].mul_(w.sum())


AFTER = [nothing, write_the_base, write_the_view, write_another_output]


def _run(fn, view, pattern, two_d, after, seed):
    torch.manual_seed(seed)
    leaf, written, a, b = pattern(two_d)
    w = torch.randn(1 if two_d else N, requires_grad=True)
    try:
        outs = fn(a, b, w)
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        after(outs, view, written, w)
        got = [(o.detach().clone(), o.requires_grad, o._is_view()) for o in outs]
        loss = [o.sum() for o in outs if o.requires_grad]
        wrt = [w] if leaf is None else [w, leaf]
        grads = torch.autograd.grad(sum(loss), wrt, allow_unused=True) if loss else None
        return "ok", got, written.detach().clone(), grads
    except Exception as e:
        return "raise", type(e)


def _assert_same(eager, jitted, where):
    assert eager[0] == jitted[0], f"{where}: eager {eager}, thunder {jitted}"
    if eager[0] == "raise":
        assert eager[1] is jitted[1], f"{where}: eager raised {eager[1]}, thunder {jitted[1]}"
        return
    _, e_outs, e_written, e_grads = eager
    _, j_outs, j_written, j_grads = jitted
    assert len(e_outs) == len(j_outs), where
    for k, ((ev, er, eview), (jv, jr, jview)) in enumerate(zip(e_outs, j_outs)):
        torch.testing.assert_close(jv, ev, msg=f"{where}: output {k}")
        assert jr == er, f"{where}: output {k} requires_grad {jr}, eager's {er}"
        assert jview == eview, f"{where}: output {k} is a view: {jview}, eager's: {eview}"
    torch.testing.assert_close(j_written, e_written, msg=f"{where}: the written tensor")
    assert (e_grads is None) == (j_grads is None), where
    for eg, jg in zip(e_grads or (), j_grads or ()):
        assert (eg is None) == (jg is None), where
        if eg is not None:
            torch.testing.assert_close(jg, eg, msg=f"{where}: gradient")


# Each program and the index of the view it returns.
PROGRAMS = {
    view_and_product: 1,
    view_of_a_written_input: 0,
    transposed_view: 0,
    detached_view: 0,
    view_of_a_detached_output: 1,
    view_under_no_grad: 0,
    view_of_an_output: 1,
    written_through_out_and_views: 1,
}


# A view taken under no_grad of inputs that require grad (of ones that do not, the trace does
# not tell it from any other view).
CASES = [
    (program, pattern)
    for program in PROGRAMS
    for pattern in PATTERNS
    if program is not view_under_no_grad or pattern in (overlapping_nonleaf, distinct_nonleaf)
]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(
    "program, pattern", CASES, ids=lambda p: p.__name__ if callable(p) else str(p)
)
def test_returned_views_match_eager_after_writes(program, pattern):
    two_d = program is transposed_view
    jf = thunder.jit(program)
    for seed in range(2):
        for after in AFTER:
            where = f"call {seed}, then {after.__name__}"
            eager = _run(program, PROGRAMS[program], pattern, two_d, after, seed)
            jitted = _run(jf, PROGRAMS[program], pattern, two_d, after, seed)
            _assert_same(eager, jitted, where)


@pytest.mark.filterwarnings("ignore")
def test_the_fuzz_failure_after_other_alias_patterns():
    """The fuzz test's failing calls: earlier aliasing patterns, then three overlapping views of
    one base, the view ``a[0]`` returned, the base written through another argument."""

    def f(a, b, c, w):
        t1 = (a + b) * w
        t2 = a[0]
        torch.mul(c, 2, out=a)
        a.clamp_(max=1.0)
        t3 = (a + c) * w  # noqa: F841
        b.mul_(w)
        b[0] = w.sum()
        return t1, t2

    def args(kind, seed):
        torch.manual_seed(seed)
        B = torch.randn(8)
        t = [torch.randn(N) for _ in range(3)]
        w = torch.randn(N, requires_grad=True)
        if kind == "distinct":
            return B, (t[0], t[1], t[2], w)
        if kind == "one view":
            return B, (t[0], B[1:4], t[2], w)
        if kind == "same":
            return B, (t[0], t[0], t[0], w)
        return B, (B[:3], B[1:4], B[1:6:2], w)

    jf = thunder.jit(f)
    for seed, kind in enumerate(["one view", "distinct", "same", "overlapping", "overlapping"]):
        results = []
        for fn in (f, jf):
            B, (a, b, c, w) = args(kind, seed)
            t1, t2 = fn(a, b, c, w)
            loss = sum(o.sum() for o in (t1, t2) if o.requires_grad)
            (g,) = torch.autograd.grad(loss, w)
            results.append((t1.detach(), t2.detach(), t2.requires_grad, B.detach().clone(), g))
        for k, (e, j) in enumerate(zip(*results)):
            if isinstance(e, torch.Tensor):
                torch.testing.assert_close(j, e, msg=f"call {seed} ({kind}): value {k}")
            else:
                assert j == e, f"call {seed} ({kind}): value {k}"
