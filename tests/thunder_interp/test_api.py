"""The public API of thunder_interp: lookasides, callbacks, provenance, history, errors."""

from __future__ import annotations

import dis
import functools
import threading
import traceback
from typing import Any

import pytest

from thunder_interp import (
    DEFAULT_OPCODE_TABLE,
    Callbacks,
    InterpreterError,
    Provenance,
    ProvenanceKind,
    UnsupportedOpcodeError,
    interpret,
    provenance_of,
    running_line,
    uncatchable,
)

CONFIG = {"scale": 3}
OFFSET = 10


class Box:
    def __init__(self, value: Any) -> None:
        self.value = value
        self.items = [value, value + 1]


# -- basic contract ------------------------------------------------------------------------------


def test_interpret_returns_result_and_accepts_kwargs() -> None:
    def f(a: int, b: int = 2, *, c: int = 3) -> int:
        return a * 100 + b * 10 + c

    assert interpret(f)(1) == 123
    assert interpret(f)(1, 5, c=7) == 157


def test_interpret_raises_user_exception() -> None:
    def f(x: int) -> float:
        return 1 / x

    with pytest.raises(ZeroDivisionError):
        interpret(f)(0)


def test_interpret_methods_partials_and_classes() -> None:
    class Adder:
        def __init__(self, base: int) -> None:
            self.base = base

        def add(self, x: int) -> int:
            return self.base + x

    def add3(a: int, b: int, c: int) -> int:
        return a + b + c

    assert interpret(Adder(1).add)(2) == 3
    assert interpret(functools.partial(add3, 1, 2))(3) == 6
    assert interpret(Adder)(5).base == 5


# -- lookasides -----------------------------------------------------------------------------------


def test_lookaside_replaces_callable_in_nested_calls() -> None:
    def inner(x: int) -> int:
        return abs(x)

    def f(x: int) -> int:
        return inner(x) + abs(x)

    calls: list[int] = []

    def fake_abs(x: int) -> int:
        calls.append(x)
        return 1000

    assert interpret(f, lookasides={abs: fake_abs})(-2) == 2000
    assert calls == [-2, -2]


def test_lookaside_can_replace_python_function() -> None:
    def helper(x: int) -> int:
        return x + 1

    def f(x: int) -> int:
        return helper(x) * 2

    assert interpret(f, lookasides={helper: lambda x: x - 1})(5) == 8


def test_reentrant_interpret_inside_lookaside() -> None:
    seen_globals: list[str] = []

    def body(x: int) -> int:
        return x * OFFSET

    def higher_order(fn: Any, x: int) -> int:
        return fn(x) + 1

    def replacement(fn: Any, x: int) -> int:
        # A binding layer would interpret the user callable into a sub-trace.
        inner = interpret(
            fn, callbacks=Callbacks(load_global=lambda n, v, g, p: seen_globals.append(n) or v)
        )
        return inner(x) + 1

    def f(x: int) -> int:
        return higher_order(body, x)

    assert interpret(f, lookasides={higher_order: replacement})(4) == 41
    assert seen_globals == ["OFFSET"]


def test_user_lookaside_overrides_default() -> None:
    def f() -> Any:
        return locals()

    assert interpret(f, lookasides={locals: lambda: {"replaced": True}})() == {"replaced": True}


def test_default_lookasides_see_interpreted_frame() -> None:
    class Base:
        def hello(self) -> str:
            return "base"

    class Child(Base):
        def hello(self) -> str:
            return "child+" + super().hello()

    def f(a: int) -> Any:
        b = a + 1
        return sorted(locals().items()), Child().hello(), globals() is f.__globals__

    result = interpret(f)(1)
    assert result == f(1)
    assert ("a", 1) in result[0] and ("b", 2) in result[0]
    assert result[1:] == ("child+base", True)


# -- callbacks ------------------------------------------------------------------------------------


def test_load_global_callback_args_and_replacement() -> None:
    events: list[tuple[Any, ...]] = []

    def on_global(name: str, value: Any, globals_: dict[str, Any], prov: Provenance | None) -> Any:
        events.append((name, value, globals_ is globals(), prov))
        return 5 if name == "OFFSET" else value

    def f(x: int) -> int:
        return x + OFFSET

    assert interpret(f, callbacks=Callbacks(load_global=on_global))(1) == 6
    assert events == [("OFFSET", 10, True, None)]


