"""Results whose shape depends on tensor data (``nonzero``, one-argument ``where``, boolean-mask
indexing, ``masked_select``, ``argwhere``): compiled with the number of selected elements as a
symbolic size, one program for every count, equal to eager on fresh data, gradients included."""

from __future__ import annotations

import warnings

import pytest
import torch

import thunder

CACHES = ["constant values", "symbolic values"]


def _matches_eager(fn, calls, cache="constant values", grad=False):
    jf = thunder.jit(fn, cache=cache)
    for args in calls:
        ours = [a.detach().clone().requires_grad_(grad and a.is_floating_point()) for a in args]
        theirs = [a.detach().clone().requires_grad_(grad and a.is_floating_point()) for a in args]
        got, want = jf(*ours), fn(*theirs)
        torch.testing.assert_close(got, want)
        if grad:
            (got * torch.arange(got.numel()).reshape(got.shape)).sum().backward()
            (want * torch.arange(want.numel()).reshape(want.shape)).sum().backward()
            for a, b in zip(ours, theirs):
                if a.requires_grad:
                    torch.testing.assert_close(a.grad, b.grad)
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0, stats.last_eager_reason
    assert stats.compilations == 1  # one program, whatever the counts
    return jf


def _calls(*shape, n=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(*shape, generator=g),) for _ in range(n)]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    ("name", "fn", "shape"),
    [
        ("mask", lambda x: x[x > 0] * 2, (7,)),
        ("mask of rows", lambda x: x[x.sum(1) > 0].exp(), (6, 3)),
        ("mask after a slice", lambda x: x[:, x[0] > 0] + 1, (3, 8)),
        ("two-dim mask", lambda x: x[x > 0.3].sin(), (4, 5)),
        ("where", lambda x: x[torch.where(x > 0)] * x[torch.where(x > 0)], (4, 3)),
        ("masked_select", lambda x: torch.masked_select(x, x > 0.5).cumsum(0), (4, 3)),
        ("masked_select method", lambda x: x.masked_select(x < 0) ** 2, (5,)),
    ],
)
def test_selection_forward_and_gradients(cache, name, fn, shape):
    _matches_eager(fn, _calls(*shape), cache, grad=True)


def test_indices_of_nonzero_elements():
    def f(x):
        rows, cols = torch.nonzero(x > 0, as_tuple=True)
        return torch.nonzero(x > 0), x.nonzero(), torch.argwhere(x < 0), rows * 10 + cols

    g = torch.Generator().manual_seed(1)
    jf = thunder.jit(f)
    for _ in range(4):
        x = torch.randn(4, 3, generator=g)
        for a, b in zip(jf(x), f(x)):
            torch.testing.assert_close(a, b)
    assert thunder.compile_stats(jf).compilations == 1


def test_indices_of_a_zero_dim_tensor():
    for f in (lambda x: torch.nonzero(x, as_tuple=True), lambda x: torch.where(x > 1)):
        jf = thunder.jit(f)
        for v in (5.0, 0.0):
            got, want = jf(torch.tensor(v)), f(torch.tensor(v))
            assert len(got) == len(want)
            for a, b in zip(got, want):
                torch.testing.assert_close(a, b)
        assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_none_selected_and_all_selected():
    fn = lambda x: (x[x > 0] + 1).sum(0, keepdim=True)  # noqa: E731
    _matches_eager(fn, [(-torch.ones(5),), (torch.ones(5),), (torch.randn(5),)])


def test_mask_shape_mismatch_is_eagers_index_error():
    jf = thunder.jit(lambda x, m: x[m])
    with pytest.raises(IndexError, match="does not match the shape of the indexed tensor"):
        jf(torch.randn(4, 3), torch.ones(3, dtype=torch.bool))


class _TopTwoExperts(torch.nn.Module):
    """Mixture-of-experts routing as model libraries write it: each expert takes the tokens
    routed to it (``torch.where`` on the top-2 choices) and adds its weighted output back."""

    def __init__(self, d=16, experts=8):
        super().__init__()
        self.gate = torch.nn.Linear(d, experts, bias=False)
        self.experts = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(d, 32), torch.nn.GELU(), torch.nn.Linear(32, d))
            for _ in range(experts)
        )

    def forward(self, x):
        probs = self.gate(x).softmax(-1)
        weights, chosen = probs.topk(2, -1)
        y = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            token_idx, slot = torch.where(chosen == e)
            y[token_idx] += weights[token_idx, slot, None] * expert(x[token_idx])
        return y


def _steps_match_eager(jm, model, calls: int, shape: tuple[int, int], seed: int) -> None:
    """Training steps of ``jm`` and ``model`` on the same fresh inputs: outputs and the
    gradients of the inputs and of every parameter equal; no call ran eagerly."""
    g = torch.Generator().manual_seed(seed)
    params = list(model.parameters())
    for _ in range(calls):
        x = torch.randn(*shape, generator=g)
        ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
        got, want = jm(ours), model(theirs)
        torch.testing.assert_close(got, want)
        got_grads = torch.autograd.grad(got.square().sum(), [ours, *params])
        want_grads = torch.autograd.grad(want.square().sum(), [theirs, *params])
        for a, b in zip(got_grads, want_grads):
            torch.testing.assert_close(a, b)
    assert thunder.compile_stats(jm).eager_fallbacks == 0


