"""Basic-block compilation: a straight-line run of simple instructions becomes one generated function.

The op at the first index of such a run is replaced by a generated Python function that executes
the whole run with the value stack held in Python locals, and returns the next instruction index
like any op. The ops of the other instructions of the run stay in place, so a jump into the middle
of a run still executes correctly (one instruction at a time).

Exceptions: every generated line belongs to one instruction (``block_owners``); when a generated
function raises, the dispatch loop maps the traceback line back to the faulting instruction, so
exception-table lookup, ``lasti`` and tracebacks see the instruction that raised. A run never
spans two exception-table entries, and within one entry CPython's stack never drops below the
handler's depth, so values kept in Python locals are never ones a handler needs.
"""

from __future__ import annotations

import keyword
import os
import re
from collections.abc import Callable
from types import FunctionType, MethodType, TracebackType
from typing import Any, cast

from thunder_interp._bytecode import ExceptionHandler, Instruction
from thunder_interp._frame import NULL, Frame
from thunder_interp._lookasides import attribute_loaded
from thunder_interp._provenance import Provenance, ProvenanceKind
from thunder_interp._registry import PY_VERSION, Op
from thunder_interp._runtime import enter_frame
from thunder_interp._slots import (
    FAST_CONTAINERS,
    PLAIN,
    PLAIN_ATTRS,
    PLAIN_VALUES,
    binary,
    compare,
    contains,
    get_item,
    next_item,
    plain_reads,
    plain_writes,
    set_item,
    store_attr,
    truth,
    unary,
)
from thunder_interp.ops._common import unbound_local
from thunder_interp.ops.arith import identical
from thunder_interp.ops.calls import (
    call_at_site,
    call_null_first,
    call_positional,
    call_self_second,
)
from thunder_interp.ops.control import iterated
from thunder_interp.ops.generators import Returned, sent
from thunder_interp.ops.locals import load_constant_hooked
from thunder_interp.ops.names import (
    _load_global_value,
    attribute_value,
    load_attribute,
    load_item,
)

__all__ = ["block_fault_index", "compile_blocks"]

_FILENAME = os.path.join(os.path.dirname(os.path.abspath(__file__)), "<generated block>")

_SKIPPABLE = frozenset({"NOP", "RESUME", "PRECALL", "EXTENDED_ARG"})

_BINARY_310 = {
    "BINARY_ADD": "+",
    "BINARY_AND": "&",
    "BINARY_FLOOR_DIVIDE": "//",
    "BINARY_LSHIFT": "<<",
    "BINARY_MATRIX_MULTIPLY": "@",
    "BINARY_MULTIPLY": "*",
    "BINARY_MODULO": "%",
    "BINARY_OR": "|",
    "BINARY_POWER": "**",
    "BINARY_RSHIFT": ">>",
    "BINARY_SUBTRACT": "-",
    "BINARY_TRUE_DIVIDE": "/",
    "BINARY_XOR": "^",
}
_INPLACE_310 = {name.replace("BINARY_", "INPLACE_"): sym for name, sym in _BINARY_310.items()}

_POP_JUMP_KIND = {
    "POP_JUMP_IF_FALSE": "false",
    "POP_JUMP_IF_TRUE": "true",
    "POP_JUMP_IF_NONE": "none",
    "POP_JUMP_IF_NOT_NONE": "not_none",
    "POP_JUMP_FORWARD_IF_FALSE": "false",
    "POP_JUMP_FORWARD_IF_TRUE": "true",
    "POP_JUMP_FORWARD_IF_NONE": "none",
    "POP_JUMP_FORWARD_IF_NOT_NONE": "not_none",
    "POP_JUMP_BACKWARD_IF_FALSE": "false",
    "POP_JUMP_BACKWARD_IF_TRUE": "true",
    "POP_JUMP_BACKWARD_IF_NONE": "none",
    "POP_JUMP_BACKWARD_IF_NOT_NONE": "not_none",
}
_JUMPS = frozenset({"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE"})
# Unary instructions: the native expression (plain operand) and the slow path.
_UNARY = {
    "UNARY_NEGATIVE": ("-{}", "unary(f.rt, '-', {})"),
    "UNARY_INVERT": ("~{}", "unary(f.rt, '~', {})"),
    "UNARY_NOT": ("not {}", "not truth(f.rt, {})"),
    "TO_BOOL": ("bool({})", "truth(f.rt, {})"),
}
if PY_VERSION < (3, 12):
    _UNARY["UNARY_POSITIVE"] = ("+{}", "unary(f.rt, '+', {})")

OK, END, NO = 0, 1, 2


