"""Code compiled per hook profile.

Compiled code is kept per code object and per *hook profile* (which callbacks are set, and
whether provenance is recorded): a compiled block calls the hooks that are set directly and tests
for none that is not. These tests run loops long enough for their blocks to be compiled (see
``conftest.py``), with one hook at a time and with the profiles interleaved on the same code,
and check that every hook call the single ops make is still made, with the same arguments.
"""

from __future__ import annotations

import traceback
from typing import Any

import pytest

from thunder_interp import Callbacks, ProvenanceKind, interpret

N = 40
OFFSET = 100


class Box:
    def __init__(self, value: int) -> None:
        self.value = value

    @property
    def doubled(self) -> int:
        return 2 * self.value


class Sized:
    def __init__(self, n: Any) -> None:
        self.n = n

    def __len__(self) -> Any:
        return self.n


def _loop(box: Box, table: dict[int, int], n: int) -> list[Any]:
    out = []
    for i in range(n):
        table[i] = box.value + OFFSET + 7
        box.value = i
        out.append((abs(-i), divmod(i, 3), len(out), box.doubled, box is table))
    return out


def _expected(n: int) -> list[Any]:
    return _loop(Box(1), {}, n)


def _recording(names: list[str], calls: list[tuple[Any, ...]]) -> Callbacks:
    """Callbacks with the hooks ``names``, each recording its call and passing values through."""

    def make(name: str) -> Any:
        def hook(*args: Any) -> Any:
            calls.append((name, *args))
            if name == "opaque_call":
                fn, fn_args, kwargs = args
                return fn(*fn_args, **kwargs)
            if name in ("load_global", "load_closure_cell"):
                return args[1]
            if name == "load_constant":
                return args[0]
            if name in ("load_attribute", "load_generic_attribute"):
                return args[2]
            return None

        return hook

    return Callbacks(**{name: make(name) for name in names})


ONE_AT_A_TIME = [
    "load_global",
    "load_constant",
    "load_attribute",
    "store_attribute",
    "store_item",
    "opaque_call",
    "compare_identity",
    "special_lookup",
]