def test_mixture_of_experts_training_step_one_program_for_all_routings():
    torch.manual_seed(0)
    model = _TopTwoExperts()
    jm = thunder.jit(model)
    _steps_match_eager(jm, model, calls=4, shape=(12, 16), seed=2)
    assert thunder.compile_stats(jm).compilations == 1


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    ("name", "fn", "shape"),
    [
        ("repeat_interleave", lambda x: torch.repeat_interleave(x, (x > 0).long() + 1).sin(), (6,)),
        ("rows repeated", lambda x: x.repeat_interleave((x[:, 0] > 0).long() * 2, dim=0), (5, 3)),
        (
            "selected then repeated",
            lambda x: torch.repeat_interleave(x[x > 0], (x[x > 0] > 1).long() + 1).cumsum(0),
            (8,),
        ),
    ],
)
def test_gradients_through_torch_callables_whose_shape_depends_on_data(cache, name, fn, shape):
    # No op mirrors them: the backward re-runs torch's callable (``torch_fallback_vjp``).
    jf = _matches_eager(fn, _calls(*shape, seed=4), cache, grad=True)
    assert "torch_fallback_vjp" in str(thunder.last_backward_traces(jf)[-1])


@pytest.mark.parametrize("grad", [False, True])
def test_a_result_whose_count_of_tensors_is_read_from_data(grad):
    # tensor_split at indices read from data: as many pieces as indices plus one. A program
    # serves one count (its result's structure is checked on every call); never a wrong unpack.
    def f(x):
        pieces = torch.tensor_split(x, (x > 0.5).nonzero()[:, 0])
        return pieces[0] * 3 + pieces[-1].sum()

    g = torch.Generator().manual_seed(5)
    calls = [(torch.randn(7, generator=g),) for _ in range(6)]
    jf = thunder.jit(f)
    for (x,) in calls:
        ours, theirs = (x.clone().requires_grad_(grad) for _ in range(2))
        got, want = jf(ours), f(theirs)
        torch.testing.assert_close(got, want)
        if grad:
            got.sum().backward()
            want.sum().backward()
            torch.testing.assert_close(ours.grad, theirs.grad)
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0
    counts = {int((x > 0.5).sum()) for (x,) in calls}
    assert stats.compilations <= len(counts)


def test_callables_without_an_op_on_data_sized_tensors_and_python_results():
    def f(x):
        kept = x[x > 0].round()
        values, counts = torch.unique(kept, return_counts=True)
        more = torch.is_nonzero(counts.max() > 1)  # a Python bool from data
        return values * counts + (1 if more else 0)

    g = torch.Generator().manual_seed(3)
    calls = [((torch.randn(12, generator=g) * 3),) for _ in range(5)]
    jf = thunder.jit(f)
    for (x,) in calls:
        torch.testing.assert_close(jf(x), f(x))
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0
    assert stats.compilations <= 2  # one per outcome of the bool


def test_fusion_regions_over_sizes_read_from_data():
    """Decomposed inside a torch.compile region, an op reads a size read from data (the expand
    of a broadcast): the region takes it as an input and compiles with dynamic shapes."""
    torch.manual_seed(1)
    model = _TopTwoExperts(d=8, experts=2)
    jm = thunder.jit(model, executors=("torchcompile", "torch"))
    _steps_match_eager(jm, model, calls=3, shape=(6, 8), seed=4)
    assert "torchcompile" in str(thunder.last_traces(jm)[-1])


def test_split_at_sizes_read_from_data_with_gradients():
    def f(x, lens):
        a, b = x.split(lens.tolist())
        return a.sin().sum() + (b * b).sum() * 2

    calls = [(torch.randn(5), torch.tensor(lens)) for lens in ([2, 3], [4, 1], [1, 4], [3, 2])]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager fallback, no internal error
        _matches_eager(f, calls, grad=True)


def _split_then_cat(x, lens):
    return torch.cat([p * (i + 2) for i, p in enumerate(x.split(lens.tolist()))]).sin()


def _slice_at_item(x, n):
    return x[: n.item()] * 2


@pytest.mark.parametrize("fn", [_split_then_cat, _slice_at_item])
def test_gradients_through_pieces_sized_by_data_joined_again(fn):
    # The backward slices the cotangent into pieces sized by the data and cats them: the sizes of
    # its own slices are not values of the forward (they were saved, unbound: an internal error
    # and an eager run); a size the forward did read (``n.item()``) is still saved.
    lens = ([2, 3], [4, 1], [1, 4], [5, 0])
    calls = [(torch.randn(5), torch.tensor(k if fn is _split_then_cat else k[0])) for k in lens]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _matches_eager(fn, calls, grad=True)


@pytest.mark.parametrize("jit", ["symbolic values", "thunder.compile"])
def test_gradients_through_pieces_of_symbolic_sizes_joined_again(jit):
    def f(x, a, b):
        return torch.cat([p * (i + 2) for i, p in enumerate(x.split([a, b]))]).sin()

    jf = thunder.jit(f, cache="symbolic values") if jit != "thunder.compile" else thunder.compile(f)
    for a, b in ((3, 7), (6, 4)):
        x = torch.randn(10, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = jf(x, a, b)
        want = f(x2, a, b)
        torch.testing.assert_close(got, want)
        got.sum().backward()
        want.sum().backward()
        torch.testing.assert_close(x.grad, x2.grad)