def _attr_ok(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("__")


class _BlockGen:
    """Generates the source of one block; the value stack is simulated with Python names."""

    def __init__(
        self,
        instructions: tuple[Instruction, ...],
        local_names: tuple[str, ...],
        argbound: Callable[[int], bool],
        start: int = 0,
    ) -> None:
        self.start = start  # names of constants carry it: a superblock holds several blocks
        self.instructions = instructions
        self.local_names = local_names
        self.argbound = argbound
        self.body: list[tuple[str, int]] = []
        self.stack: list[str] = []
        self.env: dict[str, Any] = {}
        self.ntemps = 0
        self.count = 0
        self.uses_globals = False
        self.uses_calls = False
        # Names whose values are known to be of plain types (constants): no type check needed.
        self.plain_names: set[str] = set()
        # The last COMPARE_OP: (result temp, body position, a, sym, b, index), for fusing it
        # with the conditional jump that consumes it.
        self.last_compare: tuple[str, int, str, str, str, int] | None = None
        self.compare_end = -1  # body length right after that compare's lines
        self.last_send = -1  # the index of a SEND in this block (its yield may follow)
        self.finished = False  # see finish

    # -- helpers ------------------------------------------------------------------------------

    def emit(self, text: str, index: int) -> None:
        self.body.append((text, index))

    def temp(self) -> str:
        self.ntemps += 1
        return f"t{self.ntemps}"

    def push_expr(self, expr: str, index: int) -> None:
        t = self.temp()
        self.emit(f"{t} = {expr}", index)
        self.stack.append(t)

    def pop(self, index: int) -> str:
        if self.stack:
            return self.stack.pop()
        t = self.temp()
        self.emit(f"{t} = st.pop()", index)
        return t

    def const(self, value: Any) -> str:
        name = f"c{self.start}_{len(self.env)}"
        self.env[name] = value
        if type(value) in PLAIN:
            self.plain_names.add(name)
        return name

    def plain_test(self, *names: str) -> str:
        """The test that ``names`` hold values of plain types ("True" when known)."""
        tests = [f"type({n}) in P" for n in names if n not in self.plain_names]
        return " and ".join(tests) if tests else "True"

    def materialize(self, index: int) -> None:
        if self.stack:
            self.emit(f"st.extend(({', '.join(self.stack)},))", index)
            self.stack.clear()

    def resolve(self, index: int) -> int:
        """Where going to instruction ``index`` leads: past no-ops and unconditional jumps."""
        instructions = self.instructions
        last = len(instructions) - 1
        for _ in range(16):
            if not 0 < index <= last:
                break
            opname = instructions[index].opname
            if opname in _SKIPPABLE and index < last:
                index += 1
            elif opname in _JUMPS:
                index = instructions[index].target
            else:
                break
        return index

    def next_index(self, instr: Instruction) -> int:
        i = instr.index + 1
        instructions = self.instructions
        while i < len(instructions) - 1 and instructions[i].opname in _SKIPPABLE:
            i += 1
        return i

    # -- instructions --------------------------------------------------------------------------

    def add(self, ins: Instruction, first: bool, hooked: bool) -> int:
        op = ins.opname
        i = ins.index
        if op in _SKIPPABLE:
            return OK
        self.count += 1
        if op in ("LOAD_FAST", "LOAD_FAST_CHECK"):
            checked = op == "LOAD_FAST_CHECK" or (
                PY_VERSION < (3, 12) and not self.argbound(ins.arg)
            )
            self.push_expr(f"lv[{ins.arg}]", i)
            if checked:
                t = self.stack[-1]
                self.emit(f"if {t} is NULL: raise unbound_local({self.local_names[ins.arg]!r})", i)
            return OK
        if op == "LOAD_FAST_LOAD_FAST":
            self.push_expr(f"lv[{ins.arg >> 4}]", i)
            self.push_expr(f"lv[{ins.arg & 15}]", i)
            return OK
        if op == "STORE_FAST":
            self.emit(f"lv[{ins.arg}] = {self.pop(i)}", i)
            return OK
        if op == "STORE_FAST_STORE_FAST":
            self.emit(f"lv[{ins.arg >> 4}] = {self.pop(i)}", i)
            self.emit(f"lv[{ins.arg & 15}] = {self.pop(i)}", i)
            return OK
        if op == "STORE_FAST_LOAD_FAST":
            self.emit(f"lv[{ins.arg >> 4}] = {self.pop(i)}", i)
            self.push_expr(f"lv[{ins.arg & 15}]", i)
            return OK
        if op == "POP_TOP":
            if self.stack:
                self.stack.pop()
            else:
                self.emit("st.pop()", i)
            return OK
        if op == "PUSH_NULL":
            self.stack.append("NULL")
            return OK
        if op == "BINARY_OP":
            sym = ins.argrepr
            return self._binary(sym, i)
        if op in _BINARY_310 and PY_VERSION < (3, 11):
            return self._binary(_BINARY_310[op], i)
        if op in _INPLACE_310 and PY_VERSION < (3, 11):
            return self._binary(_INPLACE_310[op] + "=", i)
        if op == "COMPARE_OP":
            b = self.pop(i)
            a = self.pop(i)
            sym = ins.argval
            test = self.plain_test(a, b)
            if hooked and sym in ("==", "!=") and test != "True":
                test = test.replace(" in P", " in PV")  # see ops.arith.compare_op
            expr = f"({a} {sym} {b} if {test} else compare(f.rt, {sym!r}, {a}, {b}))"
            self.push_expr(expr, i)
            self.last_compare = (self.stack[-1], len(self.body) - 1, a, sym, b, i)
            if PY_VERSION >= (3, 13) and ins.arg & 16:
                t = self.stack[-1]
                self.emit(f"if {t} is not True and {t} is not False: {t} = truth(f.rt, {t})", i)
            self.compare_end = len(self.body)
            return OK
        if op == "IS_OP":
            b = self.pop(i)
            a = self.pop(i)
            if hooked:
                self.env.setdefault("identical", identical)
                self.push_expr(f"(identical(f.rt, {a}, {b}) is not {bool(ins.arg)})", i)
            else:
                self.push_expr(f"{a} is {'not ' if ins.arg else ''}{b}", i)
            return OK
        if op == "CONTAINS_OP":
            b = self.pop(i)
            a = self.pop(i)
            self.push_expr(
                f"({a} in {b} if type({b}) in FC and type({a}) in P else contains(f.rt, {a}, {b}))"
                f"{' is False' if ins.arg else ''}",
                i,
            )
            return OK
        if op in _UNARY:
            v = self.pop(i)
            native, slow = _UNARY[op]
            self.push_expr(f"({native.format(v)} if type({v}) in P else {slow.format(v)})", i)
            return OK
        if op == "BUILD_TUPLE" or op == "BUILD_LIST":
            items = [self.pop(i) for _ in range(ins.arg)][::-1]
            if op == "BUILD_TUPLE":
                self.push_expr(f"({', '.join(items)},)" if items else "()", i)
            else:
                self.push_expr(f"[{', '.join(items)}]", i)
            return OK
        if op in ("CALL", "CALL_METHOD", "CALL_FUNCTION") and not self._after_kw_names(ins):
            args = [self.pop(i) for _ in range(ins.arg)][::-1]
            arglist = f"[{', '.join(args)}]"
            if op == "CALL_FUNCTION":
                fn = self.pop(i)
            else:
                b = self.pop(i)
                a = self.pop(i)
                if PY_VERSION >= (3, 13) and b == "NULL":
                    fn = a
                elif PY_VERSION < (3, 13) and a == "NULL":
                    fn = b
                else:
                    helper = "call_self_second" if PY_VERSION >= (3, 13) else "call_null_first"
                    self.push_expr(f"{helper}(f, {a}, {b}, {arglist})", i)
                    return OK
            # A Python function without a lookaside is interpreted directly (the common case):
            # the site remembers the last one, so the next call of it skips finding its code.
            self.uses_calls = True
            t = self.temp()
            k = self.temp()
            site = self.const([(NULL, NULL, NULL)])
            self.emit(f"{k} = {site}[0]", i)
            with_self = f"[{fn}.__self__, {arglist[1:]}"
            # The site remembers (code, the lookaside table's codes, compiled code) of its last
            # callee: a function with that code, which no lookaside can be for, is entered
            # directly. It holds no function, no lookaside and no caller state.
            self.emit(
                f"if type({fn}) is FT and {fn}.__code__ is {k}[0] and {k}[1] is LC: "
                f"{t} = EF(rt, {fn}, {k}[0], {k}[2], {arglist})",
                i,
            )
            self.emit(
                f"elif type({fn}) is MT and type({fn}.__func__) is FT"
                f" and {fn}.__func__.__code__ is {k}[0] and {k}[1] is LC:"
                f" {t} = EF(rt, {fn}.__func__, {k}[0], {k}[2], {with_self})",
                i,
            )
            # A builtin with no lookaside, or a slot builtin on one plain argument: native.
            native = f"{fn} not in LA"
            if len(args) == 1:
                native = f"({native} or ({fn} in f.rt.fast_builtins and type({args[0]}) in P))"
            self.emit(
                f"elif type({fn}) is BT and f.rt.plain_opaque and {native}: "
                f"{t} = {fn}({', '.join(args)})",
                i,
            )
            # Anything else (a function the site does not know yet): call_at_site.
            self.emit(f"else: {t} = call_at_site(f, {fn}, {arglist}, {site})", i)
            self.stack.append(t)
            return OK
        if op in _POP_JUMP_KIND:
            kind = _POP_JUMP_KIND[op]
            v = self.pop(i)
            fusable = self.last_compare is not None and self.compare_end == len(self.body)
            self.materialize(i)
            # The block goes on with the next instruction (a block may leave at any jump).
            target = ins.target
            if (
                fusable
                and kind in ("true", "false")
                and self._fuse_compare(v, kind, self.resolve(target))
            ):
                return OK
            target = self.resolve(target)
            test = f"({v} if type({v}) in P else truth(f.rt, {v}))"
            if kind == "false":
                self.emit(f"if not {test}: return {target}", i)
            elif kind == "true":
                self.emit(f"if {test}: return {target}", i)
            elif kind == "none":
                self.emit(f"if {v} is None: return {target}", i)
            else:
                self.emit(f"if {v} is not None: return {target}", i)
            return OK
        if op in _JUMPS:
            self.materialize(i)
            self.emit(f"return {self.resolve(ins.target)}", i)
            return END
        if op == "RETURN_VALUE":
            self.emit(f"f.retval = {self.pop(i)}", i)
            self.emit("return 0", i)
            return END
        if op == "YIELD_VALUE" and self._plain_yield(ins):
            # The yield op's work (ops.generators.yield_value) for a plain ``yield v``: the
            # frame suspends; the driver resumes it at the next instruction.
            v = self.pop(i)
            self.materialize(i)
            self.emit(f"f.retval = {v}", i)
            self.emit(f"f.pc = {self.next_index(ins)}", i)
            self.emit("f.suspended = True", i)
            self.emit("f.yf = None", i)
            self.emit("return 0", i)
            return END
        if op == "SEND" and self._delegating_yield(ins.index + 1):
            # The SEND op's work (ops.generators.send), with the yield after it in this block.
            v = self.pop(i)
            self.materialize(i)
            t = self.temp()
            self.env.setdefault("sent", sent)
            self.env.setdefault("RETURNED", Returned)
            self.emit(f"{t} = sent(f.rt, st[-1], {v})", i)
            self.emit(f"if type({t}) is RETURNED:", i)
            if PY_VERSION >= (3, 12):
                self.emit(f"    st.append({t}.value); return {self.resolve(ins.target)}", i)
            else:
                self.emit(f"    st[-1] = {t}.value; return {self.resolve(ins.target)}", i)
            self.stack.append(t)
            self.last_send = i
            return OK
        if op == "YIELD_VALUE" and self.last_send == i - 1 and self._delegating_yield(i):
            # The delegating yield op's work (ops.generators.yield_value) after that SEND.
            v = self.pop(i)
            self.materialize(i)
            yf_exit = self.instructions[i - 1].target if PY_VERSION < (3, 12) else i
            self.emit(f"f.retval = {v}", i)
            self.emit(f"f.pc = {self.next_index(ins)}", i)
            self.emit("f.suspended = True", i)
            self.emit("f.yf = st[-1]", i)
            self.emit(f"f.yf_exit = {yf_exit}", i)
            self.emit("return 0", i)
            return END
        if op == "FOR_ITER" and first:
            exit_ = ins.target
            instrs = self.instructions
            if PY_VERSION >= (3, 12) and exit_ < len(instrs) and instrs[exit_].opname == "END_FOR":
                exit_ += 1
                if (
                    PY_VERSION >= (3, 13)
                    and exit_ < len(instrs)
                    and instrs[exit_].opname == "POP_TOP"
                ):
                    exit_ += 1
            exit_ = self.resolve(exit_)
            t = self.temp()
            self.emit(f"{t} = st[-1]", i)
            if hooked:  # items of a list or tuple with a provenance have one too
                it = self.temp()
                self.emit(f"{it} = {t}", i)
            self.emit(f"{t} = next({t}, NULL) if type({t}) in P else next_item(f.rt, {t})", i)
            if hooked:
                self.env.setdefault("iterated", iterated)
                self.emit(f"if rt.iter_sources: iterated(rt, {it}, {t})", i)
            self.emit(f"if {t} is NULL: st.pop(); return {exit_}", i)
            self.stack.append(t)
            return OK
        if hooked:
            return self._add_hooked(ins)
        # Ops whose plain variants have no hooks.
        if op == "LOAD_CONST":
            self.stack.append(self.const(ins.argval))
            return OK
        if op == "RETURN_CONST":
            self.emit(f"f.retval = {self.const(ins.argval)}", i)
            self.emit("return 0", i)
            return END
        if op == "LOAD_GLOBAL":
            name = self.const(ins.argval)
            push_null = PY_VERSION >= (3, 11) and bool(ins.arg & 1)
            self.uses_globals = True
            if push_null and PY_VERSION < (3, 13):
                self.stack.append("NULL")
            t = self.temp()
            self.emit(f"{t} = G.get({name}, NULL)", i)
            self.emit(f"if {t} is NULL:", i)
            self.emit(f"    if type(f.builtins) is dict: {t} = f.builtins.get({name}, NULL)", i)
            self.emit(f"    if {t} is NULL: {t} = load_global(f, {name}, False)", i)
            self.stack.append(t)
            if push_null and PY_VERSION >= (3, 13):
                self.stack.append("NULL")
            return OK
        if op == "STORE_SUBSCR":
            k = self.pop(i)
            c = self.pop(i)
            v = self.pop(i)
            self.emit(f"if type({c}) in P: {c}[{k}] = {v}", i)
            self.emit(f"else: set_item(f.rt, {c}, {k}, {v})", i)
            return OK
        if op == "BINARY_SUBSCR":
            k = self.pop(i)
            c = self.pop(i)
            self.push_expr(
                f"({c}[{k}] if type({c}) in P and type({k}) in P else get_item(f.rt, {c}, {k}))", i
            )
            return OK
        if op in ("LOAD_ATTR", "LOAD_METHOD"):
            name = ins.argval
            method = op == "LOAD_METHOD" or (PY_VERSION >= (3, 12) and bool(ins.arg & 1))
            o = self.pop(i)
            fast = f"{o}.{name}" if _attr_ok(name) else f"getattr({o}, {self.const(name)})"
            plain = f"type({o}) in PA or type({o}) in {self.const(plain_reads(name))}"
            expr = f"({fast} if {plain} else attribute_value(f, {o}, {self.const(name)}))"
            if method and PY_VERSION < (3, 13):
                self.stack.append("NULL")
            self.push_expr(expr, i)
            if method and PY_VERSION >= (3, 13):
                self.stack.append("NULL")
            return OK
        if op == "STORE_ATTR":
            name = ins.argval
            o = self.pop(i)
            v = self.pop(i)
            plain = f"type({o}) in PA or type({o}) in {self.const(plain_writes(name))}"
            if _attr_ok(name):
                self.emit(f"if {plain}: {o}.{name} = {v}", i)
            else:
                self.emit(f"if {plain}: setattr({o}, {self.const(name)}, {v})", i)
            self.emit(f"else: store_attr(f.rt, {o}, {self.const(name)}, {v})", i)
            return OK
        self.count -= 1
        return NO

    def _add_hooked(self, ins: Instruction) -> int:
        """The hooked variants of loads and stores: the same helpers as the single ops."""
        op = ins.opname
        i = ins.index
        env = self.env
        if op in ("LOAD_CONST", "RETURN_CONST"):
            # The hook, or the first load in a run with provenance, records the constant: then
            # the site remembers the run (``rt.token``), as a later load records nothing.
            value = self.const(ins.argval)
            record = self.const(Provenance(ProvenanceKind.CONSTANT, index=ins.argval))
            site = self.const([None])
            env.setdefault("load_constant_hooked", load_constant_hooked)
            t = self.temp()
            self.emit(f"if CH is None and (PT is None or {site}[0] is RS): {t} = {value}", i)
            self.emit(f"else: {t} = load_constant_hooked(f, {value}, {record}); {site}[0] = RS", i)
            if op == "RETURN_CONST":
                self.emit(f"f.retval = {t}", i)
                self.emit("return 0", i)
                return END
            self.stack.append(t)
            return OK
        if op == "LOAD_GLOBAL":
            # As for constants: a load that finds what the site's last load in this run found
            # (by identity: the provenance table keeps the value alive) records nothing new.
            name = self.const(ins.argval)
            site = self.const([None, 0])
            push_null = PY_VERSION >= (3, 11) and bool(ins.arg & 1)
            if push_null and PY_VERSION < (3, 13):
                self.stack.append("NULL")
            t = self.temp()
            self.emit(f"{t} = G.get({name}, NULL)", i)
            self.emit(
                f"if {t} is NULL and type(f.builtins) is dict: {t} = f.builtins.get({name}, NULL)",
                i,
            )
            self.emit(
                f"if {t} is NULL or (PT is not None and "
                f"(GH is not None or {site}[0] is not RS or {site}[1] != id({t}))):",
                i,
            )
            self.emit(f"    {t} = load_global(f, {name}, True)", i)
            self.emit(f"    if PT is not None: {site}[0] = RS; {site}[1] = id({t})", i)
            # Without provenance, the hook sees the value with no record (as global_loaded).
            self.emit(f"elif GH is not None: {t} = GH({name}, {t}, G, None)", i)
            self.stack.append(t)
            if push_null and PY_VERSION >= (3, 13):
                self.stack.append("NULL")
            return OK
        if op == "STORE_ATTR":
            name = ins.argval
            o = self.pop(i)
            v = self.pop(i)
            cname = self.const(name)
            self.emit(f"if SA is not None: SA({o}, {cname}, {v})", i)
            plain = f"type({o}) in PA or type({o}) in {self.const(plain_writes(name))}"
            if _attr_ok(name):
                self.emit(f"if {plain}: {o}.{name} = {v}", i)
            else:
                self.emit(f"if {plain}: setattr({o}, {cname}, {v})", i)
            self.emit(f"else: store_attr(f.rt, {o}, {cname}, {v})", i)
            return OK
        if op in ("LOAD_ATTR", "LOAD_METHOD"):
            name = self.const(ins.argval)
            method = op == "LOAD_METHOD" or (PY_VERSION >= (3, 12) and bool(ins.arg & 1))
            o = self.pop(i)
            if method and PY_VERSION < (3, 13):
                self.stack.append("NULL")
            # Without attribute hooks, only a read from a value with a provenance has more to
            # do than the plain read: record the value's (``load_attribute`` otherwise).
            attr = ins.argval
            fast = f"{o}.{attr}" if _attr_ok(attr) else f"getattr({o}, {name})"
            plain = f"type({o}) in PA or type({o}) in {self.const(plain_reads(attr))}"
            t = self.temp()
            e = self.temp()
            env.setdefault("attribute_loaded", attribute_loaded)
            self.emit("if AQ:", i)
            self.emit(f"    {t} = {fast} if {plain} else attribute_value(f, {o}, {name})", i)
            self.emit("    if PT is not None:", i)
            self.emit(f"        {e} = PT.get(id({o}))", i)
            self.emit(
                f"        if {e} is not None and {e}[0] is {o}: "
                f"{t} = attribute_loaded(rt, {o}, {name}, {t})",
                i,
            )
            self.emit(f"else: {t} = load_attribute(f, {o}, {name})", i)
            self.stack.append(t)
            if method and PY_VERSION >= (3, 13):
                self.stack.append("NULL")
            return OK
        if op == "BINARY_SUBSCR":
            k = self.pop(i)
            c = self.pop(i)
            self.push_expr(f"load_item(f, {c}, {k})", i)
            return OK
        self.count -= 1
        return NO

    def _fuse_compare(self, v: str, kind: str, target: int) -> bool:
        """``if a < b:``: on plain operands, one native comparison and truth test."""
        last = self.last_compare
        if last is None or last[0] != v:
            return False
        _t, position, a, sym, b, index = last
        del self.body[position : self.compare_end]
        negate = "not " if kind == "false" else ""
        self.emit(f"if {self.plain_test(a, b)}:", index)
        self.emit(f"    if {negate}({a} {sym} {b}): return {target}", index)
        self.emit(
            f"elif {negate}truth(f.rt, compare(f.rt, {sym!r}, {a}, {b})): return {target}", index
        )
        return True

    def _plain_yield(self, ins: Instruction) -> bool:
        """A ``yield`` that neither delegates (``yield from``/``await``) nor wraps its value (3.10
        async generators): from 3.11 the RESUME after it tells."""
        if PY_VERSION < (3, 11) or ins.index + 1 >= len(self.instructions):
            return False
        following = self.instructions[ins.index + 1]
        return following.opname == "RESUME" and (following.arg & 3) < 2

    def _delegating_yield(self, index: int) -> bool:
        """Whether instruction ``index`` is the yield of ``yield from``/``await`` (3.11+: the
        RESUME after it tells)."""
        instructions = self.instructions
        if PY_VERSION < (3, 11) or index + 1 >= len(instructions):
            return False
        if instructions[index].opname != "YIELD_VALUE":
            return False
        following = instructions[index + 1]
        return following.opname == "RESUME" and (following.arg & 3) >= 2

    def _after_kw_names(self, ins: Instruction) -> bool:
        k = ins.index - 1
        while k > 0 and self.instructions[k].opname in _SKIPPABLE:
            k -= 1
        return self.instructions[k].opname == "KW_NAMES"

    def _binary(self, sym: str, i: int) -> int:
        b = self.pop(i)
        a = self.pop(i)
        plain = self.plain_test(a, b)
        if sym.endswith("=") and sym not in ("==", "!=", "<=", ">="):
            t = self.temp()
            self.emit(f"{t} = {a}", i)
            self.emit(f"if {plain}: {t} {sym} {b}", i)
            self.emit(f"else: {t} = binary(f.rt, {sym!r}, {t}, {b})", i)
            self.stack.append(t)
        else:
            self.push_expr(f"({a} {sym} {b} if {plain} else binary(f.rt, {sym!r}, {a}, {b}))", i)
        return OK

    def finish(self, fallthrough: int, ended: bool) -> None:
        """Close the body: a run that did not end goes on at ``fallthrough`` (once: the body
        serves its block and the superblock)."""
        if self.finished:
            return
        self.finished = True
        if not ended:
            self.materialize(self.start)
            self.emit(f"return {self.resolve(fallthrough)}", self.start)

    def build(self, fallthrough: int, ended: bool) -> Op:
        self.finish(fallthrough, ended)
        preamble = [(text, -1, 2) for text in _preamble([text for text, _ in self.body], set())]
        body = preamble + [(text, index, 2) for text, index in self.body]
        block: Any = _generate("block", body, self.env)
        return cast(Op, block)


# Frame fields a generated function loads, when its body uses them (this runs on every
# execution, so only the used ones).
_PREAMBLE = (
    ("rt", "f.rt"),
    ("st", "f.stack"),
    ("lv", "f.lv"),
    ("LA", "rt.lookasides"),
    ("LC", "rt.lookaside_codes"),
    ("G", "f.globals"),
    ("RS", "rt.token"),
    ("PT", "rt.prov"),
    ("CH", "rt.cb_load_const"),
    ("GH", "rt.cb_load_global"),
    ("SA", "rt.cb_store_attr"),
    ("AQ", "rt.attribute_hooks_off"),
)
_PREAMBLE_USE = re.compile(r"(?<![.\w])(st|lv|LA|LC|G|rt|RS|PT|CH|GH|SA|AQ)\b")
_FROM_RUNTIME = frozenset(short for short, value in _PREAMBLE if value.startswith("rt."))


def _preamble(texts: list[str], loaded: set[str]) -> list[str]:
    """The loads of the frame fields ``texts`` use that are not in ``loaded`` (updated)."""
    used = set(_PREAMBLE_USE.findall("\n".join(texts)))
    if used & _FROM_RUNTIME:
        used.add("rt")
    used -= loaded
    loaded |= used
    return [f"{short} = {value}" for short, value in _PREAMBLE if short in used]


def _generate(name: str, body: list[tuple[str, int, int]], env: dict[str, Any]) -> Any:
    """Compile a function ``name(f)`` from ``body`` (text, owning instruction, indent level)."""
    lines = ["", f"    def {name}(f):"]
    owners: dict[int, int] = {}
    for text, index, indent in body:
        lines.append("    " * indent + text)
        if index >= 0:
            owners[len(lines)] = index
    lines.append(f"    return {name}")
    # The helpers the body uses (each one passed costs compiling and calling ``make``).
    used = set(_IDENTIFIER.findall("\n".join(lines)))
    helpers = [helper for helper in _HELPERS if helper in used]
    lines[0] = f"def make({', '.join([*helpers, *env])}):"
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines) + "\n", _FILENAME, "exec"), namespace)
    fn: Any = namespace["make"](*[_HELPERS[helper] for helper in helpers], *env.values())
    fn.block_owners = owners
    return fn


