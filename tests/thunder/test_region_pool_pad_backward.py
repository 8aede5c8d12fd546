"""Pooling with indices next to padding, compiled by inductor: eager's values and gradients.

A max pool's backward scatters its cotangent into a zero buffer (``scatter_add``), which inductor
lowers as an in-place write. Its CPU scheduler, fusing a reader of that buffer with a node of
other loop ranges (a reflection pad's backward), lost the write's ordering (pytorch#185509): the
gradient read the zeros, off on every call (max_pool2d(return_indices) + reflect pad +
adaptive_max_pool2d of one input). Thunder backports torch's fix before it compiles a region.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import thunder
from thunder_executors.background_compile import wait_for_background_compiles
from thunder_executors.torchcompile import torchcompile_executor

pytestmark = pytest.mark.skipif(
    not torchcompile_executor.availability()[0], reason="torch.compile is unavailable"
)


def _leaves(out: object) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out] if out.is_floating_point() else []
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _leaves(o)]
    return []


def _matches_eager(
    fn: Callable[..., object],
    jfn: Callable[..., object],
    make_x: Callable[[int], torch.Tensor],
    calls: int = 3,
) -> None:
    for i in range(calls):
        torch.manual_seed(i)
        x = make_x(i)
        xe = x.detach().clone().requires_grad_()
        xt = x.detach().clone().requires_grad_()
        expected, actual = fn(xe), jfn(xt)
        torch.testing.assert_close(actual, expected, msg=lambda m: f"call {i}: {m}")
        outs_e, outs_t = _leaves(expected), _leaves(actual)
        cotangents = [torch.randn_like(o) for o in outs_e]
        (ge,) = torch.autograd.grad(outs_e, xe, cotangents)
        (gt,) = torch.autograd.grad(outs_t, xt, cotangents)
        torch.testing.assert_close(gt, ge, msg=lambda m: f"call {i}, gradient: {m}")


def _reported(x):
    return (
        F.max_pool2d(x * 2, 2, return_indices=True),
        F.pad(x.tanh(), (1, 2, 2, 1), mode="reflect"),
        F.adaptive_max_pool2d(x + 1, 3),
    )


def _without_indices_replicate(x):
    return F.max_pool2d(x * 2, 2), F.pad(x.sin(), (1, 2, 2, 1), mode="replicate"), x.exp()


def _avg_reflect(x):
    return F.adaptive_avg_pool2d(x * 3, 2), F.pad(x.tanh(), (2, 1, 1, 2), mode="reflect")


def _pools_1d(x):
    x = x.flatten(2)
    return (
        F.max_pool1d(x * 2, 3, return_indices=True),
        F.pad(x.tanh(), (2, 3), mode="reflect"),
        F.adaptive_max_pool1d(x + 1, 4),
    )


def _pools_3d(x):
    x = x.unsqueeze(2).expand(-1, -1, 2, -1, -1) * 1.5
    return (
        F.max_pool3d(x * 2, (1, 2, 2), return_indices=True),
        F.pad(x.tanh(), (1, 2, 2, 1, 1, 0), mode="circular"),
        F.adaptive_max_pool3d(x + 1, (1, 3, 3)),
    )


def _gather_reflect(x):
    index = torch.arange(9).remainder(7).expand(6, 9)
    return torch.gather(x.reshape(6, 42), 1, index).sin(), F.pad(x.tanh(), (1, 2, 2, 1), "reflect")


def _unfold_reflect(x):
    # unfold's backward (col2im, a torch call thunder differentiates through torch) becomes an
    # index_put in inductor: the same in-place write.
    return F.unfold(x, 2).exp(), F.pad(x.tanh(), (1, 2, 2, 1), mode="reflect")


def _contiguous(i: int) -> torch.Tensor:
    return torch.randn(2, 3, 7, 6)


def _channels_last(i: int) -> torch.Tensor:
    return torch.randn(2, 3, 7, 6).contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize(
    "fn, make_x",
    [
        (_reported, _contiguous),
        (_reported, _channels_last),
        (_without_indices_replicate, _contiguous),
        (_avg_reflect, _channels_last),
        (_pools_1d, _contiguous),
        (_pools_3d, _contiguous),
        (_gather_reflect, _contiguous),
        (_unfold_reflect, _contiguous),
    ],
    ids=[
        "reported",
        "reported channels_last",
        "max_pool2d replicate",
        "adaptive_avg reflect channels_last",
        "1d",
        "3d circular",
        "gather reflect",
        "unfold reflect",
    ],
)
def test_torchcompile_regions_give_eager_gradients(fn, make_x):
    _matches_eager(fn, thunder.jit(fn, executors=["torchcompile"]), make_x)


def _max_pool_reflect(x):
    return F.max_pool2d(x * 2, 2, return_indices=True), F.pad(x.tanh(), (1, 2, 2, 1), "reflect")


@pytest.mark.parametrize("fn", [_max_pool_reflect, _reported])
def test_symbolic_sizes_give_eager_gradients(fn):
    # With adaptive_max_pool2d (a torch fallback) next to the max pool's decomposition, a
    # region of symbolic sizes gave an output of another size, then other values: fallbacks on
    # tensors of symbolic sizes stay out of regions.
    jfn = thunder.jit(fn, executors=["torchcompile"], cache="symbolic values")
    _matches_eager(fn, jfn, lambda i: torch.randn(2, 3, 7 + 2 * i, 6))


def test_compile_after_its_background_compiles():
    jfn = thunder.compile(_reported)
    _matches_eager(_reported, jfn, _contiguous, calls=2)  # queues the regions' compiles
    assert wait_for_background_compiles(timeout=300)
    # The compiled regions run now (and, while measured, alternate with their torch calls).
    _matches_eager(_reported, jfn, _contiguous, calls=4)


def test_plain_inductor_keeps_a_scatter_before_its_reader():
    """The torch behaviour itself, on aten ops (pytorch#185509): fixed once thunder compiled a
    region (its fix is torch's, for every inductor compile of the process)."""
    thunder.jit(lambda x: x.sin() * 2, executors=["torchcompile"])(torch.randn(3))
    aten = torch.ops.aten

    def f(x, grad, index, src):
        padded_grad = aten.reflection_pad2d_backward(grad, x, [1, 2, 2, 1])
        scattered = aten.scatter_add(aten.full([2, 42], 0.0), 1, index, src).view(1, 2, 7, 6)
        return padded_grad + scattered

    args = (torch.randn(1, 2, 7, 6), torch.randn(1, 2, 10, 9), torch.randint(0, 42, (2, 9)))
    args = (*args, torch.randn(2, 9))
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(*args), f(*args))
