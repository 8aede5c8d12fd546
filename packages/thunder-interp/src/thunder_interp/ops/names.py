"""Globals, names (class bodies), attributes, subscripts, imports."""

from __future__ import annotations

import builtins
import keyword
from typing import TYPE_CHECKING, Any

from thunder_interp._bytecode import Instruction
from thunder_interp._frame import NULL, Frame
from thunder_interp._lookasides import attribute_loaded
from thunder_interp._provenance import Provenance, ProvenanceKind
from thunder_interp._registry import (
    GOES_ON,
    PY_VERSION,
    CompileContext,
    Op,
    block_template,
    register_opcode,
)
from thunder_interp._slots import (
    ATTR_DESCRIPTORS,
    PLAIN,
    PLAIN_ATTRS,
    delete_item,
    descriptor_attribute,
    get_item,
    plain_reads,
    plain_writes,
    set_item,
)
from thunder_interp._slots import delete_attr as slot_delete_attr
from thunder_interp._slots import load_attr as slot_load_attr
from thunder_interp._slots import store_attr as slot_store_attr
from thunder_interp.ops._common import name_error

if TYPE_CHECKING:
    from thunder_interp._blocks import BlockBuilder
    from thunder_interp._runtime import Runtime

# -- globals ---------------------------------------------------------------------------------------


def global_loaded(f: Frame, name: str, value: Any, from_builtins: bool) -> Any:
    rt = f.rt
    prov = None
    if rt.prov is not None:
        module = "builtins" if from_builtins else f.globals.get("__name__")
        key = (name, module if isinstance(module, str) else None)
        prov = rt.global_records.get(key)
        if prov is None:
            prov = rt.global_records[key] = Provenance(
                ProvenanceKind.GLOBAL, name=key[0], module=key[1]
            )
        rt.record(value, prov)
    hook = rt.cb_load_global
    if hook is not None:
        new = hook(name, value, f.globals, prov)
        if new is not value and prov is not None:
            rt.record(new, prov)
        return new
    return value


def _load_global_value(f: Frame, name: str, hooked: bool) -> Any:
    v = f.globals.get(name, NULL)
    if v is NULL:
        b = f.builtins
        v = b.get(name, NULL) if type(b) is dict else getattr(b, name, NULL)
        if v is NULL:
            raise name_error(name)
        if hooked:
            v = global_loaded(f, name, v, True)
    elif hooked:
        v = global_loaded(f, name, v, False)
    return v