def _events(name: str, calls: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [c[1:] for c in calls if c[0] == name]


@pytest.mark.parametrize("name", ONE_AT_A_TIME)
def test_one_hook_sees_every_event_of_a_compiled_loop(name: str) -> None:
    calls: list[tuple[Any, ...]] = []
    box, table = Box(1), {}
    assert interpret(_loop, callbacks=_recording([name], calls))(box, table, N) == _expected(N)
    events = _events(name, calls)
    if name == "load_global":
        assert [e[0] for e in events].count("OFFSET") == N
        assert [e[0] for e in events].count("abs") == N
        assert all(e[3] is None for e in events)  # no provenance
    elif name == "load_constant":
        assert [e[0] for e in events].count(7) == N
        assert all(e[1] is None for e in events)
    elif name == "load_attribute":
        # box.value, box.doubled, self.value inside the property, out.append
        assert [e[1] for e in events].count("value") == 2 * N
        assert [e[1] for e in events].count("doubled") == N
        assert all(e[3] is None for e in events)
    elif name == "store_attribute":
        assert [(e[1], e[2]) for e in events] == [("value", i) for i in range(N)]
    elif name == "store_item":
        assert [(e[1], e[2]) for e in events] == [
            (i, OFFSET + 7 + max(i - 1, 0) + (i == 0)) for i in range(N)
        ]
    elif name == "opaque_call":
        called = [e[0] for e in events]
        assert called.count(abs) == N and called.count(divmod) == N and called.count(len) == N
        assert all(type(e[1]) is tuple and e[2] == {} for e in events)
        assert (abs, (-3,), {}) in events and (divmod, (5, 3), {}) in events
    elif name == "compare_identity":
        assert len(events) == N and all(e[2] is False for e in events)
    elif name == "special_lookup":
        assert ("doubled" not in [e[1] for e in events]) and len(events) >= N


def test_profiles_interleaved_on_the_same_code_each_see_their_hooks() -> None:
    profiles = [["load_global"], [], ["load_attribute", "opaque_call"], ["load_global"], []]
    for names in profiles * 2:
        calls: list[tuple[Any, ...]] = []
        result = interpret(_loop, callbacks=_recording(names, calls) if names else None)(
            Box(1), {}, N
        )
        assert result == _expected(N)
        assert {c[0] for c in calls} == set(names)
    for _ in range(2):
        interpreted = interpret(_loop, provenance=True)
        box = Box(1)
        interpreted(box, {}, N)
        record = interpreted.provenance_of(OFFSET)
        assert record is not None and record.kind is ProvenanceKind.GLOBAL


class _Sparse:
    __slots__ = ("present",)

    def __init__(self) -> None:
        self.present = 1


def _probe(obj: Any, n: int) -> int:
    misses = 0
    for _ in range(n):
        try:
            obj.absent  # noqa: B018
        except AttributeError:
            misses += obj.present
    return misses


def test_missing_attribute_hook_alone_in_a_compiled_block() -> None:
    missing: list[tuple[Any, str]] = []
    obj = _Sparse()
    hooks = Callbacks(load_attribute_missing=lambda o, name: missing.append((o, name)))
    assert interpret(_probe, callbacks=hooks)(obj, N) == N
    assert missing == [(obj, "absent")] * N


def _raise_late(box: Box, n: int) -> int:
    total = 0
    for i in range(n):
        if i == n - 1:
            box = None  # type: ignore[assignment]
        total += box.value  # LINE: late attribute error
    return total


def test_attribute_error_in_a_hooked_block_reports_its_line() -> None:
    missing: list[str] = []
    hooks = Callbacks(
        load_attribute=lambda o, name, value, prov: value,
        load_attribute_missing=lambda o, name: missing.append(name),
    )
    with pytest.raises(AttributeError) as info:
        interpret(_raise_late, callbacks=hooks)(Box(2), N)
    frames = traceback.extract_tb(info.value.__traceback__)
    line = next(
        i + 1
        for i, text in enumerate(open(__file__).read().splitlines())  # noqa: SIM115
        if text.endswith("# LINE: late attribute error")
    )
    assert (__file__, line) in [(fr.filename, fr.lineno) for fr in frames]
    assert missing == ["value"]


def test_len_under_the_opaque_hook() -> None:
    seen: list[Any] = []

    def opaque_call(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        seen.append(fn)
        return fn(*args, **kwargs)

    def f(items: list[Any]) -> list[Any]:
        out = []
        for item in items:
            try:
                out.append(len(item))
            except Exception as e:  # noqa: BLE001
                out.append(type(e).__name__)
        return out

    items = [Sized(3), [1, 2], Sized(-1), Sized("x"), Sized(True), "abc"] * 6
    interpreted = interpret(f, callbacks=Callbacks(opaque_call=opaque_call))
    assert interpreted(items) == f(items)
    # Python __len__ runs interpreted; plain values are opaque calls of len.
    assert seen.count(len) == 12


class _Finalized:
    def __init__(self, value: int) -> None:
        self.value = value

    def __del__(self) -> None:
        pass


def test_instances_with_a_finalizer_are_made_by_an_opaque_call_at_compiled_sites() -> None:
    # Their death runs code: the hook hears of each one's creation; other instances are made
    # without it.
    made: list[Any] = []

    def opaque_call(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if fn is object.__new__:
            made.append(args[0])
        return fn(*args, **kwargs)

    def f(n: int) -> int:
        return sum(_Finalized(i).value + Box(i).value for i in range(n))

    assert interpret(f, callbacks=Callbacks(opaque_call=opaque_call))(N) == f(N)
    assert made == [_Finalized] * N


def _generator(n: int) -> Any:
    for i in range(n):
        try:
            yield i
        except KeyError:
            yield "caught"


def test_statement_yields_resumed_by_sends_throws_and_close() -> None:
    def drive(make: Any) -> list[Any]:
        gen = make(N)
        out = [next(gen)]
        for k in range(N // 2):
            out.append(gen.send(k * 10))  # discarded by the generator
        out.append(gen.throw(KeyError("k")))
        out.append(next(gen))
        gen.close()
        return out

    for callbacks in (None, Callbacks(load_global=lambda n, v, g, p: v)):
        interpreted = interpret(lambda n: _generator(n), callbacks=callbacks)
        assert drive(interpreted) == drive(_generator)


def _uncaught(n: int) -> Any:
    for i in range(n):
        yield -i  # LINE: uncaught throw


def test_a_throw_after_resumes_past_the_value_is_raised_at_the_yield() -> None:
    gen = interpret(_uncaught)(N)
    for _ in range(N // 2):
        next(gen)
    with pytest.raises(ValueError) as info:
        gen.throw(ValueError("v"))
    line = next(
        i + 1
        for i, text in enumerate(open(__file__).read().splitlines())  # noqa: SIM115
        if text.endswith("# LINE: uncaught throw")
    )
    assert line in [fr.lineno for fr in traceback.extract_tb(info.value.__traceback__)]


def test_builtins_of_the_function_in_compiled_blocks() -> None:
    namespace: dict[str, Any] = {"__builtins__": {"len": lambda x: 42, "range": range}}
    exec(  # noqa: S102
        "def f(n):\n    total = 0\n    for i in range(n):\n        total += len(i)\n    return total\n",
        namespace,
    )
    f = namespace["f"]
    assert interpret(f)(N) == f(N) == 42 * N
    with pytest.raises(NameError):
        interpret(lambda n: [undefined_name for _ in range(n)])(N)  # type: ignore[name-defined]  # noqa: F821


def test_classes_called_at_compiled_sites_keep_their_lookasides() -> None:
    def f(n: int) -> list[Any]:
        return [Box(i).value for i in range(n)]

    assert interpret(f)(N) == list(range(N))
    replaced = interpret(f, lookasides={Box: lambda v: Box(v + 1)})
    assert replaced(N) == list(range(1, N + 1))
