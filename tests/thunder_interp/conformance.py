"""Differential conformance harness for ``thunder_interp`` (in the style of byterun's ``assert_ok``).

A snippet is Python source that defines a function (by convention ``f``). The harness executes the
source twice, each time into a fresh module namespace, calls ``f`` once directly under CPython and
once through ``thunder_interp.interpret``, and asserts that both runs behave the same:

- the same text printed to stdout (memory addresses ``0x...`` are masked),
- the same kind of outcome: a return value, a generator/iterator (compared by the items it produces
  and how it ends), a coroutine (driven with ``send(None)``; compared by what it yields and returns),
- the same return value (``==`` and the same type name, or else the same ``repr`` with addresses
  masked, for objects with identity semantics such as instances of classes defined in the snippet),
- the same exception: type name, ``str``, and recursively its ``__cause__``, ``__context__``,
  ``__suppress_context__`` and, for exception groups, its sub-exceptions.

A snippet may name a ``check`` function defined in its source: it is called (never interpreted) on
the return value of ``f`` and its own result is compared instead. Use it to drive objects returned
by interpreted code (``send``/``throw``/``close`` on a returned generator, say).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import difflib
import inspect
import io
import re
import sys
import textwrap
import traceback
import types
from collections.abc import Callable
from typing import Any

import pytest

__all__ = [
    "Outcome",
    "Snippet",
    "assert_ok",
    "assert_same",
    "case",
    "run_cpython",
    "run_interpreted",
]

# How many items of a returned iterator are compared (a snippet returning an endless iterator
# is compared on its first MAX_ITEMS items).
MAX_ITEMS = 10_000
# How deep exception chains (cause/context/group members) are compared.
MAX_EXCEPTION_DEPTH = 5

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def _interpret(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The function under test; imported lazily so that collection works while it is being built."""
    from thunder_interp import interpret

    return interpret(fn)


# --------------------------------------------------------------------------------------------------
# Snippets


@dataclasses.dataclass
class Snippet:
    source: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    fn: str = "f"
    check: str | None = None
    name: str = "snippet"

    def assert_ok(self) -> None:
        __tracebackhide__ = True
        assert_ok(
            self.source, *self.args, _fn=self.fn, _check=self.check, _name=self.name, **self.kwargs
        )


def case(
    id: str,
    source: str,
    *args: Any,
    fn: str = "f",
    check: str | None = None,
    min_version: tuple[int, int] | None = None,
    **kwargs: Any,
) -> Any:
    """A ``pytest.param`` holding one snippet, with a readable id.

    ``min_version`` skips the snippet on Pythons whose syntax or library lacks what it uses; it is
    never to be used to hide interpreter bugs.
    """
    marks = []
    if min_version is not None and sys.version_info < min_version:
        marks.append(pytest.mark.skip(reason=f"needs Python {min_version[0]}.{min_version[1]}+"))
    snippet = Snippet(source, args, kwargs, fn=fn, check=check, name=id)
    return pytest.param(snippet, id=id, marks=marks)


# --------------------------------------------------------------------------------------------------
# Running


@dataclasses.dataclass
class Outcome:
    """What one run did."""

    stdout: str
    kind: str  # "return" | "raise" | "iterator" | "coroutine"
    value: Any = None  # return value; for iterators/coroutines the final StopIteration value
    items: list[Any] = dataclasses.field(default_factory=list)  # produced/yielded items
    exception: Any = None  # description of the raised exception (see _describe_exception)
    traceback: str = ""  # where the exception came from; shown in messages, never compared

    def describe(self) -> list[str]:
        lines = [f"kind: {self.kind}"]
        if self.kind in ("iterator", "coroutine"):
            lines.append(f"items ({len(self.items)}):")
            lines.extend(f"  [{i}] {_safe_repr(item)}" for i, item in enumerate(self.items))
        if self.kind != "raise" or self.value is not None:
            lines.append(f"value: {_safe_repr(self.value)}")
        if self.exception is not None:
            lines.append("exception:")
            lines.extend("  " + line for line in _format_exception_description(self.exception))
        lines.append("stdout:")
        lines.extend("  | " + line for line in self.stdout.splitlines())
        return lines


