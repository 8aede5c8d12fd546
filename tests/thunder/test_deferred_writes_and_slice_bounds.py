"""Writes into inputs deferred past a decision on data keep eager's grad mode; slices at bounds
read from data compile (no split) with eager's results; reasons name the user's line."""

from __future__ import annotations

import warnings

import pytest
import torch

import thunder

CACHES = ["constant values", "symbolic values"]


def _clip_then_decide(x, w):
    with torch.no_grad():
        w.clamp_(-0.3, 0.3)  # WGAN weight clipping
    if w.sum() > 0:
        return x * w
    return x - w


def _data_clip_then_decide(x, w):
    w.data.clamp_(-0.3, 0.3)
    if w.sum() > 0:
        return x * w
    return (x - w) * 2


def _two_no_grad_writes_then_item(x, w):
    with torch.no_grad():
        w.mul_(0.9)
        w.add_(0.1)
    k = w.detach().abs().max().item()
    return x * w * k


def _writes_through_a_view_then_decide(x, w):
    with torch.no_grad():
        w.mul_(0.9)
        w[:2].add_(0.1)
    if w.sum() > 0:
        return x * w
    return (x - w) * 2


def _two_data_writes_then_decide(x, w):
    w.data.clamp_(-0.3, 0.3)
    w.data.mul_(2)
    if w.sum() > 0:
        return x * w
    return (x - w) * 2


def _mask_after_no_grad_write(x, w):
    with torch.no_grad():
        w.mul_(0.9)
    return x[w > 0] * 2


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn",
    [
        _clip_then_decide,
        _data_clip_then_decide,
        _two_no_grad_writes_then_item,
        _writes_through_a_view_then_decide,
        _two_data_writes_then_decide,
        _mask_after_no_grad_write,
    ],
)
def test_no_grad_write_into_leaf_then_decision(fn, cache):
    jf = thunder.jit(fn, cache=cache)
    for i in range(4):
        x = torch.randn(4, requires_grad=True)
        w0 = torch.randn(4) + (i - 1.5)
        we, wj = (w0.clone().requires_grad_() for _ in range(2))
        xe, xj = (x.detach().clone().requires_grad_() for _ in range(2))
        ve, vj = we._version, wj._version
        oe, oj = fn(xe, we), jf(xj, wj)
        torch.testing.assert_close(oj, oe)
        torch.testing.assert_close(wj, we)
        assert wj.is_leaf and wj.grad_fn is None
        assert wj._version - vj == we._version - ve
        oe.sum().backward()
        oj.sum().backward()
        torch.testing.assert_close(xj.grad, xe.grad)
        torch.testing.assert_close(wj.grad, we.grad)


@pytest.mark.parametrize("cache", CACHES)
def test_no_grad_write_into_parameter_then_decision(cache):
    lin_e = torch.nn.Linear(4, 3)
    lin_j = torch.nn.Linear(4, 3)
    lin_j.load_state_dict(lin_e.state_dict())

    def make(lin):
        def f(x):
            with torch.no_grad():
                for p in lin.parameters():
                    p.clamp_(-0.3, 0.3)
            y = lin(x)
            if y.sum() > 0:
                return y * 2
            return y - 1

        return f

    fe, jf = make(lin_e), thunder.jit(make(lin_j), cache=cache)
    for i in range(4):
        with torch.no_grad():
            for pe, pj in zip(lin_e.parameters(), lin_j.parameters()):
                pe.add_(torch.randn_like(pe))
                pj.copy_(pe)
        x = torch.randn(2, 4) + (i - 1.5)
        oe, oj = fe(x), jf(x)
        torch.testing.assert_close(oj, oe)
        oe.sum().backward()
        oj.sum().backward()
        for pe, pj in zip(lin_e.parameters(), lin_j.parameters()):
            torch.testing.assert_close(pj, pe)
            torch.testing.assert_close(pj.grad, pe.grad)
            assert pj.is_leaf
            pe.grad = pj.grad = None


@pytest.mark.parametrize("cache", CACHES)
def test_no_grad_write_into_non_leaf_keeps_its_history(cache):
    def f(x, base):
        w = base * 2
        with torch.no_grad():
            w.clamp_(-0.5, 0.5)
        if w.sum() > 0:
            return x * w, w
        return x - w, w

    jf = thunder.jit(f, cache=cache)
    for i in range(4):
        b = torch.randn(4) + (i - 1.5)
        x = torch.randn(4)
        be, bj = (b.clone().requires_grad_() for _ in range(2))
        (oe, we), (oj, wj) = f(x, be), jf(x, bj)
        torch.testing.assert_close(oj, oe)
        torch.testing.assert_close(wj, we)
        (oe.sum() + we.sum()).backward()
        (oj.sum() + wj.sum()).backward()
        torch.testing.assert_close(bj.grad, be.grad)


@pytest.mark.parametrize("cache", CACHES)
def test_write_with_grad_into_input_then_decision(cache):
    # Recorded by autograd in eager: the deferred write keeps the gradient of the written values.
    def f(x, w):
        w.mul_(x)
        if w.sum() > 0:
            return w * 2
        return w - 1

    jf = thunder.jit(f, cache=cache)
    for i in range(4):
        x = torch.randn(4, requires_grad=True)
        b = torch.randn(4) + (i - 1.5)
        be, bj = (b.clone().requires_grad_() for _ in range(2))
        xe, xj = (x.detach().clone().requires_grad_() for _ in range(2))
        we, wj = be * 1, bj * 1
        oe, oj = f(xe, we), jf(xj, wj)
        torch.testing.assert_close(oj, oe)
        torch.testing.assert_close(wj, we)
        (oe.sum() + we.sum()).backward()
        (oj.sum() + wj.sum()).backward()
        torch.testing.assert_close(xj.grad, xe.grad)
        torch.testing.assert_close(bj.grad, be.grad)


