"""Attributes of tensors inside a jitted function answer as in eager: Python attributes a caller
set on its tensors and parameters (read, guarded: changing them between calls gives the new
answer), ``dir``, ``vars``, ``operator.attrgetter`` / ``methodcaller``, the conjugate and
negative view bits, what an in-place op returns under ``torch.no_grad`` (``nn.init``), callables
handed to ``itertools`` helpers, and f-strings of containers holding tensors."""

from __future__ import annotations

import functools
import itertools
import operator
import warnings
import weakref

import pytest
import torch
from torch import nn

import thunder

torch.set_num_threads(1)


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and type(a) is type(b) and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


def _traced_without_failure(jf, *args):
    """``jf(*args)``, failing where tracing raised and the call ran eagerly instead."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = jf(*args)
    failures = [str(w.message) for w in caught if "please report this" in str(w.message)]
    assert not failures, failures
    return out


def _like_eager(fn, *calls, compiled=False):
    """``thunder.jit(fn)`` answers as ``fn`` on each argument tuple of ``calls``, in order
    (``compiled``: by thunder's program, neither split nor run eagerly)."""
    jf = thunder.jit(fn)
    for args in calls:
        expected = fn(*args)
        got = _traced_without_failure(jf, *args)
        assert _same(expected, got), (expected, got)
    if compiled:
        stats = thunder.compile_stats(jf)
        assert (stats.split_calls, stats.eager_fallbacks) == (0, 0), stats
    return jf


def _with(t, **attrs):
    for name, value in attrs.items():
        setattr(t, name, value)
    return t


# --- 1. Python attributes of tensors passed in ---------------------------------------------------


def _scale_or_default(x):
    return getattr(x, "scale", 1.0)


def _has_scale(x):
    return hasattr(x, "scale")


def _scaled(x):
    return x * x.scale


@pytest.mark.parametrize("fn", [_scale_or_default, _has_scale])
def test_attribute_of_an_input_tensor_is_eagers(fn):
    _like_eager(
        fn,
        (torch.randn(3),),
        (_with(torch.randn(3), scale=2.0),),
        (_with(torch.randn(3), scale=3.0),),
        (torch.randn(3),),
        compiled=True,
    )


def test_attribute_read_directly_is_eagers():
    _like_eager(
        _scaled,
        (_with(torch.randn(3), scale=2.0),),
        (_with(torch.randn(3), scale=-0.5),),
        compiled=True,
    )


def test_attribute_set_changed_and_deleted_between_calls_is_never_stale():
    jf = thunder.jit(_scale_or_default)
    x = torch.randn(3)
    for change in (None, 2.0, 5.0, "del", 7.0):
        if change == "del":
            del x.scale
        elif change is not None:
            x.scale = change
        assert _traced_without_failure(jf, x) == _scale_or_default(x)


def test_attribute_of_a_parameter_as_libraries_set_it():
    lin = nn.Linear(2, 2)

    def fn(inp):
        dim = getattr(lin.weight, "tp_dim", None)
        return lin(inp) * (1 if dim is None else dim + 1)

    x = torch.randn(4, 2)
    jf = thunder.jit(fn)
    torch.testing.assert_close(_traced_without_failure(jf, x), fn(x))
    lin.weight.tp_dim = 1
    torch.testing.assert_close(_traced_without_failure(jf, x), fn(x))
    lin.weight.tp_dim = 0
    torch.testing.assert_close(_traced_without_failure(jf, x), fn(x))


def test_tensor_valued_attribute_of_an_input_is_read_each_call():
    def fn(x):
        return x * x.weight_scale

    jf = thunder.jit(fn)
    for _ in range(3):
        x = _with(torch.randn(3), weight_scale=torch.randn(3))
        torch.testing.assert_close(_traced_without_failure(jf, x), fn(x))


def test_attribute_set_on_a_computed_tensor():
    def fn(x):
        y = x * 2
        y.tag = "a"
        return y.tag, getattr(y, "other", None), hasattr(y, "tag")

    jf = thunder.jit(fn)
    for _ in range(2):
        x = torch.randn(3)
        assert jf(x) == fn(x)


def test_class_constant_of_a_parameter_subclass():
    class TaggedParameter(nn.Parameter):
        tp_dim = 1

    def fn(p):
        return p * (getattr(p, "tp_dim", 0) + 1), getattr(p, "_is_param", None)

    _like_eager(
        fn, (TaggedParameter(torch.randn(3)),), (nn.Parameter(torch.randn(3)),), compiled=True
    )


def test_vars_of_a_computed_tensor_is_eagers():
    def fn(x):
        y = x * 2
        vars(y)["tag"] = "a"
        return y.tag, vars(y)

    jf = thunder.jit(fn)
    for _ in range(2):
        x = torch.randn(3)
        assert _traced_without_failure(jf, x) == fn(x)


# --- 2. vars, identity and hashing -----------------------------------------------------------------


def test_vars_of_an_input_tensor_is_its_dict():
    def fn(x):
        return sorted(vars(x).items())

    _like_eager(
        fn, (torch.randn(2),), (_with(torch.randn(2), a=1, b="x"),), (_with(torch.randn(2), a=2),)
    )


def test_identity_and_hash_of_tensors():
    def fn(x, y):
        d = {x: 1, y: 2}
        return d[x], d[y], id(x) == id(x), id(x) == id(y), hash(x) == hash(x)

    _like_eager(fn, (torch.randn(2), torch.randn(2)))


def test_weak_references_to_tensors():
    def fn(x):
        y = x * 2
        rx, ry = weakref.ref(x), weakref.ref(y)
        return rx() is x, ry() is y, rx() is y, rx() * 3, ry() + 1

    _like_eager(fn, (torch.randn(3),), (torch.randn(3),))


# --- 3. dir, attrgetter, methodcaller ------------------------------------------------------------


def test_dir_of_a_tensor_is_torchs():
    def fn(x):
        return dir(x), dir(x * 2)

    _like_eager(fn, (torch.randn(2),), (_with(torch.randn(2), scale=1.0),), compiled=True)
    p = nn.Parameter(torch.randn(2))
    _like_eager(lambda p: dir(p), (p,), compiled=True)


def test_attrgetter_and_methodcaller_give_torch_values():
    def fn(x):
        dtype = operator.attrgetter("dtype")(x)
        device = operator.attrgetter("device")(x)
        shape, ndim = operator.attrgetter("shape", "ndim")(x)
        size = operator.methodcaller("size", 0)(x)
        return (
            dtype is torch.float32,
            dtype == torch.float32,
            device == torch.device("cpu"),
            shape == torch.Size([2, 3]),
            ndim,
            size,
            operator.attrgetter("T.shape")(x) == torch.Size([3, 2]),
        )

    _like_eager(fn, (torch.randn(2, 3),), compiled=True)


def test_attrgetter_reads_a_caller_set_attribute():
    _like_eager(
        operator.attrgetter("scale"),
        (_with(torch.randn(2), scale=2.0),),
        (_with(torch.randn(2), scale=4.0),),
    )


# --- 4. tensor subclasses, objects with __torch_function__ ---------------------------------------


class _Plain(torch.Tensor):
    pass


class _Shifted(torch.Tensor):
    """Its __torch_function__ changes what a multiplication returns."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs or {})
        return out + 100 if func is torch.Tensor.mul else out


@pytest.mark.parametrize("cls", [_Plain, _Shifted])
def test_tensor_subclass_inputs_run_as_eager(cls):
    def fn(x):
        y = x * 2
        return type(y).__name__, y

    def as_eager(fn, x):
        with pytest.warns(UserWarning, match="subclass"):
            got = thunder.jit(fn)(x)
        assert _same(fn(x), got)

    for _ in range(2):
        as_eager(fn, torch.randn(3).as_subclass(cls))


def test_tensor_subclass_buffer_runs_as_eager():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.ones(3).as_subclass(_Shifted))

        def forward(self, x):
            try:
                return x * self.b
            except Exception:  # the jit's eager run is not the program's exception
                return None

    m, x = M(), torch.randn(3)
    with pytest.warns(UserWarning, match="subclass"):
        got = thunder.jit(m)(x)
    assert _same(m(x), got)


class _Answers:
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return f"answered {func.__name__}"


@pytest.mark.parametrize("call", [torch.add, torch.Tensor.add, torch.nn.functional.relu])
def test_object_with_torch_function_answers_the_call(call):
    def fn(x):
        args = (x, _Answers()) if call is not torch.nn.functional.relu else (_Answers(),)
        return call(*args)

    x = torch.randn(3)
    with pytest.warns(UserWarning, match="__torch_function__"):
        got = thunder.jit(fn)(x)
    assert got == fn(x)


# --- 5. view bits, what an in-place op returns without grad ---------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        lambda x: x.conj().is_conj(),
        lambda x: torch.is_conj(x.conj()),
        lambda x: x.is_conj(),
        lambda x: x.conj().imag.is_neg(),
        lambda x: torch.is_neg(x.conj().imag),
        lambda x: x.is_neg(),
    ],
)
@pytest.mark.parametrize("dtype", [torch.complex64, torch.float32])
def test_conjugate_and_negative_view_bits(query, dtype):
    if dtype is torch.float32 and "imag" in repr(query.__code__.co_names):
        pytest.skip("imag of a real tensor raises in eager")
    _like_eager(query, (torch.randn(3, dtype=dtype),), (torch.randn(3, dtype=dtype),))


@pytest.mark.parametrize("init", [nn.init.zeros_, nn.init.ones_, nn.init.eye_])
def test_nn_init_returns_the_parameter_itself(init):
    def fn(p):
        return init(p) is p

    _like_eager(fn, (nn.Parameter(torch.randn(3, 3)),))
    p = nn.Parameter(torch.randn(3, 3))
    out = thunder.jit(lambda p: init(p))(p)
    assert out is p


def test_in_place_result_under_no_grad_keeps_the_gradient_of_the_leaf():
    def fn(p, x):
        with torch.no_grad():
            q = p.mul_(2)
        return (q * x).sum()

    x = torch.randn(3)
    grads = []
    for run in (fn, thunder.jit(fn)):
        p = nn.Parameter(torch.ones(3))
        run(p, x).backward()
        grads.append((p.detach().clone(), p.grad))
    torch.testing.assert_close(grads[0], grads[1])


# --- 6. callables handed to itertools ----------------------------------------------------------


def test_itertools_and_functools_call_torch_callables():
    def fn(a, b, c):
        return (
            list(itertools.accumulate((a, b, c), torch.mul)),
            list(itertools.accumulate((a, b, c))),
            list(itertools.accumulate((a, b), func=torch.add, initial=c)),
            functools.reduce(operator.add, (a, b, c)),
            list(itertools.starmap(torch.add, [(a, b), (b, c)])),
        )

    _like_eager(fn, *[tuple(torch.randn(3) for _ in range(3)) for _ in range(2)], compiled=True)


# --- 8. f-strings of containers holding tensors -------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [lambda t: f"{[t]}", lambda t: f"{(t,)}", lambda t: f"{ {'a': t} }", lambda t: f"{[1]}"],
)
def test_fstring_of_a_container_holding_a_tensor(text):
    _like_eager(text, (torch.randn(2),), (torch.randn(2),))