def _safe_repr(value: Any) -> str:
    try:
        return _ADDRESS.sub("0x?", repr(value))
    except Exception as e:  # a broken __repr__ in a snippet
        return f"<repr failed: {type(e).__name__}: {e}>"


def _type_name(obj: Any) -> str:
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}"


def _describe_exception(exc: BaseException | None, depth: int = 0, seen: Any = None) -> Any:
    if exc is None:
        return None
    if seen is None:
        seen = set()
    if id(exc) in seen or depth > MAX_EXCEPTION_DEPTH:
        return ("...",)
    seen = seen | {id(exc)}
    try:
        message = _ADDRESS.sub("0x?", str(exc))
    except Exception as e:
        message = f"<str failed: {type(e).__name__}>"
    members = None
    group_type = getattr(__import__("builtins"), "BaseExceptionGroup", None)
    if group_type is not None and isinstance(exc, group_type):
        members = tuple(_describe_exception(m, depth + 1, seen) for m in exc.exceptions)
    return (
        _type_name(exc),
        message,
        ("cause", _describe_exception(exc.__cause__, depth + 1, seen)),
        ("context", _describe_exception(exc.__context__, depth + 1, seen)),
        ("suppress_context", exc.__suppress_context__),
        ("members", members),
    )


def _format_exception_description(desc: Any, indent: str = "") -> list[str]:
    if desc is None:
        return [indent + "None"]
    if desc == ("...",):
        return [indent + "..."]
    type_name, message, cause, context, suppress, members = desc
    lines = [f"{indent}{type_name}: {message}"]
    if cause[1] is not None:
        lines.append(indent + "  __cause__:")
        lines.extend(_format_exception_description(cause[1], indent + "    "))
    if context[1] is not None:
        lines.append(indent + "  __context__:")
        lines.extend(_format_exception_description(context[1], indent + "    "))
    if suppress[1]:
        lines.append(indent + "  __suppress_context__: True")
    if members[1] is not None:
        lines.append(indent + f"  members ({len(members[1])}):")
        for m in members[1]:
            lines.extend(_format_exception_description(m, indent + "    "))
    return lines


def _format_traceback(exc: BaseException) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(lines)
    return text if len(text) < 6000 else "...\n" + text[-6000:]


def _is_coroutine(value: Any) -> bool:
    return inspect.iscoroutine(value) or (
        hasattr(value, "send") and hasattr(value, "throw") and hasattr(value, "__await__")
    )


def _is_iterator(value: Any) -> bool:
    if inspect.isgenerator(value):
        return True
    if isinstance(value, (str, bytes, bytearray, list, tuple, dict, set, frozenset, range)):
        return False
    try:
        return hasattr(type(value), "__next__") and iter(value) is value
    except Exception:
        return False


def _consume(value: Any, outcome: Outcome) -> None:
    """Exhaust an iterator (or drive a coroutine), recording items, return value, exception."""
    step: Callable[[], Any]
    if _is_coroutine(value):
        outcome.kind = "coroutine"
        step = lambda: value.send(None)  # noqa: E731
    else:
        outcome.kind = "iterator"
        step = lambda: next(value)  # noqa: E731
    for _ in range(MAX_ITEMS):
        try:
            item = step()
        except StopIteration as stop:
            outcome.value = stop.value
            return
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            outcome.exception = _describe_exception(e)
            outcome.traceback = _format_traceback(e)
            return
        outcome.items.append(item)
    if hasattr(value, "close"):
        value.close()


SNIPPET_MODULE = "conformance_snippet"


def _load(source: str, fn: str, name: str) -> dict[str, Any]:
    """A fresh module holding the snippet, registered in sys.modules (dataclasses, pickle and
    typing look classes' modules up there) until the next snippet replaces it."""
    module = types.ModuleType(SNIPPET_MODULE)
    sys.modules[SNIPPET_MODULE] = module
    namespace: dict[str, Any] = module.__dict__
    code = compile(textwrap.dedent(source), f"<snippet {name}>", "exec")
    exec(code, namespace)
    if fn not in namespace:
        raise AssertionError(f"snippet {name!r} does not define {fn!r}")
    return namespace


