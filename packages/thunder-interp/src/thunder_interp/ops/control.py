"""Jumps, conditional jumps, iteration and length."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thunder_interp._bytecode import Instruction
from thunder_interp._frame import NULL, Frame
from thunder_interp._provenance import Provenance, ProvenanceKind
from thunder_interp._registry import (
    ENDS_BLOCK,
    GOES_ON,
    NOT_COMPILED,
    PY_VERSION,
    CompileContext,
    Op,
    block_template,
    register_opcode,
)
from thunder_interp._runtime import Runtime, warm_up
from thunder_interp._slots import PLAIN, compare, length, next_item, truth
from thunder_interp._slots import get_iter as slot_get_iter

if TYPE_CHECKING:
    from thunder_interp._blocks import BlockBuilder
    from thunder_interp.ops.arith import ComparedValues

# Blocks follow these to where they lead (``BlockBuilder.resolve_target``).
UNCONDITIONAL_JUMPS = frozenset(
    {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE"}
)


@register_opcode("JUMP_FORWARD")
@register_opcode("JUMP_ABSOLUTE", max_version=(3, 10))
@register_opcode("JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", min_version=(3, 11))
def jump(ins: Instruction, ctx: CompileContext) -> Op:
    target = ins.target
    if target < ins.index:
        # A loop: count iterations so that the code's basic blocks get compiled.
        def op_backward(f: Frame) -> int:
            cc = f.cc
            if cc.block_builder is not None:
                warm_up(cc)
            return target

        return op_backward

    def op(f: Frame) -> int:
        return target

    return op


@block_template(jump)
def jump_block(block: BlockBuilder, ins: Instruction) -> int:
    block.leave(block.resolve_target(ins.target))
    return ENDS_BLOCK


_POP_JUMPS = {
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


@register_opcode("POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE", max_version=(3, 10))
@register_opcode(
    "POP_JUMP_FORWARD_IF_FALSE",
    "POP_JUMP_FORWARD_IF_TRUE",
    "POP_JUMP_FORWARD_IF_NONE",
    "POP_JUMP_FORWARD_IF_NOT_NONE",
    "POP_JUMP_BACKWARD_IF_FALSE",
    "POP_JUMP_BACKWARD_IF_TRUE",
    "POP_JUMP_BACKWARD_IF_NONE",
    "POP_JUMP_BACKWARD_IF_NOT_NONE",
    min_version=(3, 11),
    max_version=(3, 11),
)
@register_opcode(
    "POP_JUMP_IF_FALSE",
    "POP_JUMP_IF_TRUE",
    "POP_JUMP_IF_NONE",
    "POP_JUMP_IF_NOT_NONE",
    min_version=(3, 12),
)
def pop_jump(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    target = ins.target
    kind = _POP_JUMPS[ins.opname]
    if target < ins.index:
        forward = _pop_jump_forward(nxt, target, kind)

        def op_backward(f: Frame) -> int:
            cc = f.cc
            if cc.block_builder is not None:
                warm_up(cc)
            return forward(f)

        return op_backward
    return _pop_jump_forward(nxt, target, kind)


def _pop_jump_forward(nxt: int, target: int, kind: str) -> Op:
    if kind == "false":

        def op_false(f: Frame) -> int:
            v = f.stack.pop()
            if v if type(v) in PLAIN else truth(f.rt, v):
                return nxt
            return target

        return op_false
    if kind == "true":

        def op_true(f: Frame) -> int:
            v = f.stack.pop()
            if v if type(v) in PLAIN else truth(f.rt, v):
                return target
            return nxt

        return op_true
    if kind == "none":

        def op_none(f: Frame) -> int:
            if f.stack.pop() is None:
                return target
            return nxt

        return op_none

    def op_not_none(f: Frame) -> int:
        if f.stack.pop() is not None:
            return target
        return nxt

    return op_not_none


@block_template(pop_jump, helpers={"truth": truth, "compare": compare})
def pop_jump_block(block: BlockBuilder, ins: Instruction) -> int:
    kind = _POP_JUMPS[ins.opname]
    v = block.pop()
    # ``if a < b:``: the comparison just compiled, when it computed ``v``, fuses with the jump.
    compared = block.last_compare
    if compared is not None and (compared.result != v or compared.end_line != len(block.body)):
        compared = None
    block.flush_stack()
    # The block goes on with the next instruction (a block may leave at any jump).
    target = block.resolve_target(ins.target)
    if compared is not None and kind in ("true", "false"):
        _fused_compare_jump(block, compared, kind == "false", target)
        return GOES_ON
    test = f"({v} if type({v}) in P else truth(f.rt, {v}))"
    if kind == "false":
        block.emit(f"if not {test}: return {target}")
    elif kind == "true":
        block.emit(f"if {test}: return {target}")
    elif kind == "none":
        block.emit(f"if {v} is None: return {target}")
    else:
        block.emit(f"if {v} is not None: return {target}")
    return GOES_ON


def _fused_compare_jump(
    block: BlockBuilder, compared: ComparedValues, negate: bool, target: int
) -> None:
    """Replace the comparison's lines: on plain operands, one native comparison and truth test."""
    a, sym, b = compared.left, compared.symbol, compared.right
    del block.body[compared.first_line : compared.end_line]
    not_ = "not " if negate else ""
    block.emit(f"if {block.plain_test(a, b)}:", compared.instruction)
    block.emit(f"    if {not_}({a} {sym} {b}): return {target}", compared.instruction)
    block.emit(
        f"elif {not_}truth(f.rt, compare(f.rt, {sym!r}, {a}, {b})): return {target}",
        compared.instruction,
    )


