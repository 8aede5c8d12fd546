"""Random draws compared with eager: values and the generators' states after each call.

- A torch.Generator (or another object pinned by identity) read from an item of an outside
  list, dict or tuple is guarded by identity: another object there recompiles.
- The data run while tracing a callable whose result's shape is read from data
  (``torch.binomial``, ``torch._sample_dirichlet``) puts back the generator passed in too.
- The eager run after a compiled call raised (an index out of range, a failing solve) in a
  program that writes an input or outside state, or catches the error, starts from the
  generators' states the call found: the default ones and those passed in or read.
- A random in-place fill of a leaf that requires grad (or of a view of one) raises eager's
  error before it draws.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

CACHES = [None, "symbolic values"]


def _jit(fn: Callable[..., Any], cache: str | None) -> Any:
    return thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        return torch.equal(a.detach().nan_to_num(7.0), b.detach().nan_to_num(7.0))
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


def _outcome(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    gens: tuple[torch.Generator, ...],
    seed: int,
) -> tuple[Any, Any, torch.Tensor, list[torch.Tensor]]:
    torch.manual_seed(seed)
    for i, g in enumerate(gens):
        g.manual_seed(seed * 10 + i)
    try:
        out, err = fn(*args), None
    except Exception as e:
        out, err = None, (type(e), str(e).splitlines()[0])
    return out, err, torch.get_rng_state(), [g.get_state() for g in gens]


def _like_eager(
    fn: Callable[..., Any],
    make_args: Callable[[int], tuple[Any, ...]],
    calls: int = 4,
    gens: tuple[torch.Generator, ...] = (),
    cache: str | None = None,
    before: Callable[[int], None] = lambda i: None,
) -> Any:
    jf = _jit(fn, cache)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(calls):
            before(i)
            want_args = make_args(i)
            want = _outcome(fn, want_args, gens, 100 + i)
            before(i)
            got_args = make_args(i)
            got = _outcome(jf, got_args, gens, 100 + i)
            assert want[1] == got[1], f"call {i}: error {got[1]} vs eager {want[1]}"
            assert _same(want[0], got[0]), f"call {i}: values differ"
            assert torch.equal(want[2], got[2]), f"call {i}: default generator's state differs"
            for k, (w, g) in enumerate(zip(want[3], got[3])):
                assert torch.equal(w, g), f"call {i}: state of generator {k} differs"
            assert _same(want_args, got_args), f"call {i}: arguments differ"
    return jf


def _tensors(*shapes: tuple[int, ...], grad: bool = False) -> Callable[[int], tuple[Any, ...]]:
    def make(i: int) -> tuple[Any, ...]:
        g = torch.Generator().manual_seed(i)
        return tuple(torch.randn(s, generator=g).requires_grad_(grad) for s in shapes)

    return make


# -- 1. a generator read from an item of outside state is guarded by identity -----------------

GA, GB = torch.Generator(), torch.Generator()
ORDER = [GA, GB, GB, GA, GB]
GEN_LIST = [GA]
GEN_DICT = {"g": GA}
GEN_NESTED = [(GA,)]


class _Holder:
    gens: list[torch.Generator]


HOLDER = _Holder()
HOLDER.gens = [GA]


def _from_list(x: torch.Tensor) -> torch.Tensor:
    return x + torch.rand(3, generator=GEN_LIST[0])


def _from_dict(x: torch.Tensor) -> torch.Tensor:
    return x * torch.randn(3, generator=GEN_DICT["g"])


def _from_nested(x: torch.Tensor) -> torch.Tensor:
    return x + torch.rand(3, generator=GEN_NESTED[0][0])


def _from_attr_list(x: torch.Tensor) -> torch.Tensor:
    return F.dropout(x, 0.5, True) + torch.rand(3, generator=HOLDER.gens[0])


def _by_iteration(x: torch.Tensor) -> torch.Tensor:
    for g in GEN_LIST:
        x = x + torch.rand(3, generator=g)
    return x


def _set_list(i: int) -> None:
    GEN_LIST[0] = ORDER[i]


def _set_dict(i: int) -> None:
    GEN_DICT["g"] = ORDER[i]


def _set_nested(i: int) -> None:
    GEN_NESTED[0] = (ORDER[i],)


def _set_attr_list(i: int) -> None:
    HOLDER.gens[0] = ORDER[i]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn, setter",
    [
        (_from_list, _set_list),
        (_from_dict, _set_dict),
        (_from_nested, _set_nested),
        (_from_attr_list, _set_attr_list),
        (_by_iteration, _set_list),
    ],
    ids=["list_item", "dict_item", "tuple_in_list", "attribute_list_item", "iterated_list"],
)
def test_generator_read_from_an_item_is_pinned(fn: Any, setter: Any, cache: str | None) -> None:
    jf = _like_eager(fn, _tensors((3,)), calls=5, gens=(GA, GB), cache=cache, before=setter)
    assert thunder.cache_misses(jf) >= 2  # one program per generator


class _ModuleWithGenerators(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.gens = [GA]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * torch.rand(3, generator=self.gens[0])


def test_generator_in_a_module_list_attribute_is_pinned_with_gradients() -> None:
    torch.manual_seed(0)
    m = _ModuleWithGenerators()
    jm = thunder.jit(m)
    for i, g in enumerate(ORDER):
        m.gens[0] = g
        grads = []
        outs = []
        for f in (m, jm):
            x = torch.randn(2, 3, generator=torch.Generator().manual_seed(i), requires_grad=True)
            GA.manual_seed(1)
            GB.manual_seed(2)
            out = f(x)
            out.sum().backward()
            outs.append((out.detach(), GA.get_state(), GB.get_state()))
            grads.append((x.grad, m.lin.weight.grad.clone()))
            m.zero_grad()
        assert all(torch.equal(a, b) for a, b in zip(*outs)), f"call {i}"
        torch.testing.assert_close(grads[0], grads[1])


ITEMGETTERS = [operator.itemgetter(0)]
METHODS: dict[str, Any] = {"reduce": torch.Tensor.sum}


def _itemgetter_item(x: torch.Tensor) -> torch.Tensor:
    return ITEMGETTERS[0](x) * 2


def _method_item(x: torch.Tensor) -> torch.Tensor:
    return METHODS["reduce"](x) + 1


@pytest.mark.parametrize(
    "fn, container, key, values",
    [
        (_itemgetter_item, ITEMGETTERS, 0, [operator.itemgetter(0), operator.itemgetter(1)]),
        (_method_item, METHODS, "reduce", [torch.Tensor.sum, torch.Tensor.mean]),
    ],
    ids=["itemgetter_in_list", "method_descriptor_in_dict"],
)
def test_c_callable_read_from_an_item_is_pinned(
    fn: Any, container: Any, key: Any, values: list[Any]
) -> None:
    def put(i: int) -> None:
        container[key] = values[i % 2]

    _like_eager(fn, _tensors((2, 3)), calls=4, before=put)


# -- 2. sized fallback with a generator passed in -----------------------------------------


def _binomial(p: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    return torch.binomial(torch.full_like(p, 10.0), p, generator=g)


def _dirichlet(p: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    return torch._sample_dirichlet(p + 0.1, generator=g) * 2


def _poisson_then_binomial(p: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    return torch.poisson(p * 3, generator=g) + torch.binomial(
        torch.full_like(p, 4.0), p, generator=g
    )


G_GLOBAL = torch.Generator()


def _binomial_global(p: torch.Tensor) -> torch.Tensor:
    return torch.binomial(torch.full_like(p, 10.0), p, generator=G_GLOBAL) + torch.rand(p.shape)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("fn", [_binomial, _dirichlet, _poisson_then_binomial])
def test_sized_random_fallback_draws_once_from_the_generator_passed_in(
    fn: Any, cache: str | None
) -> None:
    g = torch.Generator()

    def make(i: int) -> tuple[Any, ...]:
        return (torch.rand(5, 3 + i % 2, generator=torch.Generator().manual_seed(i)), g)

    _like_eager(fn, make, gens=(g,), cache=cache)


def test_sized_random_fallback_draws_once_from_a_global_generator() -> None:
    def make(i: int) -> tuple[Any, ...]:
        return (torch.rand(4, 6, generator=torch.Generator().manual_seed(i)),)

    _like_eager(_binomial_global, make, gens=(G_GLOBAL,))


# -- 3. the eager run after an error starts from the default generators' states ---------------


def _draw_index_write(x: torch.Tensor, idx: torch.Tensor) -> Any:
    y = torch.rand(4)
    z = x[idx]
    x.mul_(2)
    return y, z


LOG: list[int] = []


def _draw_log_index(x: torch.Tensor, idx: torch.Tensor) -> Any:
    y = torch.randn(4)
    LOG.append(1)
    return y, x[idx]


def _dropout_write_index(x: torch.Tensor, idx: torch.Tensor) -> Any:
    y = F.dropout(x, 0.5, True)
    x.add_(1)
    return y, x[idx]


def _multinomial_write_index(x: torch.Tensor, idx: torch.Tensor) -> Any:
    s = torch.multinomial(x.abs() + 0.1, 2)
    LOG.append(2)
    return s, torch.index_select(x, 0, idx)


def _fork_rng_write_index(x: torch.Tensor, idx: torch.Tensor) -> Any:
    with torch.random.fork_rng():
        a = torch.rand(3)
    b = torch.rand(3)
    x.sub_(1)
    return a, b, x[idx]


def _index_arguments(i: int) -> tuple[Any, ...]:
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(i))
    return x, torch.tensor([1, 9 if i % 2 else 2])


@pytest.mark.parametrize("cache", [*CACHES, "same input"])
@pytest.mark.parametrize(
    "fn",
    [
        _draw_index_write,
        _draw_log_index,
        _dropout_write_index,
        _multinomial_write_index,
        _fork_rng_write_index,
    ],
)
def test_rerun_after_an_error_starts_from_the_generator_state_the_call_found(
    fn: Any, cache: str | None
) -> None:
    LOG.clear()
    _like_eager(fn, _index_arguments, cache=cache, before=lambda i: LOG.clear())


def _draw_then_failing_solve(a: torch.Tensor, b: torch.Tensor) -> Any:
    noise = torch.rand(3)
    LOG.append(3)
    return torch.linalg.solve(a, b) + noise


def test_rerun_after_a_failing_solve_draws_once() -> None:
    def make(i: int) -> tuple[Any, ...]:
        a = torch.randn(3, 3, generator=torch.Generator().manual_seed(i))
        if i % 2:
            a[2] = a[1]  # singular
        return a, torch.randn(3, generator=torch.Generator().manual_seed(i + 50))

    _like_eager(_draw_then_failing_solve, make, before=lambda i: LOG.clear())


def _draw_caught_default(x: torch.Tensor, idx: torch.Tensor) -> Any:
    y = torch.rand(4)
    try:
        z = x[idx]
    except IndexError:
        z = x[:2]
    return y, z


def test_rerun_of_caught_error_after_default_draws() -> None:
    _like_eager(_draw_caught_default, _index_arguments)


def test_rerun_after_an_error_with_gradients_draws_once() -> None:
    def f(x: torch.Tensor, idx: torch.Tensor) -> Any:
        y = F.dropout(x, 0.3, True)
        LOG.append(1)
        return y * x[idx].sum()

    jf = thunder.jit(f)
    for i in range(4):
        outcomes = []
        for fn in (f, jf):
            x, idx = _index_arguments(i)
            x.requires_grad_()
            torch.manual_seed(i)
            try:
                out = fn(x, idx)
                out.sum().backward()
                result: Any = (out.detach(), x.grad)
            except IndexError:
                result = "IndexError"
            outcomes.append((result, torch.get_rng_state()))
        (w, ws), (g, gs) = outcomes
        assert _same(w, g) and torch.equal(ws, gs), f"call {i}"


# -- 4. ... and from the states of the generators passed in or read ----------------------------


def _caught_with_generator(x: torch.Tensor, idx: torch.Tensor, g: torch.Generator) -> Any:
    y = torch.rand(4, generator=g)
    try:
        z = x[idx]
    except IndexError:
        z = x[:3]
    return y, z


def _write_with_generator(x: torch.Tensor, idx: torch.Tensor, g: torch.Generator) -> Any:
    y = torch.randn(4, generator=g) + torch.rand(4)
    z = x[idx]
    x.mul_(3)
    return y, z


def _caught_with_global_generator(x: torch.Tensor, idx: torch.Tensor) -> Any:
    y = torch.rand(4, generator=G_GLOBAL)
    try:
        z = x[idx]
    except IndexError:
        z = -x[:1]
    return y, z


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("fn", [_caught_with_generator, _write_with_generator])
def test_rerun_after_an_error_starts_from_the_given_generators_state(
    fn: Any, cache: str | None
) -> None:
    g = torch.Generator()
    _like_eager(fn, lambda i: (*_index_arguments(i), g), gens=(g,), cache=cache)


def test_rerun_after_an_error_starts_from_a_global_generators_state() -> None:
    _like_eager(_caught_with_global_generator, _index_arguments, gens=(G_GLOBAL,))


# -- 5. a random fill of a leaf that requires grad raises before it draws ---------------------

FILLS = {
    "uniform_": lambda a: a.uniform_(),
    "normal_": lambda a: a.normal_(2.0, 0.5),
    "bernoulli_": lambda a: a.bernoulli_(0.3),
    "exponential_": lambda a: a.exponential_(),
    "cauchy_": lambda a: a.cauchy_(),
    "log_normal_": lambda a: a.log_normal_(),
    "geometric_": lambda a: a.geometric_(0.4),
}


@pytest.mark.parametrize("fill", list(FILLS))
def test_random_fill_of_a_leaf_requiring_grad_raises_before_drawing(fill: str) -> None:
    fn = FILLS[fill]

    def f(a: torch.Tensor) -> Any:
        b = torch.rand(2)
        return fn(a), b

    _like_eager(f, _tensors((3, 4), grad=True))


@pytest.mark.parametrize("fill", ["uniform_", "normal_", "bernoulli_"])
def test_random_fill_of_a_view_of_a_leaf_raises_before_drawing(fill: str) -> None:
    fn = FILLS[fill]

    def f(a: torch.Tensor) -> Any:
        return fn(a[1:])

    _like_eager(f, _tensors((3, 4), grad=True))


@pytest.mark.parametrize("fill", ["uniform_", "normal_", "exponential_"])
def test_random_fill_of_a_leaf_under_no_grad_and_of_a_computed_tensor(fill: str) -> None:
    fn = FILLS[fill]

    def under_no_grad(a: torch.Tensor) -> Any:
        with torch.no_grad():
            fn(a)
        return a * 2

    def computed(a: torch.Tensor) -> Any:
        h = a * 3
        fn(h)
        return (h + a).sum(0)

    _like_eager(under_no_grad, _tensors((3, 4), grad=True))
    jf = _like_eager(computed, _tensors((3, 4), grad=True))
    for i in range(3):
        grads = []
        for f in (computed, jf):
            (a,) = _tensors((3, 4), grad=True)(i)
            torch.manual_seed(i)
            f(a).pow(2).sum().backward()
            grads.append((a.grad, torch.get_rng_state()))
        assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])


def test_random_fill_with_a_generator_of_a_leaf_raises_before_drawing() -> None:
    g = torch.Generator()

    def f(a: torch.Tensor, g: torch.Generator) -> Any:
        return a.uniform_(generator=g)

    _like_eager(f, lambda i: (*_tensors((3,), grad=True)(i), g), gens=(g,))


# -- a decision on data after a draw from a generator passed in --------------------------------


def _draw_then_decide(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    y = torch.rand(4, generator=g)
    if x.sum() > 0:
        return y * 2
    return y * 3


@pytest.mark.parametrize("cache", CACHES)
def test_decision_on_data_after_a_draw_from_a_given_generator(cache: str | None) -> None:
    g = torch.Generator()

    def make(i: int) -> tuple[Any, ...]:
        return (torch.ones(4) * (1 if i % 2 == 0 else -1), g)

    _like_eager(_draw_then_decide, make, calls=5, gens=(g,), cache=cache)
