"""Text of tensors made natively, torch.compile called inside a jitted function, and names read
natively from outside objects, compared with eager over several calls on fresh inputs.

- Any text a program makes of a tensor (``"%s" % t``, ``string.Template``, ``format(t, spec)``, a
  ``__repr__`` of the user's that formats a tensor, a callback C code runs) is eager's text of
  the values: the call runs split (torch makes the text), never the proxy's text.
- ``torch.compile(f)(x)`` inside a jitted function runs as eager does, without an internal
  error.
- ``"k" in globals()``, ``globals().get(k)``, ``vars(module)``, ``hasattr(module, k)`` and
  ``dir(obj)`` are answered from the names an object holds now: a later call after a global is
  defined or deleted, or an attribute added, sees the new names (guarded, or run split).
"""

# ruff: noqa: UP031  (the %-formatting of tensors is what is tested)
from __future__ import annotations

import importlib.util
import io
import logging
import re
import string
import sys
import textwrap
import types
import warnings

import pytest
import torch
import torch._dynamo

import thunder


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return fn(*args, **kwargs)


def _same(eager, jitted) -> bool:
    if isinstance(eager, torch.Tensor):
        return isinstance(jitted, torch.Tensor) and torch.equal(eager, jitted)
    if isinstance(eager, (tuple, list)):
        return type(eager) is type(jitted) and all(map(_same, eager, jitted))
    return eager == jitted


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# --------------------------------------------------------------------------------------------
# Text of tensors


class _Shows:
    """An object of the user's whose text shows the tensor it holds."""

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t

    def __repr__(self) -> str:
        return f"Shows({self.t})"


def _inplace_percent(t):
    s = "v=%s"
    s %= t
    return s


_TEXT_CASES = {
    "percent": lambda t: "%s" % t,
    "percent_repr_of_a_result": lambda t: "loss %r" % t.sum(),
    "percent_tuple": lambda t: "%s and %d" % (t, 3),
    "percent_dict": lambda t: "%(a)s" % {"a": t},
    "percent_bytes": lambda t: b"%r" % t,
    "percent_in_place": _inplace_percent,
    "template": lambda t: string.Template("$a").substitute(a=t),
    "format_builtin": lambda t: format(t, ""),
    "format_spec": lambda t: format(t.sum(), ".3f"),
    "ascii": lambda t: ascii(t),
    "dunder_str": lambda t: t.__str__(),
    "users_repr": lambda t: str(_Shows(t)),
    "users_repr_percent": lambda t: "%s" % _Shows(t),
    "users_repr_in_a_list": lambda t: repr([_Shows(t)]),
    "join_of_reprs": lambda t: "-".join(map(repr, [t, t * 2])),
    "callback_run_by_c": lambda t: re.sub("X", lambda m: str(t), "aXb"),
}


@pytest.mark.parametrize("make_text", list(_TEXT_CASES.values()), ids=list(_TEXT_CASES))
def test_text_of_a_tensor_is_eagers_on_every_call(make_text):
    def fn(x):
        y = x * 2
        return make_text(y), y + 1

    jfn = thunder.jit(fn)
    for _ in range(3):
        x = torch.randn(4)
        expected = fn(x)
        got = _quiet(jfn, x)
        assert "TensorProxy" not in str(got[0])
        assert _same(expected, got), (expected, got)


def test_text_of_a_tensor_keeps_gradients():
    def fn(x):
        y = x.sin()
        label = "value %s" % y
        return (y * 3).sum(), label

    jfn = thunder.jit(fn)
    for _ in range(3):
        x = torch.randn(5, requires_grad=True)
        xj = x.detach().clone().requires_grad_(True)
        expected_loss, expected_label = fn(x)
        loss, label = _quiet(jfn, xj)
        assert label == expected_label
        torch.testing.assert_close(loss, expected_loss)
        expected_loss.backward()
        loss.backward()
        torch.testing.assert_close(xj.grad, x.grad)


_SUFFIX = ["a"]


class _Labelled:
    """``__str__`` reads outside state (a global list) each time."""

    def __str__(self) -> str:
        return f"label-{_SUFFIX[0]}"