@register_opcode("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP", max_version=(3, 11))
def jump_or_pop(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    target = ins.target
    if ins.opname == "JUMP_IF_TRUE_OR_POP":

        def op_true(f: Frame) -> int:
            st = f.stack
            v = st[-1]
            if v if type(v) in PLAIN else truth(f.rt, v):
                return target
            st.pop()
            return nxt

        return op_true

    def op_false(f: Frame) -> int:
        st = f.stack
        v = st[-1]
        if v if type(v) in PLAIN else truth(f.rt, v):
            st.pop()
            return nxt
        return target

    return op_false


@register_opcode("GET_ITER")
def get_iter(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    if ctx.hooked_for():  # provenance

        def op_hooked(f: Frame) -> int:
            st = f.stack
            iterable = st[-1]
            it = st[-1] = (
                iter(iterable) if type(iterable) in PLAIN else slot_get_iter(f.rt, iterable)
            )
            rt = f.rt
            if rt.prov is not None and type(iterable) in (list, tuple):
                parent = rt.provenance_of(iterable)
                if parent is not None:
                    rt.iter_sources[id(it)] = [it, parent, 0]
            return nxt

        return op_hooked

    def op(f: Frame) -> int:
        st = f.stack
        v = st[-1]
        st[-1] = iter(v) if type(v) in PLAIN else slot_get_iter(f.rt, v)
        return nxt

    return op


def _loop_exit(instrs: tuple[Instruction, ...], ins: Instruction) -> int:
    """Where FOR_ITER ``ins`` goes when the iterator is exhausted (past 3.12's END_FOR and
    3.13's POP_TOP, which pop what FOR_ITER itself pops)."""
    exit_ = ins.target
    if PY_VERSION >= (3, 12) and exit_ < len(instrs) and instrs[exit_].opname == "END_FOR":
        exit_ += 1
        if PY_VERSION >= (3, 13) and exit_ < len(instrs) and instrs[exit_].opname == "POP_TOP":
            exit_ += 1
    return exit_


@register_opcode("FOR_ITER")
def for_iter(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    instrs = ctx.instructions
    exit_ = _loop_exit(instrs, ins)
    if ctx.hooked_for():  # provenance
        return _for_iter_hooked(nxt, exit_)
    following = instrs[nxt] if nxt < len(instrs) else None
    jumped_to = any(i.target == nxt for i in instrs)
    if following is not None and following.opname == "STORE_FAST" and not jumped_to:
        # Superinstruction FOR_ITER + STORE_FAST.
        slot = following.arg
        after = ctx.next_index(following)

        def op_store(f: Frame) -> int:
            st = f.stack
            it = st[-1]
            v = next(it, NULL) if type(it) in PLAIN else next_item(f.rt, it)
            if v is NULL:
                st.pop()
                return exit_
            f.lv[slot] = v
            return after

        return op_store

    def op(f: Frame) -> int:
        st = f.stack
        it = st[-1]
        v = next(it, NULL) if type(it) in PLAIN else next_item(f.rt, it)
        if v is NULL:
            st.pop()
            return exit_
        st.append(v)
        return nxt

    return op


def iterated(rt: Runtime, it: Any, v: Any) -> None:
    """``v`` is the next item of ``it`` (NULL: none): recorded as ``item k of x`` when ``it``
    iterates a list or tuple that has a provenance."""
    sources = rt.iter_sources
    entry = sources.get(id(it))
    if entry is None or entry[0] is not it:
        return
    if v is NULL:
        del sources[id(it)]
        return
    rt.record(v, Provenance(ProvenanceKind.ITEM, index=entry[2], parent=entry[1]))
    entry[2] += 1


@block_template(for_iter, helpers={"next_item": next_item, "iterated": iterated})
def for_iter_block(block: BlockBuilder, ins: Instruction) -> int:
    if ins.index != block.start:
        # It reads the iterator from the frame's stack, which holds all of the stack only where
        # a block starts.
        return NOT_COMPILED
    exit_ = block.resolve_target(_loop_exit(block.instructions, ins))
    t = block.temp()
    block.emit(f"{t} = st[-1]")
    recorded = block.hooked_for()  # items of a list or tuple with a provenance have one too
    if recorded:
        it = block.temp()
        block.emit(f"{it} = {t}")
    block.emit(f"{t} = next({t}, NULL) if type({t}) in P else next_item(f.rt, {t})")
    if recorded:
        block.emit(f"if rt.iter_sources: iterated(rt, {it}, {t})")
    block.emit(f"if {t} is NULL: st.pop(); return {exit_}")
    block.stack.append(t)
    return GOES_ON


def _for_iter_hooked(nxt: int, exit_: int) -> Op:
    """FOR_ITER recording ``item k of x`` for items of a list/tuple that has a provenance."""

    def op(f: Frame) -> int:
        st = f.stack
        it = st[-1]
        v = next(it, NULL) if type(it) in PLAIN else next_item(f.rt, it)
        if f.rt.iter_sources:
            iterated(f.rt, it, v)
        if v is NULL:
            st.pop()
            return exit_
        st.append(v)
        return nxt

    return op


@register_opcode("END_FOR", min_version=(3, 12))
def end_for(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    count = 2 if PY_VERSION == (3, 12) else 1

    def op(f: Frame) -> int:
        del f.stack[-count:]
        return nxt

    return op


@register_opcode("GET_LEN")
def get_len(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        v = st[-1]
        st.append(len(v) if type(v) in PLAIN else length(f.rt, v))
        return nxt

    return op