_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


_EXIT = re.compile(r"\breturn (\d+)$")


def build_superblock(runs: list[_Run]) -> Op | None:
    """One function running the blocks of ``runs`` that ran (the first is the entry) one after
    another: a jump between two of them is a ``while`` loop step, not a return to the dispatch
    loop and a call of the next block with its own preamble. A jump anywhere else returns.

    The entry block runs first on its own (most calls end there or leave it once); the loop
    after it holds every block, the entry last, for the jumps that follow."""
    built = {run.start: run for run in runs if run.block is not None or run.count >= 2}
    entry = runs[0].start
    if len(built) < 2 or entry not in built:
        return None
    for run in built.values():
        run.gen.finish(run.fallthrough, run.ended)
    # The entry's fields are loaded once; another block loads the others it uses each time it
    # runs (a call that returns from the entry block pays for no more than that block did).
    loaded: set[str] = set()
    body = [(text, -1, 2) for text in _preamble([t for t, _ in built[entry].gen.body], loaded)]
    env: dict[str, Any] = {}
    for run in built.values():
        env.update(run.gen.env)
    body.append(("while True:", -1, 2))  # the first pass: ``break`` enters the loop below
    body += _section(built[entry].gen, built, "break", None, 3)
    body.append(("while True:", -1, 2))
    order = [*sorted(start for start in built if start != entry), entry]
    for k, start in enumerate(order):
        gen = built[start].gen
        following = order[k + 1] if k + 1 < len(order) else None
        body.append((f"if pc == {start}:", -1, 3))
        body += [(text, -1, 4) for text in _preamble([t for t, _ in gen.body], set(loaded))]
        body += _section(gen, built, "continue", following, 4)
    superblock: Any = _generate("superblock", body, env)
    return cast(Op, superblock)