def test_load_builtin_fires_load_global() -> None:
    names: list[str] = []

    def f(xs: list[int]) -> int:
        return len(xs)

    cb = Callbacks(load_global=lambda n, v, g, p: names.append(n) or v)
    assert interpret(f, callbacks=cb)([1, 2]) == 2
    assert names == ["len"]


def test_load_closure_cell_callback() -> None:
    events: list[tuple[str, Any, str]] = []

    def make() -> Any:
        secret = 7

        def g() -> int:
            return secret * 2

        return g

    def hook(name: str, value: Any, code: Any, prov: Any, cell: Any) -> Any:
        events.append((name, value, code.co_name))
        assert cell.cell_contents == value  # the cell itself: one def makes many closures
        return 100

    g = make()
    assert interpret(g, callbacks=Callbacks(load_closure_cell=hook))() == 200
    assert events == [("secret", 7, "g")]


def test_load_constant_callback() -> None:
    seen: list[Any] = []

    def f() -> int:
        return 40 + 2

    def hook(value: Any, prov: Any) -> Any:
        seen.append(value)
        return value

    assert interpret(f, callbacks=Callbacks(load_constant=hook))() == 42
    assert 42 in seen or 40 in seen


def test_load_attribute_callback_and_getattr() -> None:
    events: list[tuple[str, Any]] = []

    def hook(obj: Any, name: str, value: Any, prov: Any) -> Any:
        events.append((name, value))
        return value * 10 if name == "value" else value

    def f(b: Box) -> Any:
        return b.value, getattr(b, "value"), hasattr(b, "missing")

    assert interpret(f, callbacks=Callbacks(load_attribute=hook))(Box(2)) == (20, 20, False)
    assert events == [("value", 2), ("value", 2)]


def test_store_callbacks() -> None:
    events: list[tuple[Any, ...]] = []
    cb = Callbacks(
        store_global=lambda n, v, g: events.append(("global", n, v)),
        store_closure_cell=lambda n, v, code, cell: events.append(("cell", n, v)),
        store_attribute=lambda o, n, v: events.append(("attr", type(o).__name__, n, v)),
        store_item=lambda c, k, v: events.append(("item", type(c).__name__, k, v)),
    )

    def f(b: Box) -> int:
        global _STORED
        _STORED = 1
        counter = 0

        def bump() -> None:
            nonlocal counter
            counter += 5

        bump()
        b.value = 9
        setattr(b, "other", 3)
        b.items[0] = 7
        return counter

    box = Box(0)
    assert interpret(f, callbacks=cb)(box) == 5
    assert box.value == 9 and box.other == 3  # type: ignore[attr-defined]
    assert events == [
        ("global", "_STORED", 1),
        ("cell", "counter", 0),
        ("cell", "counter", 5),
        ("attr", "Box", "value", 9),
        ("attr", "Box", "other", 3),
        ("item", "list", 0, 7),
    ]