def _run(
    source: str | Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    interpreted: bool,
    fn: str = "f",
    check: str | None = None,
    name: str = "snippet",
) -> Outcome:
    if callable(source):
        target = source
        namespace: dict[str, Any] = {}
    else:
        namespace = _load(source, fn, name)
        target = namespace[fn]
    args = copy.deepcopy(args)
    kwargs = copy.deepcopy(kwargs)
    buffer = io.StringIO()
    outcome = Outcome(stdout="", kind="return")
    with contextlib.redirect_stdout(buffer):
        try:
            # Everything inside the try: a failure to build the interpreted callable is an outcome.
            callee = _interpret(target) if interpreted else target
            value = callee(*args, **kwargs)
            if check is not None:
                value = namespace[check](value)
            if _is_iterator(value) or _is_coroutine(value):
                _consume(value, outcome)
            else:
                outcome.value = value
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            outcome.kind = "raise"
            outcome.exception = _describe_exception(e)
            outcome.traceback = _format_traceback(e)
    outcome.stdout = _ADDRESS.sub("0x?", buffer.getvalue())
    return outcome


def run_cpython(source: str | Callable[..., Any], *args: Any, **kwargs: Any) -> Outcome:
    return _run(source, args, kwargs, interpreted=False)


def run_interpreted(source: str | Callable[..., Any], *args: Any, **kwargs: Any) -> Outcome:
    return _run(source, args, kwargs, interpreted=True)


# --------------------------------------------------------------------------------------------------
# Comparing


def _equivalent(expected: Any, actual: Any) -> bool:
    if _type_name(expected) != _type_name(actual):
        return False
    if _safe_repr(expected) == _safe_repr(actual):
        return True
    try:
        return bool(expected == actual)
    except Exception:
        return False


def _differences(expected: Outcome, actual: Outcome) -> list[str]:
    problems = []
    if expected.kind != actual.kind:
        problems.append(f"kind differs: CPython {expected.kind}, interpreted {actual.kind}")
    if not _equivalent(expected.value, actual.value):
        problems.append("return value differs")
    if len(expected.items) != len(actual.items) or not all(
        _equivalent(a, b) for a, b in zip(expected.items, actual.items)
    ):
        problems.append("produced items differ")
    if expected.exception != actual.exception:
        problems.append("exception differs")
    if expected.stdout != actual.stdout:
        problems.append("stdout differs")
    return problems


def assert_same(
    expected: Outcome, actual: Outcome, name: str = "snippet", source: str = ""
) -> None:
    __tracebackhide__ = True
    problems = _differences(expected, actual)
    if not problems:
        return
    diff = difflib.unified_diff(
        expected.describe(), actual.describe(), "CPython", "interpreted", lineterm="", n=50
    )
    message = [f"{name}: " + "; ".join(problems)]
    if source:
        message += ["source:", textwrap.indent(textwrap.dedent(source).strip("\n"), "    ")]
    message += list(diff)
    if actual.exception is not None and actual.exception != expected.exception:
        message += ["traceback of the interpreted run:", textwrap.indent(actual.traceback, "    ")]
    raise AssertionError("\n".join(message))


def assert_ok(source: str | Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Run ``source`` (or a function) under CPython and under ``interpret``; assert they agree.

    Keyword arguments starting with an underscore configure the harness (``_fn``: the name of the
    function to call, default ``f``; ``_check``: the name of a post-processing function; ``_name``:
    the snippet's name in messages); the others are passed to the function.
    """
    __tracebackhide__ = True
    fn = kwargs.pop("_fn", "f")
    check = kwargs.pop("_check", None)
    name = kwargs.pop("_name", "snippet")
    expected = _run(source, args, kwargs, interpreted=False, fn=fn, check=check, name=name)
    actual = _run(source, args, kwargs, interpreted=True, fn=fn, check=check, name=name)
    assert_same(expected, actual, name, source if isinstance(source, str) else "")