def _section(
    gen: _BlockGen, built: dict[int, _Run], step: str, following: int | None, indent: int
) -> list[tuple[str, int, int]]:
    """A block's body in a superblock: a jump to a block of it sets ``pc`` and does ``step``
    (none when it falls through to ``following``, the next section)."""
    lines = []
    last = len(gen.body) - 1
    for n, (text, index) in enumerate(gen.body):
        match = _EXIT.search(text)
        target = int(match.group(1)) if match else 0
        if match is not None and target in built:
            jump = (
                f"pc = {target}" if n == last and target == following else f"pc = {target}; {step}"
            )
            text = text[: match.start()] + jump
        lines.append((text, index, indent))
    return lines


# Names every generated block may use.
_HELPERS: dict[str, Any] = {
    "NULL": NULL,
    "unbound_local": unbound_local,
    "load_global": _load_global_value,
    "call_positional": call_positional,
    "call_at_site": call_at_site,
    "EF": enter_frame,
    "call_null_first": call_null_first,
    "call_self_second": call_self_second,
    "FT": FunctionType,
    "MT": MethodType,
    "BT": type(len),
    "P": PLAIN,
    "PV": PLAIN_VALUES,
    "PA": PLAIN_ATTRS,
    "FC": FAST_CONTAINERS,
    "truth": truth,
    "binary": binary,
    "compare": compare,
    "contains": contains,
    "unary": unary,
    "get_item": get_item,
    "set_item": set_item,
    "next_item": next_item,
    "attribute_value": attribute_value,
    "store_attr": store_attr,
    "load_attribute": load_attribute,
    "load_item": load_item,
}