def test_a_users_str_reads_what_it_reads_on_every_call():
    def fn(x):
        return x + len(str(_Labelled()))

    jfn = thunder.jit(fn)
    try:
        for suffix in ("a", "a", "longer", "b"):
            _SUFFIX[0] = suffix
            x = torch.randn(3)
            assert torch.equal(_quiet(jfn, x), fn(x))
    finally:
        _SUFFIX[0] = "a"


def test_logging_a_tensor_logs_eagers_values_on_every_call():
    logger = logging.getLogger("thunder.tests.text_like_eager")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False

    def fn(x):
        y = x * 2
        logger.info("y=%s", y)
        logger.info("sum=%r", y.sum())
        return y + 1

    def logged(call, x):
        stream.seek(0)
        stream.truncate(0)
        out = call(x)
        return out, stream.getvalue()

    jfn = thunder.jit(fn)
    try:
        for _ in range(3):
            x = torch.randn(3)
            expected, expected_text = logged(fn, x)
            got, text = logged(lambda v: _quiet(jfn, v), x)
            assert text == expected_text
            assert torch.equal(got, expected)
    finally:
        logger.removeHandler(handler)


# --------------------------------------------------------------------------------------------
# torch.compile inside a jitted function


def _no_internal_warning(call, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call(*args)
    reports = [str(w.message) for w in caught if "please report" in str(w.message)]
    assert not reports, reports
    return out


def test_torch_compile_called_inside_runs_as_eager():
    def fn(x):
        return torch.compile(lambda a: a.sin() * 2, backend="eager")(x).sum()

    def reference(x):
        return (x.sin() * 2).sum()

    jfn = thunder.jit(fn)
    for _ in range(3):
        x = torch.randn(4, requires_grad=True)
        xj = x.detach().clone().requires_grad_(True)
        got = _no_internal_warning(jfn, xj)
        expected = reference(x)
        torch.testing.assert_close(got, expected)
        got.backward()
        expected.backward()
        torch.testing.assert_close(xj.grad, x.grad)


_COMPILED_OUTSIDE = torch.compile(lambda a: a.cos() + 1, backend="eager")


def test_a_function_compiled_outside_runs_as_eager():
    def fn(x):
        return _COMPILED_OUTSIDE(x) * 3

    jfn = thunder.jit(fn)
    for _ in range(3):
        x = torch.randn(4)
        torch.testing.assert_close(_no_internal_warning(jfn, x), (x.cos() + 1) * 3)


def test_a_module_compiled_inside_runs_as_eager():
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2)

    def fn(x):
        return torch.compile(lin, backend="eager")(x).relu()

    jfn = thunder.jit(fn)
    for _ in range(3):
        x = torch.randn(4, 3)
        torch.testing.assert_close(_no_internal_warning(jfn, x), lin(x).relu())


# --------------------------------------------------------------------------------------------
# Names read natively: globals(), vars(module), hasattr(module, k), dir(obj)

_MODULE_SOURCE = """
import torch

def in_globals(x):
    return x + 1 if "FLAG" in globals() else x - 1

def not_in_globals(x):
    return x * 2 if "FLAG" not in globals() else x * 3

def globals_get(x):
    value = globals().get("FLAG")
    return x + 1 if value is None else x * value

def names_counted(x):
    return x + len([name for name in globals() if name.startswith("FLAG")])

def values_summed(x):
    return x + sum(v for k, v in globals().items() if k.startswith("FLAG"))

def vars_of_module(x, module):
    return x + vars(module).get("flag", 0)

def in_module_dict(x, module):
    return x + 1 if "flag" in module.__dict__ else x - 1

def module_has(x, module):
    return x + 1 if hasattr(module, "flag") else x - 1

def imported_inside(x):
    import _names_other as other
    return x + getattr(other, "flag", 0) + (1 if hasattr(other, "flag") else 0)

def dir_of_module(x, module):
    return x + 1 if "flag" in dir(module) else x - 1

def dir_of_object(x, obj):
    return x + 1 if "attr" in dir(obj) else x - 1

def names_of_object(x, obj):
    return x + len(dir(obj))

def dir_of_global_object(x):
    return x + 1 if "attr" in dir(OBJ) else x - 1

def dir_of_class(x, obj):
    return x + 1 if "helper" in dir(type(obj)) else x - 1

def dir_of_made_object(x, obj):
    return x + 1 if "helper" in dir(Holder()) else x - 1

class Holder:
    pass

OBJ = Holder()
"""


