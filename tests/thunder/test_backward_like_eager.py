"""A compiled program's backward raises where eager's does, and otherwise gives eager's gradients.

Thunder runs a differentiated program as one autograd node; eager records one per torch call. The
checks eager's backward makes are made from a model of eager's graph
(``thunder_transforms.autodiff.eager_graph``): a second backward through a node that saved a
tensor, a saved tensor written in place (an output, an input an optimizer step changed), an
inference tensor saved for the backward. Each test runs a scenario on eager and on the compiled
program with the same fresh random inputs, over several calls, and compares what raised (the kind
of error), values and gradients.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import thunder

_KINDS = {
    "twice": "backward through the graph a second time",
    "modified": "modified by an inplace operation",
    "inference": "Inference tensors cannot be saved for backward",
}


def _outcome(scenario: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", what the scenario returned) or (the kind of error it raised, None)."""
    try:
        return "ok", scenario()
    except RuntimeError as e:
        for kind, text in _KINDS.items():
            if text in str(e):
                return kind, None
        raise


def _same_outcome(eager: Callable[[], Any], compiled: Callable[[], Any]) -> str:
    want_kind, want = _outcome(eager)
    got_kind, got = _outcome(compiled)
    assert got_kind == want_kind, (got_kind, want_kind)
    if want_kind == "ok":
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            if w is None:
                assert g is None
            else:
                torch.testing.assert_close(g, w)
    return want_kind


def _leaves(*ts: torch.Tensor) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in ts]


# -- 1. a second backward through the same output -------------------------------------------


def _exp_of_product(x, w):
    return (x * w).exp()


def _times_two(x, w):
    return x * 2 + w.sin()


def _sum_of_inputs(x, w):
    return x + w  # eager's nodes save no tensor: a second backward runs


def _sine(x, w):
    return x.sin() * w


def _second_backward(mode: str, fn: Callable[..., Any], x, w) -> tuple[Any, ...]:
    out = fn(x, w).sum()
    if mode == "backward twice":
        out.backward()
        out.backward()
    elif mode == "retain then backward":
        out.backward(retain_graph=True)
        out.backward()
    elif mode == "grad twice":
        torch.autograd.grad(out, (x, w))
        return torch.autograd.grad(out, (x, w))
    elif mode == "grad retained":
        first = torch.autograd.grad(out, (x, w), retain_graph=True)
        return (*first, *torch.autograd.grad(out, (x, w)))
    return (out, x.grad, w.grad)


@pytest.mark.parametrize("fn", [_exp_of_product, _times_two, _sum_of_inputs, _sine])
@pytest.mark.parametrize(
    "mode", ["backward twice", "retain then backward", "grad twice", "grad retained"]
)
def test_second_backward_like_eager(fn: Callable[..., Any], mode: str) -> None:
    jfn = thunder.jit(fn)
    kinds = set()
    for _ in range(3):
        base = (torch.randn(4, 3, requires_grad=True), torch.randn(3, requires_grad=True))
        kinds.add(
            _same_outcome(
                lambda: _second_backward(mode, fn, *_leaves(*base)),
                lambda: _second_backward(mode, jfn, *_leaves(*base)),
            )
        )
    if mode in ("backward twice", "grad twice"):
        assert kinds == ({"ok"} if fn is _sum_of_inputs else {"twice"})
    else:
        assert kinds == {"ok"}


# -- 2. two outputs of one call, an optimizer step between their backwards -------------------


class _TwoOutputs(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(3))
        self.kind = kind

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.w
        if self.kind == "both save w":  # the step changes what b's graph saved: eager raises
            return x * w, (x * w).exp()
        if self.kind == "b saves its result":  # b's graph saves no parameter
            return x * w, x.exp()
        if self.kind == "b saves the parameter":
            return x.exp(), x * w
        if self.kind == "b reads w, saves its result":  # eager reads what it saved, not w
            return x * w, (x + w).exp()
        if self.kind == "shared node":  # a's backward frees a node b's graph needs
            h = x * w
            return h.sin(), h.cos()
        assert self.kind == "nothing saved"
        return x + w, x * 3


_TWO_OUTPUT_KINDS = [
    "both save w",
    "b saves its result",
    "b saves the parameter",
    "b reads w, saves its result",
    "shared node",
    "nothing saved",
]