def compile_blocks(
    instructions: tuple[Instruction, ...],
    handlers: tuple[ExceptionHandler | None, ...],
    ops: list[Op],
    local_names: tuple[str, ...],
    hooked: bool,
    argbound: Callable[[int], bool],
) -> None:
    """Replace the op at the start of every eligible run of instructions by a block op; the
    entry's op, when a run starts there, later becomes a superblock of the hot runs."""
    targets = {ins.target for ins in instructions if ins.target >= 0}
    targets.update(h.target for h in handlers if h is not None)
    n = len(instructions)
    runs: list[_Run] = []
    i = 1
    while i < n:
        # A generator resumes after a ``yield`` past its RESUME: the run starts there.
        if instructions[i - 1].opname == "YIELD_VALUE":
            while i < n - 1 and instructions[i].opname in _SKIPPABLE:
                i += 1
        gen = _BlockGen(instructions, local_names, argbound, i)
        j = i
        ended = False
        while j < n:
            ins = instructions[j]
            if j != i and handlers[j] != handlers[i]:
                break
            if j != i and j in targets and ins.opname not in _JUMPS:
                break  # a jump here finds a block (a jump's own op stays for those to it)
            kind = gen.add(ins, j == i, hooked)
            if kind == NO:
                break
            j += 1
            if kind == END:
                ended = True
                break
        if gen.count >= 2:
            run = _Run(i, gen, j, ended, ops[i])
            runs.append(run)
            ops[i] = _lazy_block(ops, run)
        i = max(j, i + 1)
    if runs and runs[0].start == 1 and len(runs) > 1:
        ops[1] = _lazy_superblock(ops, runs)


