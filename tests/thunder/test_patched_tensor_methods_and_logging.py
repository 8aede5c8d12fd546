"""Methods replaced on torch.Tensor are what a compiled program runs (before the first call and
between calls), the legacy size_average/reduce warning of the losses on every call, and jit's
checks of its executors and boolean options."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch
import torch.nn.functional as F

import thunder

CACHES = [None, "symbolic values"]


@pytest.fixture
def restore_tensor():
    saved = dict(vars(torch.Tensor))
    yield
    for name in set(vars(torch.Tensor)) - set(saved):
        delattr(torch.Tensor, name)
    for name, value in saved.items():
        if vars(torch.Tensor).get(name) is not value:
            setattr(torch.Tensor, name, value)


def _compare(jf, f, *shapes, requires_grad=False):
    args = [torch.randn(*s, requires_grad=requires_grad) for s in shapes]
    expected = f(*args)
    got = jf(*[a.detach().requires_grad_(requires_grad) for a in args])
    torch.testing.assert_close(got, expected)
    if requires_grad:
        ga = [a.detach().requires_grad_() for a in args]
        gb = [a.detach().requires_grad_() for a in args]
        f(*ga).sum().backward()
        jf(*gb).sum().backward()
        for a, b in zip(ga, gb):
            torch.testing.assert_close(b.grad, a.grad)


@pytest.mark.parametrize("cache", CACHES)
def test_method_replaced_between_calls(restore_tensor, cache):
    orig_relu = torch.Tensor.relu

    def f(x):
        return x.relu() * 2

    jf = thunder.jit(f, cache=cache)
    for _ in range(2):
        _compare(jf, f, (3, 4), requires_grad=True)
    torch.Tensor.relu = lambda t: orig_relu(t) + t * 10
    for _ in range(3):
        _compare(jf, f, (3, 4), requires_grad=True)
    del torch.Tensor.relu  # torch's own again: the first program serves
    for _ in range(2):
        _compare(jf, f, (3, 4), requires_grad=True)
    assert thunder.cache_misses(jf) == 2


@pytest.mark.parametrize("cache", CACHES)
def test_method_replaced_before_first_call(restore_tensor, cache):
    torch.Tensor.relu = lambda t: t * 10
    f = lambda x: x.relu() + 1  # noqa: E731
    jf = thunder.jit(f, cache=cache)
    for _ in range(3):
        _compare(jf, f, (5,))


@pytest.mark.parametrize("cache", CACHES)
def test_operator_replaced(restore_tensor, cache):
    orig_add = torch.Tensor.__add__

    def f(a, b):
        return (a + b) * 2 + 1.5

    jf = thunder.jit(f, cache=cache)
    _compare(jf, f, (4,), (4,), requires_grad=True)
    torch.Tensor.__add__ = lambda s, o: orig_add(s, o) * 3
    for _ in range(3):
        _compare(jf, f, (4,), (4,), requires_grad=True)
    torch.Tensor.__mul__ = lambda s, o: s - o
    for _ in range(2):
        _compare(jf, f, (4,), (4,))
    torch.Tensor.__add__ = orig_add
    del torch.Tensor.__mul__
    _compare(jf, f, (4,), (4,))


def test_same_input_cache_sees_a_replacement(restore_tensor):
    f = lambda x: x.relu() + 1  # noqa: E731
    jf = thunder.jit(f, cache="same input")
    x = torch.randn(5)
    torch.testing.assert_close(jf(x), f(x))
    torch.Tensor.relu = lambda t: t * 10
    for _ in range(2):
        torch.testing.assert_close(jf(x), f(x))
    del torch.Tensor.relu
    torch.testing.assert_close(jf(x), f(x))


def test_replaced_by_another_torch_method(restore_tensor):
    f = lambda x: x.relu()  # noqa: E731
    jf = thunder.jit(f)
    _compare(jf, f, (6,))
    torch.Tensor.relu = torch.Tensor.sigmoid
    for _ in range(2):
        _compare(jf, f, (6,))


@pytest.mark.parametrize("cache", CACHES)
def test_replaced_property(restore_tensor, cache):
    f = lambda x: x.T + 1  # noqa: E731
    jf = thunder.jit(f, cache=cache)
    _compare(jf, f, (2, 3), requires_grad=True)
    torch.Tensor.T = property(lambda t: t * 5 - t.sum())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # traced, not run eagerly
        for _ in range(2):
            _compare(jf, f, (2, 3), requires_grad=True)


def test_replaced_property_of_an_unsupported_case_runs_as_eager(restore_tensor):
    f = lambda x: x.mT + 1  # noqa: E731
    jf = thunder.jit(f)
    torch.Tensor.mT = property(lambda t: t * 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            _compare(jf, f, (3,))  # (mT of a 1-d tensor: torch's own would raise)


def test_untouched_program_keeps_serving(restore_tensor):
    f = lambda x: x.sin()  # noqa: E731
    jf = thunder.jit(f)
    _compare(jf, f, (3,))
    torch.Tensor.relu = lambda t: t
    _compare(jf, f, (3,))
    torch.Tensor.relu = lambda t: t * 2
    _compare(jf, f, (3,))
    assert thunder.cache_misses(jf) <= 3


def test_replaced_method_thunder_answers_itself(restore_tensor):
    f = lambda x: (x * 2, x.dim(), x.tolist())  # noqa: E731
    jf = thunder.jit(f)
    x = torch.randn(3)
    assert jf(x)[1:] == f(x)[1:]
    torch.Tensor.dim = lambda t: "mine"
    torch.Tensor.tolist = lambda t: "listed"
    for _ in range(2):
        x = torch.randn(3)
        got, expected = jf(x), f(x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:] == ("mine", "listed")


_BEFORE_IMPORT = """
import torch
torch.Tensor.relu = lambda t: t * 10
torch.Tensor.nonzero = lambda t: "nonzero"
import thunder
f = lambda x: (x.relu(), x.nonzero())
jf = thunder.jit(f)
for _ in range(2):
    x = torch.randn(4)
    got, expected = jf(x), f(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1] == "nonzero", got[1]