def test_write_with_grad_into_leaf_then_decision_raises_like_eager():
    jf = thunder.jit(lambda w: w.mul_(2) if w.sum() > 0 else w.add_(1))
    w = torch.randn(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w.detach().clone().requires_grad_().mul_(2)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        jf(w)


def _split_at(x, n):
    k = int(n)
    return x[:k].sum() + x[k:].sum() * 2


def _three_slices(x, n):
    k = int(n)
    return torch.cat([x[:k] * 3, x[k:], x[k : k + 2] - 1])


def _square_bound(x, n):
    k = int(n)
    return x[: k * k].sum() + x[k * k :].sum() * 2


def _halved_bound(x, n):
    k = int(n)
    return x[: k // 2].sum() + x[k // 2 :].sum() * 2


def _cat_of_the_parts(x, n):
    k = int(n)
    return torch.cat([x[:k], x[k:]]) * x


def _modulo_bound(x, n):
    k = int(n)
    return x[: k % 4].sum() + x[k % 4 :].sum() * 2


def _clamped_bound(x, n):
    k = int(n)
    return x[max(k, 1) :].sum() + x[: max(k, 1)].sum() * 2


def _segments(x, cu):
    outs = []
    for i in range(2):
        s, e = int(cu[i]), int(cu[i + 1])
        outs.append(x[s:e].sum(0))
    return torch.stack(outs)


def _pack(x, lengths):
    mask = torch.arange(x.shape[1])[None, :] < lengths[:, None]
    packed = x[mask]
    cu = torch.nn.functional.pad(lengths.cumsum(0), (1, 0))
    outs = []
    for i in range(lengths.shape[0]):
        s, e = int(cu[i]), int(cu[i + 1])
        outs.append(packed[s:e].sum(0))
    return torch.stack(outs)


def _check_like_eager(fn, jf, x, *rest):
    xe, xj = (x.detach().clone().requires_grad_() for _ in range(2))
    oe, oj = fn(xe, *rest), jf(xj, *rest)
    torch.testing.assert_close(oj, oe)
    g = torch.randn_like(oe)
    oe.backward(g)
    oj.backward(g)
    torch.testing.assert_close(xj.grad, xe.grad)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn",
    [
        _split_at,
        _three_slices,
        _square_bound,
        _halved_bound,
        _cat_of_the_parts,
        _modulo_bound,
        _clamped_bound,
    ],
)
def test_slices_at_a_bound_read_from_data_compile(fn, cache):
    jf = thunder.jit(fn, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no split warning
        for k in (1, 3, 0, 6, 2, -2, 9, -8, 5):
            _check_like_eager(fn, jf, torch.randn(6), torch.tensor(k))
    stats = thunder.compile_stats(jf)
    assert not stats.split_calls and not stats.eager_fallbacks, stats


@pytest.mark.parametrize("cache", CACHES)
def test_segments_at_offsets_read_from_data_compile(cache):
    jf = thunder.jit(_segments, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for cu in ([0, 3, 7], [0, 5, 7], [2, 2, 12], [1, 0, 4], [0, 12, 15], [-3, 4, 20]):
            _check_like_eager(_segments, jf, torch.randn(12, 4), torch.tensor(cu))
    stats = thunder.compile_stats(jf)
    assert not stats.split_calls and not stats.eager_fallbacks, stats


@pytest.mark.parametrize("cache", CACHES)
def test_varlen_packing_compiles(cache):
    jf = thunder.jit(_pack, cache=cache)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(4):
            _check_like_eager(_pack, jf, torch.randn(3, 6, 4), torch.randint(0, 7, (3,)))
    stats = thunder.compile_stats(jf)
    assert not stats.split_calls and not stats.eager_fallbacks, stats


def _stepped_by_data(x, n):
    k = int(n)
    return x[::k].sum() + x[k::2].sum()


def test_split_reason_names_the_users_lines():
    # Still split (a stepped slice's gradient relies on the step being 1 or not): the reason
    # names the op and where the value was read, by the user's file:line.
    jf = thunder.jit(_stepped_by_data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in (1, 2, 3):
            _check_like_eager(_stepped_by_data, jf, torch.randn(6), torch.tensor(k))
    reason = thunder.compile_stats(jf).last_split_reason
    if reason is None:  # compiles now: nothing to name
        return
    first = _stepped_by_data.__code__.co_firstlineno
    assert f"getitem at {__file__}:{first + 2}" in reason, reason
    assert f"read at {__file__}:{first + 1}" in reason, reason
    assert any(__file__ in str(w.message) for w in caught)


def _per_class_sums(x, labels):
    return torch.stack([x[labels == c].sum() for c in labels.unique().tolist()])


def _sum_of_list(x, lengths):
    return x * sum(lengths.tolist())


@pytest.mark.parametrize("cache", CACHES)
def test_tolist_of_a_data_dependent_length_compiles(cache):
    jf = thunder.jit(_per_class_sums, cache=cache)
    for top in (3, 4, 3, 2, 4):
        labels = torch.randperm(6) % top
        x = torch.randn(6)
        _check_like_eager(_per_class_sums, jf, x, labels)
    stats = thunder.compile_stats(jf)
    assert not stats.eager_fallbacks and not stats.split_calls, stats


@pytest.mark.parametrize("cache", CACHES)
def test_tolist_of_a_symbolic_length_compiles(cache):
    jf = thunder.jit(_sum_of_list, cache=cache)
    for n in (3, 4, 3, 5):
        _check_like_eager(_sum_of_list, jf, torch.randn(3), torch.randint(0, 5, (n,)))
    stats = thunder.compile_stats(jf)
    assert not stats.eager_fallbacks and not stats.split_calls, stats