@register_opcode("LOAD_GLOBAL")
def load_global(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    name = ins.argval if isinstance(ins.argval, str) else ctx.code.co_names[ins.arg >> 1]
    push_null = _pushes_null(ins)
    null_first = PY_VERSION < (3, 13)
    hooked = ctx.hooked_for("load_global")
    if not push_null and not hooked:

        def op_plain(f: Frame) -> int:
            v = f.globals.get(name, NULL)
            if v is NULL:
                v = _load_global_value(f, name, False)
            f.stack.append(v)
            return nxt

        return op_plain

    def op(f: Frame) -> int:
        v = _load_global_value(f, name, hooked)
        st = f.stack
        if push_null:
            if null_first:
                st += (NULL, v)
            else:
                st += (v, NULL)
        else:
            st.append(v)
        return nxt

    return op


def _pushes_null(ins: Instruction) -> bool:
    """3.11+: LOAD_GLOBAL also pushes a NULL (before the value; after it from 3.13)."""
    return PY_VERSION >= (3, 11) and bool(ins.arg & 1)


@block_template(load_global, helpers={"load_global": _load_global_value})
def load_global_block(block: BlockBuilder, ins: Instruction) -> int:
    name = block.const(ins.argval)
    push_null = _pushes_null(ins)
    if push_null and PY_VERSION < (3, 13):
        block.stack.append("NULL")
    t = block.temp()
    if block.hooked_for("load_global"):
        _hooked_global_lines(block, t, name)
    else:
        block.emit(f"{t} = G.get({name}, NULL)")
        block.emit(f"if {t} is NULL:")
        _builtin_lines(block, t, name, "    ")
        block.emit(f"    if {t} is NULL: {t} = load_global(f, {name}, False)")
    block.stack.append(t)
    if push_null and PY_VERSION >= (3, 13):
        block.stack.append("NULL")
    return GOES_ON


def _builtin_lines(block: BlockBuilder, t: str, name: str, indent: str) -> None:
    """``t``: the builtin ``name`` when the builtins are a dict (NULL when it has none)."""
    b = block.temp()
    block.emit(f"{indent}{b} = f.fn.__builtins__")
    block.emit(f"{indent}{t} = {b}.get({name}, NULL) if type({b}) is dict else NULL")


def _hooked_global_lines(block: BlockBuilder, t: str, name: str) -> None:
    """The hook sees every load; with provenance, as for constants (``ops.locals``), a load that
    finds what the site's last load in this run found (by identity: the provenance table keeps
    the value alive) records nothing new."""
    if "load_global" in block.hooks and block.provenance:
        block.emit(f"{t} = load_global(f, {name}, True)")
        return
    block.emit(f"{t} = G.get({name}, NULL)")
    block.emit(f"if {t} is NULL:")
    _builtin_lines(block, t, name, "    ")
    if not block.provenance:
        # The hook only: it sees the value with no record (as global_loaded).
        block.emit(f"    if {t} is NULL: {t} = load_global(f, {name}, True)")
        block.emit(f"    else: {t} = GH({name}, {t}, G, None)")
        block.emit(f"else: {t} = GH({name}, {t}, G, None)")
        return
    site = block.const([None, 0])
    block.emit(f"if {t} is NULL or {site}[0] is not RS or {site}[1] != id({t}):")
    block.emit(f"    {t} = load_global(f, {name}, True)")
    block.emit(f"    {site}[0] = RS; {site}[1] = id({t})")


@register_opcode("STORE_GLOBAL")
def store_global(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    name = ins.argval
    hooked = ctx.hooked

    def op(f: Frame) -> int:
        v = f.stack.pop()
        if hooked:
            hook = f.rt.cb_store_global
            if hook is not None:
                hook(name, v, f.globals)
        f.globals[name] = v
        return nxt

    return op


@register_opcode("DELETE_GLOBAL")
def delete_global(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    name = ins.argval

    def op(f: Frame) -> int:
        if name not in f.globals:
            raise name_error(name)
        hook = f.rt.cb_delete_global
        if hook is not None:
            hook(name, f.globals)
        del f.globals[name]
        return nxt

    return op


# -- names (class bodies, module code) ------------------------------------------------------------


def _names_get(mapping: Any, name: str) -> Any:
    if type(mapping) is dict:
        return mapping.get(name, NULL)
    try:
        return mapping[name]
    except KeyError:
        return NULL


@register_opcode("LOAD_NAME")
def load_name(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    name = ins.argval
    hooked = ctx.hooked

    def op(f: Frame) -> int:
        names = f.names
        v = _names_get(names, name) if names is not None else NULL
        if v is NULL:
            v = _load_global_value(f, name, hooked)
        elif hooked and names is f.globals:
            # Module code (its names are its globals): the read is a global read.
            v = global_loaded(f, name, v, False)
        f.stack.append(v)
        return nxt

    return op


@register_opcode("LOAD_FROM_DICT_OR_GLOBALS", min_version=(3, 12))
def load_from_dict_or_globals(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    name = ins.argval
    hooked = ctx.hooked

    def op(f: Frame) -> int:
        mapping = f.stack.pop()
        v = _names_get(mapping, name)
        if v is NULL:
            v = _load_global_value(f, name, hooked)
        f.stack.append(v)
        return nxt

    return op


@register_opcode("LOAD_LOCALS", min_version=(3, 12))
def load_locals(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        if f.names is None:
            raise SystemError("no locals found")
        f.stack.append(f.names)
        return nxt

    return op


@register_opcode("STORE_NAME")
def store_name(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    name = ins.argval
    hooked = ctx.hooked

    def op(f: Frame) -> int:
        v = f.stack.pop()
        names = f.names
        if names is None:
            raise SystemError(f"no locals found when storing {name!r}")
        if hooked and names is f.globals:
            hook = f.rt.cb_store_global
            if hook is not None:
                hook(name, v, f.globals)
        names[name] = v
        return nxt

    return op


@register_opcode("DELETE_NAME")
def delete_name(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    name = ins.argval

    def op(f: Frame) -> int:
        names = f.names
        if names is None:
            raise SystemError(f"no locals when deleting {name!r}")
        hook = f.rt.cb_delete_global
        if hook is not None and names is f.globals and name in names:
            hook(name, names)
        try:
            del names[name]
            return nxt
        except Exception:
            pass
        # Whatever the mapping raised, CPython replaces it (no chaining) with a NameError.
        raise name_error(name)

    return op


# -- attributes -------------------------------------------------------------------------------------


@register_opcode("LOAD_ATTR")
@register_opcode("LOAD_METHOD", max_version=(3, 11))
def load_attr(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    name = ins.argval
    method = _loads_method(ins)
    null_first = PY_VERSION < (3, 13)
    hooked = ctx.hooked_for("load_attribute", "load_attribute_missing")
    if not method and not hooked:

        def op_plain(f: Frame) -> int:
            st = f.stack
            obj = st[-1]
            if type(obj) in PLAIN_ATTRS:
                st[-1] = getattr(obj, name)
            else:
                st[-1] = slot_load_attr(f.rt, obj, name)
            return nxt

        return op_plain

    def op(f: Frame) -> int:
        st = f.stack
        obj = st[-1]
        v = load_attribute(f, obj, name) if hooked else attribute_value(f, obj, name)
        if method:
            if null_first:
                st[-1] = NULL
                st.append(v)
            else:
                st[-1] = v
                st.append(NULL)
        else:
            st[-1] = v
        return nxt

    return op


def _loads_method(ins: Instruction) -> bool:
    """Whether the load also pushes a NULL, for a CALL of the method (before the value; after
    it from 3.13)."""
    return ins.opname == "LOAD_METHOD" or (PY_VERSION >= (3, 12) and bool(ins.arg & 1))


def _spelled_as_attribute(name: str) -> bool:
    """Whether generated code writes ``obj.name`` for the attribute (an identifier, not a
    keyword; names starting with ``__`` go through ``getattr``/``setattr``)."""
    return name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("__")


def attribute_value(f: Frame, obj: Any, name: str) -> Any:
    """``obj.name`` from interpreted code (no hooks)."""
    cls = type(obj)
    if cls in PLAIN_ATTRS:
        return getattr(obj, name)
    names = ATTR_DESCRIPTORS.get(cls)
    if names is not None:
        if name not in names:
            # An instance of a class with properties, not one of them (blocks now read it).
            value = getattr(obj, name)
            plain_reads(name).add(cls)
            return value
        return descriptor_attribute(f.rt, obj, cls, name)  # a property, say
    return slot_load_attr(f.rt, obj, name)


def load_attribute(f: Frame, obj: Any, name: str) -> Any:
    """``obj.name`` from interpreted code, with provenance and the ``load_attribute`` hook (it
    also fires when Python code computed the value, after that code's own loads)."""
    try:
        if type(obj) in PLAIN_ATTRS:
            value = getattr(obj, name)
        else:
            value = slot_load_attr(f.rt, obj, name)
    except AttributeError:
        # The program may catch it: its path then depends on the attribute's absence.
        hook = f.rt.cb_load_attr_missing
        if hook is not None:
            hook(obj, name)
        raise
    return attribute_loaded(f.rt, obj, name, value)


@block_template(
    load_attr,
    helpers={
        "PA": PLAIN_ATTRS,
        "attribute_value": attribute_value,
        "attribute_loaded": attribute_loaded,
        "load_attribute": load_attribute,
    },
)
def load_attr_block(block: BlockBuilder, ins: Instruction) -> int:
    attr = ins.argval
    method = _loads_method(ins)
    o = block.pop()
    if method and PY_VERSION < (3, 13):
        block.stack.append("NULL")
    name = block.const(attr)
    fast = f"{o}.{attr}" if _spelled_as_attribute(attr) else f"getattr({o}, {name})"
    plain = f"type({o}) in PA or type({o}) in {block.const(plain_reads(attr))}"
    read = f"{fast} if {plain} else attribute_value(f, {o}, {name})"
    if block.hooked_for("load_attribute", "load_attribute_missing"):
        block.stack.append(_hooked_attribute_lines(block, o, name, read))
    else:
        block.push_expr(f"({read})")
    if method and PY_VERSION >= (3, 13):
        block.stack.append("NULL")
    return GOES_ON


def _hooked_attribute_lines(block: BlockBuilder, o: str, name: str, read: str) -> str:
    """The hooks see every read (the missing hook every read that raises AttributeError); with
    provenance and no hook, only a read from a value with a provenance has more to do than the
    plain read: record the value's."""
    t = block.temp()
    if block.provenance:
        if "load_attribute" in block.hooks or "load_attribute_missing" in block.hooks:
            block.emit(f"{t} = load_attribute(f, {o}, {name})")
            return t
        e = block.temp()
        block.emit(f"{t} = {read}")
        block.emit(f"{e} = PT.get(id({o}))")
        block.emit(
            f"if {e} is not None and {e}[0] is {o}: {t} = attribute_loaded(rt, {o}, {name}, {t})"
        )
        return t
    # The hooks only: the plain read, then the hook (as ``load_attribute`` calls them).
    if "load_attribute_missing" in block.hooks:
        block.emit("try:")
        block.emit(f"    {t} = {read}")
        block.emit(f"except AttributeError: rt.cb_load_attr_missing({o}, {name}); raise")
    else:
        block.emit(f"{t} = {read}")
    if "load_attribute" in block.hooks:
        block.emit(f"{t} = AH({o}, {name}, {t}, None)")
    return t


def hooked_store_attr(rt: Runtime, obj: Any, name: str, v: Any) -> None:
    """``obj.name = v`` after the ``store_attribute`` hook, which hears of a failed store."""
    hook = rt.cb_store_attr
    stored_after_hook(rt, obj, name, v, hook(obj, name, v) if hook is not None else None)


def stored_after_hook(rt: Runtime, obj: Any, name: str, v: Any, token: Any) -> None:
    """``obj.name = v`` once the ``store_attribute`` hook gave ``token`` (told of a failure)."""
    try:
        if type(obj) in PLAIN_ATTRS:
            setattr(obj, name, v)
        else:
            slot_store_attr(rt, obj, name, v)
    except BaseException:
        rt.write_failed(token)
        raise


@register_opcode("STORE_ATTR")
def store_attr(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    name = ins.argval

    def op(f: Frame) -> int:
        st = f.stack
        obj = st.pop()
        v = st.pop()
        hook = f.rt.cb_store_attr
        if hook is not None:
            hooked_store_attr(f.rt, obj, name, v)
        elif type(obj) in PLAIN_ATTRS:
            setattr(obj, name, v)
        else:
            slot_store_attr(f.rt, obj, name, v)
        return nxt

    return op


@block_template(
    store_attr,
    helpers={
        "PA": PLAIN_ATTRS,
        "store_attr": slot_store_attr,
        "stored_after_hook": stored_after_hook,
    },
)
def store_attr_block(block: BlockBuilder, ins: Instruction) -> int:
    attr = ins.argval
    o = block.pop()
    v = block.pop()
    name = block.const(attr)
    plain = f"type({o}) in PA or type({o}) in {block.const(plain_writes(attr))}"
    store = f"{o}.{attr} = {v}" if _spelled_as_attribute(attr) else f"setattr({o}, {name}, {v})"
    if block.hooked and "store_attribute" in block.hooks:
        # The hook first; a store that fails is reported to it (``stored_after_hook``).
        token = block.temp()
        block.emit(f"{token} = rt.cb_store_attr({o}, {name}, {v})")
        block.emit(f"if {plain}:")
        block.emit(f"    try: {store}")
        block.emit(f"    except BaseException: rt.write_failed({token}); raise")
        block.emit(f"else: stored_after_hook(rt, {o}, {name}, {v}, {token})")
        return GOES_ON
    block.emit(f"if {plain}: {store}")
    block.emit(f"else: store_attr(f.rt, {o}, {name}, {v})")
    return GOES_ON


@register_opcode("DELETE_ATTR")
def delete_attr(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    name = ins.argval

    def op(f: Frame) -> int:
        obj = f.stack.pop()
        hook = f.rt.cb_delete_attr
        token = hook(obj, name) if hook is not None else None
        try:
            if type(obj) in PLAIN_ATTRS:
                delattr(obj, name)
            else:
                slot_delete_attr(f.rt, obj, name)
        except BaseException:
            f.rt.write_failed(token)
            raise
        return nxt

    return op


@register_opcode("LOAD_SUPER_ATTR", min_version=(3, 12))
def load_super_attr(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    hooked = ctx.hooked
    name = ins.argval
    method = bool(ins.arg & 1)
    two_args = bool(ins.arg & 2)
    null_first = PY_VERSION < (3, 13)

    def op(f: Frame) -> int:
        st = f.stack
        self_ = st.pop()
        cls = st.pop()
        global_super = st.pop()
        if two_args or global_super is super:
            sup = f.rt.call(global_super, (cls, self_), None, f)
        else:
            sup = f.rt.call(global_super, (), None, f)
        v = slot_load_attr(f.rt, sup, name)
        if hooked:
            v = attribute_loaded(f.rt, sup, name, v)
        if method:
            st += (NULL, v) if null_first else (v, NULL)
        else:
            st.append(v)
        return nxt

    return op


# -- subscripts ---------------------------------------------------------------------------------


def item_loaded(f: Frame, container: Any, key: Any, value: Any) -> None:
    rt = f.rt
    if rt.cb_load_item is not None:
        rt.cb_load_item(container, key, value)
    if rt.prov is not None:
        parent = rt.provenance_of(container)
        if parent is not None:
            rt.record(value, Provenance(ProvenanceKind.ITEM, index=key, parent=parent))


def load_item(f: Frame, container: Any, key: Any) -> Any:
    """``container[key]`` from interpreted code, with the ``load_item`` hook and provenance."""
    try:
        if type(container) in PLAIN and type(key) in PLAIN:
            v = container[key]
        else:
            v = get_item(f.rt, container, key)
    except (KeyError, IndexError):
        hook = f.rt.cb_load_item_missing
        if hook is not None:
            hook(container, key)
        raise
    item_loaded(f, container, key, v)
    return v


@register_opcode("BINARY_SUBSCR")
def binary_subscr(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    if ctx.hooked_for("load_item", "load_item_missing"):

        def op_hooked(f: Frame) -> int:
            st = f.stack
            key = st.pop()
            st[-1] = load_item(f, st[-1], key)
            return nxt

        return op_hooked

    def op(f: Frame) -> int:
        st = f.stack
        key = st.pop()
        c = st[-1]
        st[-1] = c[key] if type(c) in PLAIN and type(key) in PLAIN else get_item(f.rt, c, key)
        return nxt

    return op


@block_template(binary_subscr, helpers={"load_item": load_item, "get_item": get_item})
def binary_subscr_block(block: BlockBuilder, ins: Instruction) -> int:
    k = block.pop()
    c = block.pop()
    if block.hooked_for("load_item", "load_item_missing"):
        block.push_expr(f"load_item(f, {c}, {k})")
    else:
        block.push_expr(
            f"({c}[{k}] if type({c}) in P and type({k}) in P else get_item(f.rt, {c}, {k}))"
        )
    return GOES_ON


def hooked_store_item(rt: Runtime, container: Any, key: Any, value: Any) -> None:
    """``container[key] = value`` after the ``store_item`` hook (if set), which hears of a
    failed store."""
    hook = rt.cb_store_item
    token = hook(container, key, value) if hook is not None else None
    try:
        if type(container) in PLAIN:
            container[key] = value
        else:
            set_item(rt, container, key, value)
    except BaseException:
        rt.write_failed(token)
        raise


@register_opcode("STORE_SUBSCR")
def store_subscr(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    if ctx.hooked and "store_item" in ctx.hooks:

        def op_hooked(f: Frame) -> int:
            st = f.stack
            key = st.pop()
            container = st.pop()
            value = st.pop()
            hooked_store_item(f.rt, container, key, value)
            return nxt

        return op_hooked

    def op(f: Frame) -> int:
        st = f.stack
        key = st.pop()
        container = st.pop()
        if type(container) in PLAIN:
            container[key] = st.pop()
        else:
            set_item(f.rt, container, key, st.pop())
        return nxt

    return op


@block_template(
    store_subscr, helpers={"set_item": set_item, "hooked_store_item": hooked_store_item}
)
def store_subscr_block(block: BlockBuilder, ins: Instruction) -> int:
    k = block.pop()
    c = block.pop()
    v = block.pop()
    if block.hooked and "store_item" in block.hooks:
        block.emit(f"hooked_store_item(f.rt, {c}, {k}, {v})")
        return GOES_ON
    block.emit(f"if type({c}) in P: {c}[{k}] = {v}")
    block.emit(f"else: set_item(f.rt, {c}, {k}, {v})")
    return GOES_ON


@register_opcode("DELETE_SUBSCR")
def delete_subscr(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        key = st.pop()
        container = st.pop()
        hook = f.rt.cb_delete_item
        token = hook(container, key) if hook is not None else None
        try:
            if type(container) in PLAIN:
                del container[key]
            else:
                delete_item(f.rt, container, key)
        except BaseException:
            f.rt.write_failed(token)
            raise
        return nxt

    return op


@register_opcode("BINARY_SLICE", min_version=(3, 12))
def binary_slice(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    if ctx.hooked:

        def op_hooked(f: Frame) -> int:
            st = f.stack
            stop = st.pop()
            start = st.pop()
            container = st[-1]
            v = container[start:stop]
            item_loaded(f, container, slice(start, stop), v)
            st[-1] = v
            return nxt

        return op_hooked

    def op(f: Frame) -> int:
        st = f.stack
        stop = st.pop()
        start = st.pop()
        st[-1] = st[-1][start:stop]
        return nxt

    return op


@register_opcode("STORE_SLICE", min_version=(3, 12))
def store_slice(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    hooked = ctx.hooked

    def op(f: Frame) -> int:
        st = f.stack
        stop = st.pop()
        start = st.pop()
        container = st.pop()
        value = st.pop()
        hook = f.rt.cb_store_item if hooked else None
        token = hook(container, slice(start, stop), value) if hook is not None else None
        try:
            container[start:stop] = value
        except BaseException:
            f.rt.write_failed(token)
            raise
        return nxt

    return op


@register_opcode("BUILD_SLICE")
def build_slice(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    n = ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        if n == 3:
            step = st.pop()
            stop = st.pop()
            st[-1] = slice(st[-1], stop, step)
        else:
            stop = st.pop()
            st[-1] = slice(st[-1], stop)
        return nxt

    return op


# -- imports ---------------------------------------------------------------------------------------


@register_opcode("IMPORT_NAME")
def import_name(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    name = ins.argval

    def op(f: Frame) -> int:
        st = f.stack
        fromlist = st.pop()
        level = st.pop()
        import_ = f.builtins.get("__import__", NULL) if type(f.builtins) is dict else NULL
        if import_ is NULL:
            raise ImportError("__import__ not found")
        locals_ = f.names if f.names is not None else None
        st.append(import_(name, f.globals, locals_, fromlist, level))
        return nxt

    return op


@register_opcode("IMPORT_FROM")
def import_from(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    name = ins.argval

    def op(f: Frame) -> int:
        module = f.stack[-1]
        v = getattr(module, name, NULL)
        if v is NULL:
            v = _import_from_fallback(module, name)
        f.stack.append(v)
        return nxt

    return op


def _import_from_fallback(module: Any, name: str) -> Any:
    import sys

    pkgname = getattr(module, "__name__", None)
    if isinstance(pkgname, str):
        full = f"{pkgname}.{name}"
        found = sys.modules.get(full)
        if found is not None:
            return found
    mod_name = pkgname if isinstance(pkgname, str) else "<unknown module name>"
    path = getattr(module, "__file__", None)
    if path is None:
        msg = f"cannot import name '{name}' from '{mod_name}' (unknown location)"
    else:
        msg = f"cannot import name '{name}' from '{mod_name}' ({path})"
    raise ImportError(msg, name=mod_name, path=path)


def import_star(f: Frame, module: Any) -> None:
    names = f.names
    if names is None:
        raise SystemError("no locals found during 'import *'")
    all_names = getattr(module, "__all__", None)
    if all_names is None:
        all_names = [k for k in module.__dict__ if not k.startswith("_")]
    for k in all_names:
        names[k] = getattr(module, k)


@register_opcode("IMPORT_STAR", max_version=(3, 11))
def import_star_op(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        import_star(f, f.stack.pop())
        return nxt

    return op


@register_opcode("SETUP_ANNOTATIONS")
def setup_annotations(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        names = f.names
        if names is None:
            raise SystemError("no locals found when setting up annotations")
        if _names_get(names, "__annotations__") is NULL:
            names["__annotations__"] = {}
        return nxt

    return op


@register_opcode("LOAD_BUILD_CLASS")
def load_build_class(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        b = f.builtins
        v = (
            b.get("__build_class__", NULL)
            if type(b) is dict
            else getattr(b, "__build_class__", NULL)
        )
        if v is NULL:
            raise NameError("__build_class__ not found")
        f.stack.append(v)
        return nxt

    return op


_ = builtins