print("ok")
"""


def test_replaced_before_thunder_is_imported():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _BEFORE_IMPORT], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


# -- the legacy size_average/reduce of the losses ------------------------------------------------

LEGACY = {
    "l1_loss": lambda a, b: F.l1_loss(a, b, reduce=False),
    "l1_loss_sum": lambda a, b: F.l1_loss(a, b, size_average=False),
    "mse_loss": lambda a, b: F.mse_loss(a, b, reduce=False),
    "smooth_l1_loss": lambda a, b: F.smooth_l1_loss(a, b, size_average=True, reduce=True),
    "bce": lambda a, b: F.binary_cross_entropy(a.sigmoid(), b.sigmoid(), reduce=False),
    "bce_logits": lambda a, b: F.binary_cross_entropy_with_logits(a, b.sigmoid(), reduce=False),
    "kl_div": lambda a, b: F.kl_div(a.log_softmax(-1), b.softmax(-1), size_average=False),
}


def _deprecations(fn, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
    found = [
        (str(w.message), w.filename, w.lineno)
        for w in caught
        if "size_average and reduce" in str(w.message)
    ]
    return out, found


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_legacy_reduction_warns_every_call(name):
    f = LEGACY[name]
    jf = thunder.jit(f)
    for _ in range(3):
        a, b = torch.randn(3, 4), torch.randn(3, 4)
        expected, eager_warnings = _deprecations(f, a, b)
        got, jit_warnings = _deprecations(jf, a, b)
        torch.testing.assert_close(got, expected)
        assert eager_warnings and jit_warnings == eager_warnings


def test_no_legacy_warning_without_legacy_args():
    f = lambda a, b: F.l1_loss(a, b, reduction="sum")  # noqa: E731
    jf = thunder.jit(f)
    for _ in range(2):
        _, found = _deprecations(jf, torch.randn(3), torch.randn(3))
        assert not found


# -- jit's arguments ----------------------------------------------------------------------------


def test_one_executor_name():
    f = lambda x: x * 2 + 1  # noqa: E731
    jf = thunder.jit(f, executors="torch")
    _compare(jf, f, (3,))
    with pytest.raises(TypeError, match="executors"):
        thunder.jit(f, executors=3)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"disable_torch_autograd": "yes"},
        {"disable_torch_autograd": 1},
        {"dce": "no"},
        {"warn_on_recompile": None},
    ],
)
def test_bool_options_refuse_other_values(kwargs):
    name = next(iter(kwargs))
    with pytest.raises(TypeError, match=name):
        thunder.jit(lambda x: x, **kwargs)


def test_bool_options_accept_bools():
    f = lambda x: x + 1  # noqa: E731
    jf = thunder.jit(f, disable_torch_autograd=True, dce=False, warn_on_recompile=False)
    _compare(jf, f, (2,))


# -- where a replayed logger call is attributed ---------------------------------------------------

_log = logging.getLogger("thunder_test_log_location")


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def records():
    handler = _Records()
    _log.addHandler(handler)
    _log.setLevel(logging.INFO)
    _log.propagate = False
    yield handler.records
    _log.removeHandler(handler)


def _where(record):
    tail = record.stack_info.splitlines()[-2:] if record.stack_info else None
    return (
        record.pathname,
        record.filename,
        record.module,
        record.lineno,
        record.funcName,
        record.getMessage(),
        tail,
    )


def _log_helper(x, level):
    _log.warning("helper %d", x.shape[0], stacklevel=level)


def _step(x):
    loss = (x * 2).sum()
    _log.info("loss=%.3f", loss.item())
    _log.info("plain", stack_info=True)
    _log_helper(x, 1)
    _log_helper(x, 2)
    logging.LoggerAdapter(_log, {}).info("adapted")
    return loss


def _caller_of(fn, x):
    return fn(x)  # (stacklevel=2 from the jitted function itself names this line)


def _outer(x):
    _log.info("outer", stacklevel=2)
    return x + 1


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("fn", [_step, _outer])
def test_logging_record_location(records, fn, cache):
    jf = thunder.jit(fn, cache=cache)
    for _ in range(3):
        x = torch.randn(3)
        records.clear()
        expected = _caller_of(fn, x)
        eager = [_where(r) for r in records]
        records.clear()
        got = _caller_of(jf, x)
        torch.testing.assert_close(got, expected)
        assert [_where(r) for r in records] == eager