def _step_between(m: nn.Module, x: torch.Tensor, step: bool, retain: bool) -> tuple[Any, ...]:
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    a, b = m(x)
    a.sum().backward(retain_graph=retain)
    if step:
        opt.step()
    b.sum().backward()
    return (a, b, x.grad, m.w.grad, m.w.detach().clone())


@pytest.mark.parametrize("kind", _TWO_OUTPUT_KINDS)
@pytest.mark.parametrize("step", [True, False])
@pytest.mark.parametrize("retain", [False, True])
def test_two_outputs_with_a_step_between_like_eager(kind: str, step: bool, retain: bool) -> None:
    eager = _TwoOutputs(kind)
    compiled = _TwoOutputs(kind)
    jm = thunder.jit(compiled)
    for _ in range(3):
        compiled.load_state_dict(eager.state_dict())
        for m in (eager, compiled):
            m.zero_grad(set_to_none=True)
        x = torch.randn(3, requires_grad=True)
        _same_outcome(
            lambda: _step_between(eager, *_leaves(x), step, retain),
            lambda: _step_between(jm, *_leaves(x), step, retain),
        )


def test_two_outputs_each_backward_alone_then_a_second_time() -> None:
    def f(x, y):
        return x.exp().sum(), y.sin().sum()

    jf = thunder.jit(f)

    def scenario(fn, x, y):
        a, b = fn(x, y)
        a.backward()
        b.backward()
        a.backward()  # a's nodes were freed: eager raises

    for _ in range(2):
        base = (torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True))
        kind = _same_outcome(
            lambda: scenario(f, *_leaves(*base)), lambda: scenario(jf, *_leaves(*base))
        )
        assert kind == "twice"


# -- 3. an output written in place before the backward --------------------------------------


def _exp(x, w):
    return x.exp()


def _doubled(x, w):
    return x * 2


def _product(x, w):
    return x * w


def _sigmoid(x, w):
    return torch.sigmoid(x * w)


def _relu(x, w):
    return torch.relu(x + w)


def _written_then_backward(fn: Callable[..., Any], x, w) -> tuple[Any, ...]:
    y = fn(x, w)
    y.mul_(2)
    y.sum().backward()
    return (y, x.grad, w.grad)


@pytest.mark.parametrize(
    "fn, kind",
    [
        (_exp, "modified"),  # eager saved y itself
        (_sigmoid, "modified"),
        (_relu, "modified"),
        (_doubled, "ok"),  # eager saved no tensor y shares memory with
        (_product, "ok"),
    ],
)
def test_output_written_in_place_before_backward_like_eager(fn: Callable[..., Any], kind: str):
    jfn = thunder.jit(fn)
    for _ in range(3):
        base = (torch.randn(5, requires_grad=True), torch.randn(5, requires_grad=True))
        got = _same_outcome(
            lambda: _written_then_backward(fn, *_leaves(*base)),
            lambda: _written_then_backward(jfn, *_leaves(*base)),
        )
        assert got == kind


def test_input_written_after_the_forward_like_eager() -> None:
    # eager's ``x.exp()`` saves its result (a is fine), ``x.sin()`` saves x (b raises)
    def f(x, w):
        return x.exp() * w, x.sin()

    jf = thunder.jit(f)

    def scenario(fn, x, w, which):
        a, b = fn(x, w)
        with torch.no_grad():
            x.add_(1)
        (a if which == "a" else b).sum().backward()
        return (x.grad, w.grad)

    for which, kind in (("a", "ok"), ("b", "modified")):
        base = (torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True))
        got = _same_outcome(
            lambda: scenario(f, *_leaves(*base), which),
            lambda: scenario(jf, *_leaves(*base), which),
        )
        assert got == kind

    def g(x, w):
        return x.exp() * 2, w * 3  # nothing eager saved reads x

    jg = thunder.jit(g)
    for _ in range(2):
        base = (torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True))
        got = _same_outcome(
            lambda: scenario(g, *_leaves(*base), "a"),
            lambda: scenario(jg, *_leaves(*base), "a"),
        )
        assert got == "ok"


