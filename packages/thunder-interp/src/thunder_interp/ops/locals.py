"""Stack shuffling, fast locals, constants and closure cells."""

from __future__ import annotations

from types import CellType
from typing import TYPE_CHECKING, Any

from thunder_interp._bytecode import Instruction
from thunder_interp._frame import NULL, Frame
from thunder_interp._provenance import Provenance, ProvenanceKind
from thunder_interp._registry import (
    ENDS_BLOCK,
    GOES_ON,
    PY_VERSION,
    CompileContext,
    Op,
    block_template,
    register_opcode,
)
from thunder_interp.ops._common import unbound_free, unbound_local

if TYPE_CHECKING:
    from thunder_interp._blocks import BlockBuilder

# -- no-ops and stack shuffling -----------------------------------------------------------------


@register_opcode("NOP", "EXTENDED_ARG")
@register_opcode("RESUME", min_version=(3, 11))
@register_opcode("PRECALL", min_version=(3, 11), max_version=(3, 11))
def nop(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        return nxt

    return op


@register_opcode("POP_TOP")
def pop_top(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        f.stack.pop()
        return nxt

    return op


@block_template(pop_top)
def pop_top_block(block: BlockBuilder, ins: Instruction) -> int:
    if block.stack:
        block.stack.pop()
    else:
        block.emit("st.pop()")
    return GOES_ON


@register_opcode("PUSH_NULL", min_version=(3, 11))
def push_null(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        f.stack.append(NULL)
        return nxt

    return op


@block_template(push_null)
def push_null_block(block: BlockBuilder, ins: Instruction) -> int:
    block.stack.append("NULL")
    return GOES_ON


@register_opcode("COPY", min_version=(3, 11))
def copy(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    n = -ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        st.append(st[n])
        return nxt

    return op


@register_opcode("SWAP", min_version=(3, 11))
def swap(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    n = -ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        st[-1], st[n] = st[n], st[-1]
        return nxt

    return op


def _rot(ins: Instruction, ctx: CompileContext, n: int) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        st.insert(-n + 1 if n > 1 else len(st), st.pop())
        return nxt

    return op


@register_opcode("ROT_TWO", "ROT_THREE", "ROT_FOUR", "ROT_N", max_version=(3, 10))
def rot(ins: Instruction, ctx: CompileContext) -> Op:
    n = {"ROT_TWO": 2, "ROT_THREE": 3, "ROT_FOUR": 4}.get(ins.opname, ins.arg)
    return _rot(ins, ctx, n)


@register_opcode("DUP_TOP", max_version=(3, 10))
def dup_top(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        st.append(st[-1])
        return nxt

    return op


@register_opcode("DUP_TOP_TWO", max_version=(3, 10))
def dup_top_two(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        st.extend(st[-2:])
        return nxt

    return op


# -- fast locals ----------------------------------------------------------------------------------


# 3.12+: the compiler emits LOAD_FAST for locals it proves bound (LOAD_FAST_CHECK for the others).
_LOADS_PROVEN_BOUND = frozenset({"LOAD_FAST"} if PY_VERSION >= (3, 12) else ())


@register_opcode("LOAD_FAST")
@register_opcode("LOAD_FAST_CHECK", min_version=(3, 12))
def load_fast(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i = ins.arg
    name = ctx.local_names[i]
    if ins.opname in _LOADS_PROVEN_BOUND or _always_bound(ctx, i):
        # No check needed: the local is bound whenever it is read.
        def op(f: Frame) -> int:
            f.stack.append(f.lv[i])
            return nxt

        return op

    def op_checked(f: Frame) -> int:
        v = f.lv[i]
        if v is NULL:
            raise unbound_local(name)
        f.stack.append(v)
        return nxt

    return op_checked


@block_template(load_fast, helpers={"unbound_local": unbound_local})
def load_fast_block(block: BlockBuilder, ins: Instruction) -> int:
    t = block.push_expr(f"lv[{ins.arg}]")
    if not (ins.opname in _LOADS_PROVEN_BOUND or block.always_bound(ins.arg)):
        block.emit(f"if {t} is NULL: raise unbound_local({block.local_names[ins.arg]!r})")
    return GOES_ON


def _always_bound(ctx: CompileContext, index: int) -> bool:
    """An argument slot that no instruction unbinds is bound whenever it is read."""
    code = ctx.code
    nargs = (
        code.co_argcount
        + code.co_kwonlyargcount
        + bool(code.co_flags & 4)
        + bool(code.co_flags & 8)
    )
    if index >= nargs:
        return False
    if PY_VERSION < (3, 11) and ctx.local_names[index] in code.co_cellvars:
        return False  # 3.10 moves such arguments into cells
    for instr in ctx.instructions:
        if instr.opname in ("DELETE_FAST", "LOAD_FAST_AND_CLEAR") and instr.arg == index:
            return False
    return True


@register_opcode("LOAD_FAST_AND_CLEAR", min_version=(3, 12))
def load_fast_and_clear(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i = ins.arg

    def op(f: Frame) -> int:
        lv = f.lv
        f.stack.append(lv[i])
        lv[i] = NULL
        return nxt

    return op


@register_opcode("LOAD_FAST_LOAD_FAST", min_version=(3, 13))
def load_fast_load_fast(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i, j = ins.arg >> 4, ins.arg & 15

    def op(f: Frame) -> int:
        lv = f.lv
        f.stack += (lv[i], lv[j])
        return nxt

    return op


@block_template(load_fast_load_fast)
def load_fast_load_fast_block(block: BlockBuilder, ins: Instruction) -> int:
    block.push_expr(f"lv[{ins.arg >> 4}]")
    block.push_expr(f"lv[{ins.arg & 15}]")
    return GOES_ON


@register_opcode("STORE_FAST")
def store_fast(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i = ins.arg

    def op(f: Frame) -> int:
        f.lv[i] = f.stack.pop()
        return nxt

    return op


@block_template(store_fast)
def store_fast_block(block: BlockBuilder, ins: Instruction) -> int:
    block.emit(f"lv[{ins.arg}] = {block.pop()}")
    return GOES_ON


@register_opcode("STORE_FAST_LOAD_FAST", min_version=(3, 13))
def store_fast_load_fast(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i, j = ins.arg >> 4, ins.arg & 15

    def op(f: Frame) -> int:
        lv = f.lv
        st = f.stack
        lv[i] = st[-1]
        st[-1] = lv[j]
        return nxt

    return op


@block_template(store_fast_load_fast)
def store_fast_load_fast_block(block: BlockBuilder, ins: Instruction) -> int:
    block.emit(f"lv[{ins.arg >> 4}] = {block.pop()}")
    block.push_expr(f"lv[{ins.arg & 15}]")
    return GOES_ON


@register_opcode("STORE_FAST_STORE_FAST", min_version=(3, 13))
def store_fast_store_fast(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i, j = ins.arg >> 4, ins.arg & 15

    def op(f: Frame) -> int:
        lv = f.lv
        st = f.stack
        lv[i] = st.pop()
        lv[j] = st.pop()
        return nxt

    return op


@block_template(store_fast_store_fast)
def store_fast_store_fast_block(block: BlockBuilder, ins: Instruction) -> int:
    block.emit(f"lv[{ins.arg >> 4}] = {block.pop()}")
    block.emit(f"lv[{ins.arg & 15}] = {block.pop()}")
    return GOES_ON


@register_opcode("DELETE_FAST")
def delete_fast(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i = ins.arg
    name = ctx.local_names[i]

    def op(f: Frame) -> int:
        if f.lv[i] is NULL:
            raise unbound_local(name)
        f.lv[i] = NULL
        return nxt

    return op


# -- constants -------------------------------------------------------------------------------------


def load_constant_hooked(f: Frame, value: Any, record: Provenance) -> Any:
    rt = f.rt
    prov = None
    table = rt.prov
    if table is not None:
        entry = table.get(id(value))
        if entry is None or entry[0] is not value:
            table[id(value)] = (value, record)
            prov = record
        else:
            prov = entry[1]
    hook = rt.cb_load_const
    if hook is not None:
        new = hook(value, prov)
        if new is not value and prov is not None:
            rt.record(new, prov)
        return new
    return value


@register_opcode("LOAD_CONST")
def load_const(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    value = ctx.code.co_consts[ins.arg]
    if ctx.hooked_for("load_constant"):
        record = Provenance(ProvenanceKind.CONSTANT, index=value)

        def op_hooked(f: Frame) -> int:
            f.stack.append(load_constant_hooked(f, value, record))
            return nxt

        return op_hooked

    def op(f: Frame) -> int:
        f.stack.append(value)
        return nxt

    return op


@block_template(load_const, helpers={"load_constant_hooked": load_constant_hooked})
def load_const_block(block: BlockBuilder, ins: Instruction) -> int:
    block.stack.append(_constant_in_block(block, ins.argval))
    return GOES_ON


def _constant_in_block(block: BlockBuilder, value: Any) -> str:
    """The name holding constant ``value`` in a block. Hooked, the hook sees every load; with
    provenance, a site's first load in a run records the constant and the site remembers the
    run (``rt.token``): its later loads record nothing."""
    name = block.const(value)
    if not block.hooked_for("load_constant"):
        return name
    if not block.provenance:  # the hook only (it sees no record)
        t = block.temp()
        block.emit(f"{t} = CH({name}, None)")
        return t
    record = block.const(Provenance(ProvenanceKind.CONSTANT, index=value))
    t = block.temp()
    if "load_constant" in block.hooks:
        block.emit(f"{t} = load_constant_hooked(f, {name}, {record})")
        return t
    site = block.const([None])
    block.emit(f"if {site}[0] is RS: {t} = {name}")
    block.emit(f"else: {t} = load_constant_hooked(f, {name}, {record}); {site}[0] = RS")
    if name in block.plain_names:
        block.plain_names.add(t)  # it holds the constant (no hook replaces it)
    return t


@register_opcode("RETURN_CONST", min_version=(3, 12))
def return_const(ins: Instruction, ctx: CompileContext) -> Op:
    value = ctx.code.co_consts[ins.arg]
    if ctx.hooked_for("load_constant"):
        record = Provenance(ProvenanceKind.CONSTANT, index=value)

        def op_hooked(f: Frame) -> int:
            f.retval = load_constant_hooked(f, value, record)
            return 0

        return op_hooked

    def op(f: Frame) -> int:
        f.retval = value
        return 0

    return op


@block_template(return_const, helpers={"load_constant_hooked": load_constant_hooked})
def return_const_block(block: BlockBuilder, ins: Instruction) -> int:
    block.emit(f"f.retval = {_constant_in_block(block, ins.argval)}")
    block.emit("return 0")
    return ENDS_BLOCK


@register_opcode("RETURN_VALUE")
def return_value(ins: Instruction, ctx: CompileContext) -> Op:
    def op(f: Frame) -> int:
        f.retval = f.stack.pop()
        return 0

    return op


@block_template(return_value)
def return_value_block(block: BlockBuilder, ins: Instruction) -> int:
    block.emit(f"f.retval = {block.pop()}")
    block.emit("return 0")
    return ENDS_BLOCK


# -- cells -----------------------------------------------------------------------------------------


def _cell_index(ins: Instruction, ctx: CompileContext) -> int:
    """Index of a cell/free variable in the frame's local slots."""
    if PY_VERSION >= (3, 11):
        return ins.arg
    return ctx.nlocals + ins.arg


def _is_free(ctx: CompileContext, index: int) -> bool:
    return index >= len(ctx.local_names) - len(ctx.code.co_freevars)


@register_opcode("MAKE_CELL", min_version=(3, 11))
def make_cell(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i = ins.arg

    def op(f: Frame) -> int:
        lv = f.lv
        v = lv[i]
        cell = lv[i] = CellType() if v is NULL else CellType(v)
        made = f.rt.cb_make_cell
        if made is not None:
            made(cell)
        return nxt

    return op


@register_opcode("COPY_FREE_VARS", min_version=(3, 11))
def copy_free_vars(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    n = ins.arg

    def op(f: Frame) -> int:
        fn = f.fn
        closure = fn.__closure__ if fn is not None else None
        if closure is not None:
            f.lv[-n:] = closure
        return nxt

    return op


def _cell_get(f: Frame, i: int, name: str, free: bool) -> Any:
    try:
        return f.lv[i].cell_contents
    except ValueError:
        pass
    raise unbound_free(name) if free else unbound_local(name)


def _load_cell_hooked(f: Frame, name: str, value: Any, cell: CellType) -> Any:
    rt = f.rt
    prov = None
    if rt.prov is not None:
        prov = Provenance(
            ProvenanceKind.CLOSURE_CELL,
            name=name,
            function=f.fn.__qualname__ if f.fn is not None else f.code.co_name,
        )
        rt.record(value, prov)
    hook = rt.cb_load_cell
    if hook is not None:
        new = hook(name, value, f.code, prov, cell)
        if new is not value and prov is not None:
            rt.record(new, prov)
        return new
    return value


@register_opcode("LOAD_DEREF")
def load_deref(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i = _cell_index(ins, ctx)
    name = ctx.local_names[i]
    free = _is_free(ctx, i)
    hooked = ctx.hooked

    def op(f: Frame) -> int:
        try:
            v = f.lv[i].cell_contents
        except ValueError:
            v = NULL
        if v is NULL:
            v = _cell_get(f, i, name, free)
        if hooked:
            v = _load_cell_hooked(f, name, v, f.lv[i])
        f.stack.append(v)
        return nxt

    return op


@register_opcode("LOAD_CLASSDEREF", max_version=(3, 11))
@register_opcode("LOAD_FROM_DICT_OR_DEREF", min_version=(3, 12))
def load_classderef(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    hooked = ctx.hooked
    i = _cell_index(ins, ctx)
    name = ctx.local_names[i]
    from_stack = ins.opname == "LOAD_FROM_DICT_OR_DEREF"

    def op(f: Frame) -> int:
        mapping = f.stack.pop() if from_stack else f.names
        if mapping is not None:
            try:
                f.stack.append(mapping[name])
                return nxt
            except KeyError:
                pass
        v = _cell_get(f, i, name, True)
        if hooked:
            v = _load_cell_hooked(f, name, v, f.lv[i])
        f.stack.append(v)
        return nxt

    return op


@register_opcode("STORE_DEREF")
def store_deref(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i = _cell_index(ins, ctx)
    name = ctx.local_names[i]
    hooked = ctx.hooked

    def op(f: Frame) -> int:
        v = f.stack.pop()
        if hooked:
            hook = f.rt.cb_store_cell
            if hook is not None:
                hook(name, v, f.code, f.lv[i])
        f.lv[i].cell_contents = v
        return nxt

    return op


@register_opcode("DELETE_DEREF")
def delete_deref(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i = _cell_index(ins, ctx)
    name = ctx.local_names[i]
    free = _is_free(ctx, i)

    def op(f: Frame) -> int:
        cell = f.lv[i]
        hook = f.rt.cb_delete_cell
        if hook is not None and free:
            try:
                cell.cell_contents  # noqa: B018  (an unbound cell raises below, as CPython does)
                hook(name, f.code, cell)
            except ValueError:
                pass
        try:
            del cell.cell_contents
            return nxt
        except ValueError:
            pass
        raise unbound_free(name) if free else unbound_local(name)

    return op


@register_opcode("LOAD_CLOSURE", max_version=(3, 12))
def load_closure(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i = _cell_index(ins, ctx)

    def op(f: Frame) -> int:
        f.stack.append(f.lv[i])
        return nxt

    return op