# A block is compiled once it has run this many times: compiling one costs 0.1 to 1 ms, what
# running its instructions one by one costs more than the block in some 50 to 500 runs. Code
# run a few times (library code traced once per compilation) stays uncompiled.
HOT_THRESHOLD = 32
# The entry's superblock is compiled once the entry has run this many times; it holds the
# blocks that have run twice by then (the code that runs, not every cold path), which then need
# no block of their own where the superblock reaches them (one compilation, not several).
SUPERBLOCK_THRESHOLD = 32


class _Run:
    """One run of instructions that compiles to a block: its generator and, once hot, its op."""

    __slots__ = ("block", "count", "ended", "fallthrough", "gen", "original", "start")

    def __init__(self, start: int, gen: _BlockGen, fallthrough: int, ended: bool, original: Op):
        self.start = start
        self.gen = gen
        self.fallthrough = fallthrough
        self.ended = ended
        self.original = original
        self.block: Op | None = None
        self.count = 0  # runs before it was compiled

    def compiled(self) -> Op:
        if self.block is None:
            self.block = self.gen.build(self.fallthrough, self.ended)
        return self.block


def _lazy_block(ops: list[Op], run: _Run) -> Op:
    """An op that runs the run's instructions one by one and, once hot, replaces itself by the
    compiled block."""
    start = run.start
    original = run.original

    def lazy(f: Frame) -> int:
        run.count += 1
        if run.count >= HOT_THRESHOLD:
            block = run.compiled()
            if ops[start] is lazy:
                ops[start] = block
            return block(f)
        return original(f)

    return lazy


def _lazy_superblock(ops: list[Op], runs: list[_Run]) -> Op:
    """The entry's op: runs the entry block until warm, then replaces itself by the superblock
    (or, when too few blocks ran, by the entry block)."""
    entries = 0
    first = ops[1]

    def lazy(f: Frame) -> int:
        nonlocal entries
        entries += 1
        if entries >= SUPERBLOCK_THRESHOLD and ops[1] is lazy:
            op = ops[1] = build_superblock(runs) or runs[0].compiled()
            return op(f)
        return first(f)

    return lazy


def block_fault_index(exc: BaseException, op: Any, owners: dict[int, int], default: int) -> int:
    """The index of the instruction of a block op that raised ``exc``."""
    code = op.__code__
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code:
            return owners.get(tb.tb_lineno, default)
        tb = tb.tb_next
    return default


_ = Frame