# -- 4. the norm that counts nonzeros ------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.linalg.vector_norm(x, 0),
        lambda x: x.norm(0),
        lambda x: torch.linalg.vector_norm(x, 0, dim=1),
        lambda x: torch.linalg.vector_norm(x, 0) + x.sign().sum(),  # sign: zeros, as eager
        lambda x: torch.linalg.vector_norm(x, 0) * x.sum(),
    ],
)
def test_vector_norm_of_order_zero_like_eager(fn: Callable[..., Any]) -> None:
    jfn = thunder.jit(fn)
    for _ in range(3):
        base = torch.randn(3, 4)
        base[0, 1] = 0.0

        def scenario(f):
            (x,) = _leaves(base.requires_grad_())
            y = f(x)
            assert y.requires_grad
            y.sum().backward()
            return (y, x.grad)

        _same_outcome(lambda: scenario(fn), lambda: scenario(jfn))


# -- 5. inference tensors into a program that trains ---------------------------------------


def _inference(shape: tuple[int, ...]) -> torch.Tensor:
    with torch.inference_mode():
        return torch.randn(shape)


def test_inference_input_saved_for_backward_raises_like_eager() -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    jm = thunder.jit(model)
    for _ in range(2):
        x = _inference((5, 3))
        with pytest.raises(RuntimeError, match=_KINDS["inference"]):
            model(x)
        with pytest.raises(RuntimeError, match=_KINDS["inference"]):
            jm(x)
        # without grad mode, or on a copy, it computes as eager
        with torch.no_grad():
            torch.testing.assert_close(jm(x), model(x))
        out = jm(x.clone())
        torch.testing.assert_close(out, model(x.clone()))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, w: (x * w).sum(),  # eager's mul saves x
        lambda x, w: torch.nn.functional.linear(w.unsqueeze(0), x).sum(),
    ],
)
def test_inference_tensor_eager_saves_raises(fn: Callable[..., Any]) -> None:
    jfn = thunder.jit(fn)
    for _ in range(2):
        x = _inference((4, 4))
        base = torch.randn(4, requires_grad=True)
        kind = _same_outcome(lambda: fn(x, *_leaves(base)), lambda: jfn(x, *_leaves(base)))
        assert kind == "inference"


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, w: ((x + 1) * w).sum(),  # eager saves x + 1, a normal tensor
        lambda x, w: (torch.cat([x, w.unsqueeze(0)]) * 2).sum(),  # a cache, then cat
        lambda x, w: (x.exp() + w).sum(),  # exp saves its result
    ],
)
def test_inference_tensor_eager_does_not_save_computes(fn: Callable[..., Any]) -> None:
    jfn = thunder.jit(fn)
    for _ in range(2):
        x = _inference((4, 4))
        base = torch.randn(4, requires_grad=True)

        def scenario(f):
            (w,) = _leaves(base)
            out = f(x, w)
            out.backward()
            return (out, w.grad)

        assert _same_outcome(lambda: scenario(fn), lambda: scenario(jfn)) == "ok"


def test_second_output_with_dropout_after_the_first_freed() -> None:
    # The program cannot run again (it draws random numbers): what b's gradient reads is kept
    # through a's backward, as eager's nodes of b keep theirs.
    def f(x, y):
        return (x * 2).tanh().sum(), torch.nn.functional.dropout(y, 0.5).sin().sum()

    jf = thunder.jit(f)
    for _ in range(3):
        base = (torch.randn(4, requires_grad=True), torch.randn(6, requires_grad=True))
        grads = []
        for retain in (True, False):
            x, y = _leaves(*base)
            torch.manual_seed(7)
            a, b = jf(x, y)
            a.backward(retain_graph=retain)
            b.backward()
            grads.append((x.grad, y.grad))
        for got, want in zip(grads[1], grads[0], strict=True):
            torch.testing.assert_close(got, want)


def test_nothing_is_kept_for_an_output_whose_gradient_reads_nothing() -> None:
    # ``h = x + 1``'s eager node saves nothing, so h's graph survives ``loss.backward()``; the
    # values the loss's gradient read are not kept for it (eager frees its nodes' tensors).
    def f(x, w):
        return (x @ w).tanh().sum(), x + 1

    jf = thunder.jit(f)
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, requires_grad=True)
    loss, h = jf(x, w)
    loss.backward()
    assert not h.grad_fn.kept_saved
    h.sum().backward()  # as eager: runs
    ex, ew = _leaves(x, w)
    eloss, eh = f(ex, ew)
    eloss.backward()
    eh.sum().backward()
    torch.testing.assert_close(x.grad, ex.grad)
    torch.testing.assert_close(w.grad, ew.grad)