@pytest.fixture
def namespaces(tmp_path):
    """Two user modules loaded from files: ``main`` (the functions) and ``other`` (what they
    probe)."""
    modules = {}
    for name, source in (("_names_main", _MODULE_SOURCE), ("_names_other", "")):
        path = tmp_path / f"{name}.py"
        path.write_text(textwrap.dedent(source))
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        modules[name] = module
    yield modules["_names_main"], modules["_names_other"]
    for name in modules:
        sys.modules.pop(name, None)


def _set_state(main, other, state):
    """``None``: the global, the module attribute and the object attribute absent; a number:
    present with that value."""
    obj = main.OBJ
    for holder in (main, other, obj):
        for name in ("FLAG", "flag", "attr"):
            holder.__dict__.pop(name, None)
    if hasattr(main.Holder, "helper"):
        del main.Holder.helper
    if state is not None:
        main.FLAG = state
        other.flag = state
        obj.attr = state
        main.Holder.helper = lambda self: state


_STATES = (None, None, 2, 3, None, 4)


@pytest.mark.parametrize(
    "name, with_module",
    [
        ("in_globals", False),
        ("not_in_globals", False),
        ("globals_get", False),
        ("names_counted", False),
        ("values_summed", False),
        ("dir_of_global_object", False),
        ("imported_inside", False),
        ("vars_of_module", True),
        ("in_module_dict", True),
        ("module_has", True),
        ("dir_of_module", True),
    ],
)
def test_names_of_a_module_read_natively_follow_the_module(namespaces, name, with_module):
    main, other = namespaces
    fn = getattr(main, name)
    jfn = thunder.jit(fn)
    extra = (other,) if with_module else ()
    for state in _STATES:
        _set_state(main, other, state)
        x = torch.randn(3)
        expected = fn(x, *extra)
        got = _quiet(jfn, x, *extra)
        assert torch.equal(got, expected), (name, state, got, expected)


@pytest.mark.parametrize(
    "name", ["dir_of_object", "names_of_object", "dir_of_class", "dir_of_made_object"]
)
def test_names_of_an_object_read_natively_follow_the_object(namespaces, name):
    main, other = namespaces
    fn = getattr(main, name)
    jfn = thunder.jit(fn)
    for state in _STATES:
        _set_state(main, other, state)
        x = torch.randn(3)
        expected = fn(x, main.OBJ)
        got = _quiet(jfn, x, main.OBJ)
        assert torch.equal(got, expected), (name, state, got, expected)


def test_dir_of_a_module_follows_its_members():
    model = torch.nn.Linear(3, 3)

    def fn(x, m):
        return m(x) + (1 if "extra" in dir(m) else 0)

    jfn = thunder.jit(fn)
    for step in range(4):
        if step == 2:
            model.register_buffer("extra", torch.zeros(3))
        x = torch.randn(2, 3)
        torch.testing.assert_close(_quiet(jfn, x, model), fn(x, model))


def test_globals_of_code_without_a_file_follow_the_module():
    """Code ``exec``-ed into a module (a notebook cell) is the program's own code too."""
    module = types.ModuleType("_names_cell")
    sys.modules[module.__name__] = module
    try:
        exec(compile(_MODULE_SOURCE, "<cell 1>", "exec"), module.__dict__)
        fn = module.in_globals
        jfn = thunder.jit(fn)
        for state in _STATES:
            module.__dict__.pop("FLAG", None)
            if state is not None:
                module.FLAG = state
            x = torch.randn(3)
            assert torch.equal(_quiet(jfn, x), fn(x)), state
    finally:
        sys.modules.pop("_names_cell", None)