def test_opaque_call_callback_wraps_c_calls() -> None:
    calls: list[str] = []

    def wrap(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        calls.append(getattr(fn, "__name__", "?"))
        result = fn(*args, **kwargs)
        return result + 1 if fn is len else result

    def helper(xs: list[int]) -> int:
        return len(xs)

    def f(xs: list[int]) -> int:
        return helper(xs) + max(xs)

    assert interpret(f, callbacks=Callbacks(opaque_call=wrap))([1, 5]) == 8
    assert calls == ["len", "max"]


# -- provenance -----------------------------------------------------------------------------------


def test_provenance_of_args_items_attrs() -> None:
    paths: dict[str, str] = {}

    def record(obj: Any, name: str, value: Any, prov: Provenance | None) -> Any:
        assert prov is not None
        paths[name] = prov.path()
        return value

    def f(a: Box, b: dict[str, Any]) -> Any:
        v = a.value
        first = a.items[1]
        x, y = b["pair"]
        return v, first, x, y

    interp = interpret(f, provenance=True, callbacks=Callbacks(load_attribute=record))
    box = Box(1000)
    d = {"pair": (object(), object())}
    result = interp(box, b=d)
    assert paths == {"value": "args[0].value", "items": "args[0].items"}
    p_first = interp.provenance_of(result[1])
    assert p_first is not None and p_first.path() == "args[0].items[1]"
    p_x = interp.provenance_of(result[2])
    assert p_x is not None and p_x.path() == "kwargs['b']['pair'][0]"
    assert p_x.root().kind is ProvenanceKind.ARGUMENT and p_x.root().name == "b"


def test_provenance_of_globals_cells_constants_opaque() -> None:
    seen: dict[str, str] = {}

    def make() -> Any:
        cell_value = object()

        def g() -> Any:
            table = CONFIG
            item = table["scale"]
            made = list(range(3))
            return cell_value, table, item, made

        return g

    def on_cell(name: str, value: Any, code: Any, prov: Provenance | None, cell: Any) -> Any:
        assert prov is not None
        seen[name] = prov.path()
        return value

    interp = interpret(make(), provenance=True, callbacks=Callbacks(load_closure_cell=on_cell))
    cell_value, table, item, made = interp()
    assert seen["cell_value"].endswith("make.<locals>.g.<closure>.cell_value")
    p_table = interp.provenance_of(table)
    assert p_table is not None and p_table.kind is ProvenanceKind.GLOBAL
    assert p_table.path() == f"{__name__}.CONFIG"
    p_item = interp.provenance_of(item)
    assert p_item is not None
    p_made = interp.provenance_of(made)
    assert p_made is not None and p_made.kind is ProvenanceKind.OPAQUE_CALL
    assert p_made.path() == "list(...)"
    p_cell = interp.provenance_of(cell_value)
    assert p_cell is not None and p_cell.kind is ProvenanceKind.CLOSURE_CELL


def test_provenance_of_inside_lookaside() -> None:
    found: list[str] = []

    def sink(x: Any) -> Any:
        return x

    def spy(x: Any) -> Any:
        prov = provenance_of(x)
        found.append(prov.path() if prov is not None else "?")
        return x

    def f(b: Box) -> Any:
        return sink(b.items)

    interpret(f, provenance=True, lookasides={sink: spy})(Box(1))
    assert found == ["args[0].items"]
    assert provenance_of(object()) is None


def test_provenance_off_gives_none() -> None:
    def f(b: Box) -> Any:
        return b.items

    interp = interpret(f)
    items = interp(Box(1))
    assert interp.provenance_of(items) is None


# -- history ------------------------------------------------------------------------------------


def test_record_history() -> None:
    def inner(x: int) -> int:
        return x + 1

    def f(x: int) -> int:
        return inner(x) * 2

    interp = interpret(f, record_history=True)
    assert interp(1) == 4
    history = interp.history
    opnames = [e.opname for e in history]
    assert "RETURN_VALUE" in opnames or "RETURN_CONST" in opnames
    assert {e.function for e in history} == {"f", "inner"}
    assert any(e.depth == 1 and e.function == "inner" for e in history)
    log = interp.format_history()
    assert "call inner" in log and "call f" in log  # calls name their function
    assert all(e.filename == __file__ for e in history)


def test_history_depth_counts_frames() -> None:
    # Calls of classes and callable objects count twice toward 3.10/3.11's recursion limit; the
    # history's depth counts frames on every version.
    class Box:
        def __init__(self) -> None:
            self.value = 1

        def __call__(self) -> int:
            return self.value

    def f() -> int:
        return Box()()

    interp = interpret(f, record_history=True)
    assert interp() == 1
    depths = {(e.function, e.depth) for e in interp.history}
    assert depths == {("f", 0), ("__init__", 1), ("__call__", 1)}


def test_history_off_by_default() -> None:
    def f() -> int:
        return 1

    interp = interpret(f)
    interp()
    assert interp.history == []


# -- isolation ---------------------------------------------------------------------------------


def test_nested_interpretations_do_not_share_state() -> None:
    outer_events: list[str] = []
    inner_events: list[str] = []

    def g() -> int:
        return OFFSET

    def run_inner() -> int:
        return interpret(
            g, callbacks=Callbacks(load_global=lambda n, v, gl, p: inner_events.append(n) or v)
        )()

    def f() -> int:
        return run_inner() + OFFSET

    interp = interpret(
        f,
        callbacks=Callbacks(load_global=lambda n, v, gl, p: outer_events.append(n) or v),
        lookasides={run_inner: run_inner},
        record_history=True,
    )
    assert interp() == 20
    assert outer_events == ["OFFSET"]
    assert inner_events == ["OFFSET"]
    assert {e.function for e in interp.history} == {"f"}


def test_concurrent_interpretations_in_threads() -> None:
    def work(n: int) -> int:
        total = 0
        for i in range(n):
            total += i
        return total

    results: dict[int, int] = {}

    def run(n: int) -> None:
        interp = interpret(work, provenance=True, record_history=True)
        results[n] = interp(n)
        assert all(e.function == "work" for e in interp.history)

    threads = [threading.Thread(target=run, args=(n,)) for n in (100, 200, 300, 400)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {n: n * (n - 1) // 2 for n in (100, 200, 300, 400)}


def test_generators_keep_their_interpretation() -> None:
    names: list[str] = []

    def gen(n: int) -> Any:
        for i in range(n):
            yield i + OFFSET

    def f() -> Any:
        return gen(2)

    g = interpret(f, callbacks=Callbacks(load_global=lambda n, v, gl, p: names.append(n) or v))()
    assert list(g) == [10, 11]
    assert names.count("OFFSET") == 2


# -- tracebacks and errors -------------------------------------------------------------------------


def _raiser(x: int) -> int:
    if x > 0:
        raise ValueError("boom")  # LINE: raise
    return x


def _caller(x: int) -> int:
    return _raiser(x) + 1  # LINE: call


def _line_of(marker: str) -> int:
    with open(__file__) as fh:
        for number, line in enumerate(fh, start=1):
            if line.rstrip().endswith("# LINE: " + marker):
                return number
    raise AssertionError(marker)


def test_traceback_has_user_file_and_lines() -> None:
    with pytest.raises(ValueError) as info:
        interpret(_caller)(1)
    frames = traceback.extract_tb(info.value.__traceback__)
    user = [(fr.filename, fr.lineno, fr.name) for fr in frames if fr.filename == __file__]
    assert (__file__, _line_of("call"), "_caller") in user
    assert (__file__, _line_of("raise"), "_raiser") in user
    text = "".join(traceback.format_exception(info.value))
    assert 'raise ValueError("boom")' in text


def test_unsupported_opcode_error_names_opcode_and_location() -> None:
    table = dict(DEFAULT_OPCODE_TABLE)
    del table["BINARY_OP" if "BINARY_OP" in dis.opmap else "BINARY_ADD"]

    def f(x: int) -> int:
        y = x + 1  # LINE: unsupported
        return y

    with pytest.raises(UnsupportedOpcodeError) as info:
        interpret(f, opcode_table=table)(1)
    message = str(info.value)
    assert "BINARY_" in message
    assert f"{__file__}:{_line_of('unsupported')}" in message
    assert isinstance(info.value, InterpreterError)


def test_interpreter_errors_bypass_user_except() -> None:
    table = dict(DEFAULT_OPCODE_TABLE)
    del table["BUILD_SET"]

    def f() -> str:
        try:
            return str({1, 2})
        except Exception:
            return "swallowed"

    with pytest.raises(UnsupportedOpcodeError):
        interpret(f, opcode_table=table)()


def test_hand_built_code_with_unknown_handler() -> None:
    def f() -> int:
        return 1

    table = {k: v for k, v in DEFAULT_OPCODE_TABLE.items() if not k.startswith("RETURN")}
    with pytest.raises(UnsupportedOpcodeError, match="RETURN"):
        interpret(f, opcode_table=table)()


# -- compiled basic blocks -------------------------------------------------------------------------


@pytest.fixture
def eager_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compile basic blocks on first use (normally only warm code gets them)."""
    import thunder_interp._blocks as blocks
    import thunder_interp._runtime as runtime

    monkeypatch.setattr(runtime, "WARM_THRESHOLD", 0)
    monkeypatch.setattr(blocks, "HOT_THRESHOLD", 1)


def _hot_loop(xs: list[int]) -> list[int]:
    out = []
    for x in xs:
        try:
            out.append(10 // x + len(out))  # LINE: hot division
        except ZeroDivisionError:
            out.append(-1)
    return out


def _hot_loop_raising(xs: list[int]) -> int:
    total = 0
    for x in xs:
        total += 100 // x  # LINE: hot raise
    return total


@pytest.mark.usefixtures("eager_blocks")
def test_blocks_keep_exception_semantics() -> None:
    xs = [1, 2, 0, 5, 0, 3]
    assert interpret(_hot_loop)(xs) == _hot_loop(xs)


@pytest.mark.usefixtures("eager_blocks")
def test_blocks_report_the_faulting_line() -> None:
    with pytest.raises(ZeroDivisionError) as info:
        interpret(_hot_loop_raising)([1, 2, 3, 0])
    frames = traceback.extract_tb(info.value.__traceback__)
    assert (__file__, _line_of("hot raise")) in [(fr.filename, fr.lineno) for fr in frames]
    assert all("generated block" not in fr.filename for fr in frames)


def test_warm_loop_gets_compiled_and_stays_correct() -> None:
    def f(n: int) -> int:
        s = 0
        i = 0
        while i < n:
            s += i * i % 7
            i += 1
        return s

    interp = interpret(f)
    assert interp(1000) == f(1000)
    assert interp(1001) == f(1001)


def test_provenance_of_iterated_items() -> None:
    class Model:
        def __init__(self) -> None:
            self.layers = [object(), object(), object()]

    def f(m: Model) -> list[Any]:
        out = []
        for layer in m.layers:
            out.append(layer)
        return out

    interp = interpret(f, provenance=True)
    layers = interp(Model())
    paths = [p.path() if (p := interp.provenance_of(x)) is not None else None for x in layers]
    assert paths == ["args[0].layers[0]", "args[0].layers[1]", "args[0].layers[2]"]


@pytest.mark.usefixtures("eager_blocks")
def test_hooks_fire_inside_compiled_blocks() -> None:
    events: list[str] = []

    def f(b: Box, n: int) -> int:
        total = 0
        for i in range(n):
            total += b.value + OFFSET + b.items[1]
        return total

    cb = Callbacks(
        load_global=lambda n, v, g, p: events.append("global:" + n) or v,
        load_attribute=lambda o, n, v, p: events.append("attr:" + n) or v,
    )
    interp = interpret(f, callbacks=cb, provenance=True)
    assert interp(Box(1), 3) == f(Box(1), 3)
    assert events.count("global:OFFSET") == 3
    assert events.count("attr:value") == 3 and events.count("attr:items") == 3


def test_errors_marked_uncatchable_bypass_the_programs_except_clauses():
    @uncatchable
    class Limit(Exception):
        pass

    def boom():
        raise Limit("no")

    def program():
        try:
            boom()
        except Exception:
            return "swallowed"
        return "not reached"

    assert program.__name__ == "program"
    with pytest.raises(Limit):
        interpret(program)()


def test_uncatchable_covers_subclasses_and_leaves_other_errors_catchable() -> None:
    @uncatchable
    class Refusal(Exception):
        pass

    class Specific(Refusal, ValueError):
        pass

    def program(exc: BaseException) -> str:
        try:
            raise exc
        except Exception:
            return "swallowed"

    with pytest.raises(Specific):
        interpret(program)(Specific("no"))
    assert interpret(program)(ValueError("plain")) == "swallowed"
    # The interpreter's own errors are marked the same way.
    with pytest.raises(InterpreterError):
        interpret(program)(InterpreterError("refused"))
    with pytest.raises(TypeError, match="exception class"):
        uncatchable(int)  # type: ignore[type-var]


def test_running_line_is_the_line_of_the_innermost_frame_not_skipped() -> None:
    # A "library" whose frames are skipped: its note() asks where the program is.
    library: dict[str, Any] = {"running_line": running_line, "seen": []}
    exec(
        compile(
            "def note():\n    seen.append(running_line(lambda f: f == '<library>'))\n",
            "<library>",
            "exec",
        ),
        library,
    )
    note = library["note"]

    def program() -> int:
        x = 1
        note()  # the line noted
        return x

    assert interpret(program)() == 1
    first = program.__code__.co_firstlineno
    assert library["seen"] == [(program.__code__.co_filename, first + 2)]
    # Nothing skipped: the innermost frame, the library's own line.
    library["seen"].clear()
    exec(
        compile(
            "def note():\n    seen.append(running_line(lambda f: False))\n", "<library>", "exec"
        ),
        library,
    )
    note = library["note"]
    assert interpret(program)() == 1
    assert library["seen"] == [("<library>", 2)]


def test_history_records_calls_lines_and_returns() -> None:
    def inner(a: int) -> int:
        b = a * 2
        return b + 1

    def f(x: int) -> list[Any]:
        y = inner(x)
        return [y, str(y)]

    interp = interpret(f, record_history=True)
    assert interp(3) == [7, "7"]
    history = interp.history
    calls = [(e.function, e.depth) for e in history if e.kind == "call"]
    assert calls == [("f", 0), ("inner", 1)]
    returns = [(e.function, e.text, e.depth) for e in history if e.kind == "return"]
    assert returns == [("inner", "int", 1), ("f", "list", 0)]
    lines = [e.text for e in history if e.kind == "line" and e.function == "inner"]
    assert "b = a * 2" in lines and "return b + 1" in lines
    log = interp.format_history(instructions=False)
    assert "  call inner" in log and "  return int from inner" in log
    assert "RETURN_VALUE" not in log and "RETURN_VALUE" in interp.format_history()


def test_history_shows_interpreted_dunders() -> None:
    class B:
        def __bool__(self) -> bool:
            return False

    def f() -> int:
        return 1 if B() else 2

    interp = interpret(f, record_history=True)
    assert interp() == 2
    assert ("__bool__", 1) in [(e.function, e.depth) for e in interp.history if e.kind == "call"]


def test_native_special_predicate_keeps_chosen_special_methods_native() -> None:
    from thunder_interp import is_interpreting

    class M:
        def __getitem__(self, key: Any) -> Any:
            return (key, is_interpreting())

        @property
        def prop(self) -> bool:
            return is_interpreting()

    def f(m: M) -> Any:
        return m["k"], m.prop, m.__getitem__("e")

    m = M()
    assert interpret(f)(m) == (("k", True), True, ("e", True))
    native = interpret(f, native_special=lambda fn: fn.__name__ == "__getitem__")
    # Implicit calls it accepts run natively; properties and explicit calls are interpreted.
    assert native(m) == (("k", False), True, ("e", True))


def test_load_item_missing_callback() -> None:
    missing: list[Any] = []

    def f(d: dict[str, int]) -> int:
        try:
            return d["absent"]
        except KeyError:
            return -1

    cb = Callbacks(load_item_missing=lambda c, k: missing.append(k))
    assert interpret(f, callbacks=cb)({"present": 1}) == -1
    assert missing == ["absent"]


def test_generic_reads_in_a_custom_getattribute_have_their_own_hooks() -> None:
    class Aliased:
        def __init__(self) -> None:
            self.real = 3

        def __getattribute__(self, name: str) -> Any:
            return super().__getattribute__("real" if name == "alias" else name)

    def f(a: Aliased) -> Any:
        return a.alias, hasattr(a, "missing")

    seen: list[tuple[str, str]] = []

    def note(obj: Any, kind: str, name: str) -> None:
        if type(obj) is Aliased:  # not the reads of the super() object itself
            seen.append((kind, name))

    callbacks = Callbacks(
        load_attribute=lambda o, n, v, p: (note(o, "attr", n), v)[1],
        load_attribute_missing=lambda o, n: note(o, "attr missing", n),
        load_generic_attribute=lambda o, n, v, p: (note(o, "generic", n), v)[1],
        load_generic_attribute_missing=lambda o, n: note(o, "generic missing", n),
    )
    assert interpret(f, callbacks=callbacks)(Aliased()) == (3, False)
    assert seen == [
        ("generic", "real"),
        ("attr", "alias"),
        ("generic missing", "missing"),
        ("attr missing", "missing"),
    ]
    # Without the generic hooks, the plain ones see those reads too.
    seen.clear()
    plain = Callbacks(
        load_attribute=lambda o, n, v, p: (note(o, "attr", n), v)[1],
        load_attribute_missing=lambda o, n: note(o, "attr missing", n),
    )
    assert interpret(f, callbacks=plain)(Aliased()) == (3, False)
    assert seen == [
        ("attr", "real"),
        ("attr", "alias"),
        ("attr missing", "missing"),
        ("attr missing", "missing"),
    ]


def test_called_below_a_frame_whose_code_cannot_be_hashed() -> None:
    # torch.compile generates code objects with a dict among their constants: the interpreter
    # walks the real frames below it to count the depth, and must not hash them.
    import types

    def inner(a: int) -> int:
        return a * 2

    def outer(a: int) -> int:
        return interpret(inner)(a)

    code = outer.__code__.replace(co_consts=(*outer.__code__.co_consts, {"k": 1}))
    with pytest.raises(TypeError):
        hash(code)
    made = types.FunctionType(code, outer.__globals__, "outer", None, outer.__closure__)
    assert made(21) == 42


def test_make_cell_reports_the_cells_the_program_makes() -> None:
    made: list[Any] = []
    outside = [1]

    def f() -> int:
        x = 2

        def g() -> int:
            return x + outside[0]

        return g()

    assert interpret(f, callbacks=Callbacks(make_cell=made.append))() == 3
    assert len(made) == 1 and made[0].cell_contents == 2
