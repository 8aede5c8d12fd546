"""Building containers and strings, unpacking, ``match`` statements, intrinsics."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from thunder_interp._bytecode import Instruction
from thunder_interp._frame import NULL, Frame
from thunder_interp._provenance import Provenance, ProvenanceKind
from thunder_interp._registry import (
    GOES_ON,
    PY_VERSION,
    CompileContext,
    Op,
    block_template,
    register_opcode,
)
from thunder_interp._slots import convert, format_of, get_iter, iterable_arg, next_item
from thunder_interp.ops._common import function_str

if TYPE_CHECKING:
    from thunder_interp._blocks import BlockBuilder
    from thunder_interp._runtime import Runtime


@register_opcode("BUILD_TUPLE")
def build_tuple(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    n = ins.arg
    if n == 0:

        def op0(f: Frame) -> int:
            f.stack.append(())
            return nxt

        return op0

    def op(f: Frame) -> int:
        st = f.stack
        t = tuple(st[-n:])
        del st[-n:]
        st.append(t)
        return nxt

    return op


@block_template(build_tuple)
def build_tuple_block(block: BlockBuilder, ins: Instruction) -> int:
    items = block.pop_values(ins.arg)
    block.push_expr(f"({', '.join(items)},)" if items else "()")
    return GOES_ON


@register_opcode("BUILD_LIST")
def build_list(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    n = ins.arg
    if n == 0:

        def op0(f: Frame) -> int:
            f.stack.append([])
            return nxt

        return op0

    def op(f: Frame) -> int:
        st = f.stack
        t = st[-n:]
        del st[-n:]
        st.append(t)
        return nxt

    return op


@block_template(build_list)
def build_list_block(block: BlockBuilder, ins: Instruction) -> int:
    block.push_expr(f"[{', '.join(block.pop_values(ins.arg))}]")
    return GOES_ON


@register_opcode("BUILD_SET")
def build_set(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    n = ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        items = st[len(st) - n :]
        del st[len(st) - n :]
        st.append(set(items))
        return nxt

    return op


@register_opcode("BUILD_MAP")
def build_map(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    n = ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        items = st[len(st) - 2 * n :]
        del st[len(st) - 2 * n :]
        d = {}
        for i in range(0, 2 * n, 2):
            d[items[i]] = items[i + 1]
        st.append(d)
        return nxt

    return op


@register_opcode("BUILD_CONST_KEY_MAP")
def build_const_key_map(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    n = ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        keys = st.pop()
        values = st[len(st) - n :]
        del st[len(st) - n :]
        st.append(dict(zip(keys, values)))
        return nxt

    return op


@register_opcode("BUILD_STRING")
def build_string(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    n = ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        s = "".join(st[len(st) - n :])
        del st[len(st) - n :]
        st.append(s)
        return nxt

    return op


@register_opcode("LIST_APPEND")
def list_append(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i = -ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        v = st.pop()
        st[i].append(v)
        return nxt

    return op


@register_opcode("SET_ADD")
def set_add(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i = -ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        v = st.pop()
        st[i].add(v)
        return nxt

    return op


@register_opcode("MAP_ADD")
def map_add(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i = -ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        v = st.pop()
        k = st.pop()
        st[i][k] = v
        return nxt

    return op


@register_opcode("LIST_EXTEND")
def list_extend(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i = -ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        iterable = st.pop()
        target = st[i]
        try:
            target.extend(iterable_arg(f.rt, iterable))
            return nxt
        except TypeError:
            if hasattr(type(iterable), "__iter__") or hasattr(type(iterable), "__getitem__"):
                raise
        raise TypeError(f"Value after * must be an iterable, not {type(iterable).__name__}")

    return op


@register_opcode("SET_UPDATE")
def set_update(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i = -ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        v = st.pop()
        st[i].update(iterable_arg(f.rt, v))
        return nxt

    return op


@register_opcode("DICT_UPDATE")
def dict_update(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    i = -ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        update = st.pop()
        if not hasattr(type(update), "keys"):
            raise TypeError(f"'{type(update).__name__}' object is not a mapping")
        st[i].update(update)
        return nxt

    return op


def _callable_below(st: list[Any], oparg: int) -> Any:
    fn = st[-(oparg + 2)]
    if fn is NULL:
        fn = st[-(oparg + 3)]
    return fn


@register_opcode("DICT_MERGE")
def dict_merge(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    oparg = ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        update = st.pop()
        target = st[-oparg]
        if not hasattr(type(update), "keys"):
            fn = _callable_below(st, oparg)
            raise TypeError(
                f"{function_str(fn)} argument after ** must be a mapping, not {type(update).__name__}"
            )
        for key in update.keys():  # noqa: SIM118 (the mapping protocol: keys())
            if key in target:
                fn = _callable_below(st, oparg)
                if isinstance(key, str):
                    raise TypeError(
                        f"{function_str(fn)} got multiple values for keyword argument '{key}'"
                    )
                raise TypeError("keywords must be strings")
            target[key] = update[key]
        return nxt

    return op


@register_opcode("LIST_TO_TUPLE", max_version=(3, 11))
def list_to_tuple(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        st[-1] = tuple(st[-1])
        return nxt

    return op


def _unpack_error(value: Any, n: int, got: int | None) -> Exception:
    if got is None:
        return TypeError(f"cannot unpack non-iterable {type(value).__name__} object")
    return ValueError(f"not enough values to unpack (expected {n}, got {got})")


def _too_many(n: int) -> Exception:
    return ValueError(f"too many values to unpack (expected {n})")


def _unpack_sequence(rt: Runtime, value: Any, n: int) -> list[Any]:
    t = type(value)
    if t is tuple or t is list:
        if len(value) == n:
            items = list(value)
            items.reverse()
            return items
        if len(value) < n:
            raise _unpack_error(value, n, len(value))
        raise _too_many(n)
    if not hasattr(t, "__iter__") and not hasattr(t, "__getitem__"):
        raise _unpack_error(value, n, None)
    it = get_iter(rt, value)
    items = []
    for _ in range(n):
        v = next_item(rt, it)
        if v is NULL:
            raise _unpack_error(value, n, len(items))
        items.append(v)
    if next_item(rt, it) is not NULL:
        raise _too_many(n)
    items.reverse()
    return items


@register_opcode("UNPACK_SEQUENCE")
def unpack_sequence(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    n = ins.arg
    hooked = ctx.hooked_for()  # provenance

    def op(f: Frame) -> int:
        st = f.stack
        value = st.pop()
        if type(value) is tuple and len(value) == n and not hooked:
            st.extend(value[::-1])
            return nxt
        items = _unpack_sequence(f.rt, value, n)
        if hooked and f.rt.prov is not None:
            parent = f.rt.provenance_of(value)
            if parent is not None:
                for k, item in enumerate(reversed(items)):
                    f.rt.record(item, Provenance(ProvenanceKind.ITEM, index=k, parent=parent))
        st.extend(items)
        return nxt

    return op


@register_opcode("UNPACK_EX")
def unpack_ex(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    before = ins.arg & 0xFF
    after = ins.arg >> 8

    def op(f: Frame) -> int:
        st = f.stack
        value = st.pop()
        t = type(value)
        if not hasattr(t, "__iter__") and not hasattr(t, "__getitem__"):
            raise _unpack_error(value, before + after, None)
        items = list(iterable_arg(f.rt, value))
        if len(items) < before + after:
            raise ValueError(
                f"not enough values to unpack (expected at least {before + after}, got {len(items)})"
            )
        head = items[:before]
        middle = items[before : len(items) - after]
        tail = items[len(items) - after :]
        result = [*head, middle, *tail]
        result.reverse()
        st.extend(result)
        return nxt

    return op


# -- formatting ---------------------------------------------------------------------------------


@register_opcode("FORMAT_VALUE", max_version=(3, 12))
def format_value(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    which = ins.arg & 3
    has_spec = bool(ins.arg & 4)

    def op(f: Frame) -> int:
        st = f.stack
        spec = st.pop() if has_spec else ""
        value = convert(f.rt, st[-1], which)
        if type(value) is str and not spec:
            st[-1] = value
        else:
            st[-1] = format_of(f.rt, value, spec)
        return nxt

    return op


@register_opcode("CONVERT_VALUE", min_version=(3, 13))
def convert_value(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    which = ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        st[-1] = convert(f.rt, st[-1], which)
        return nxt

    return op


@register_opcode("FORMAT_SIMPLE", min_version=(3, 13))
def format_simple(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        v = st[-1]
        if type(v) is not str:
            st[-1] = format_of(f.rt, v, "")
        return nxt

    return op


@register_opcode("FORMAT_WITH_SPEC", min_version=(3, 13))
def format_with_spec(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        spec = st.pop()
        st[-1] = format_of(f.rt, st[-1], spec)
        return nxt

    return op


# -- match statements -------------------------------------------------------------------------


@register_opcode("MATCH_MAPPING")
def match_mapping(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        st.append(bool(type(st[-1]).__flags__ & (1 << 6)))
        return nxt

    return op


@register_opcode("MATCH_SEQUENCE")
def match_sequence(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        st.append(bool(type(st[-1]).__flags__ & (1 << 5)))
        return nxt

    return op


@register_opcode("MATCH_KEYS")
def match_keys(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        keys = st[-1]
        subject = st[-2]
        values: list[Any] | None = []
        seen: list[Any] = []
        get = subject.get
        for key in keys:
            if key in seen:
                raise ValueError(f"mapping pattern checks duplicate key ({key!r})")
            seen.append(key)
            v = get(key, NULL)
            if v is NULL:
                values = None
                break
            values.append(v)  # type: ignore[union-attr]
        result = tuple(values) if values is not None else None
        if PY_VERSION < (3, 11):
            st.append(result)
            st.append(result is not None)
        else:
            st.append(result)
        return nxt

    return op


@register_opcode("MATCH_CLASS")
def match_class(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)
    nargs = ins.arg

    def op(f: Frame) -> int:
        st = f.stack
        names = st.pop()
        cls = st.pop()
        subject = st.pop()
        result = _match_class(f.rt, f, subject, cls, nargs, names)
        if PY_VERSION < (3, 11):
            st.append(result if result is not None else subject)
            st.append(result is not None)
        else:
            st.append(result)
        return nxt

    return op


_MATCH_SELF_TYPES = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)


def _match_class(
    rt: Runtime, f: Frame, subject: Any, cls: Any, nargs: int, names: tuple[str, ...]
) -> tuple[Any, ...] | None:
    if not isinstance(cls, type):
        raise TypeError(
            "called match pattern must be a class"
            if PY_VERSION >= (3, 12)
            else "called match pattern must be a type"
        )
    # The class check and the attribute reads go through the lookasides of ``isinstance`` and
    # ``getattr``, as the same check written out does: a caller's ``isinstance`` answers for
    # stand-in values (the jit's proxies), and attribute reads reach its hooks.
    if not rt.call(isinstance, (subject, cls), None, f):
        return None
    attrs: list[Any] = []
    seen: list[str] = []
    match_self = False
    if nargs:
        match_args = getattr(cls, "__match_args__", NULL)
        if match_args is NULL:
            match_self = _is_match_self(cls)
            match_args = ()
        elif type(match_args) is not tuple:
            raise TypeError(
                f"{cls.__name__}.__match_args__ must be a tuple (got {type(match_args).__name__})"
            )
        allowed = 1 if match_self else len(match_args)
        if allowed < nargs:
            plural = "" if allowed == 1 else "s"
            raise TypeError(
                f"{cls.__name__}() accepts {allowed} positional sub-pattern{plural} ({nargs} given)"
            )
        if match_self:
            attrs.append(subject)
        else:
            for i in range(nargs):
                name = match_args[i]
                if not isinstance(name, str):
                    raise TypeError(
                        f"__match_args__ elements must be strings (got {type(name).__name__})"
                    )
                if name in seen:
                    raise TypeError(
                        f"{cls.__name__}() got multiple sub-patterns for attribute '{name}'"
                    )
                seen.append(name)
                v = rt.call(getattr, (subject, name, NULL), None, f)
                if v is NULL:
                    return None
                attrs.append(v)
    for name in names:
        if name in seen:
            raise TypeError(f"{cls.__name__}() got multiple sub-patterns for attribute '{name}'")
        seen.append(name)
        v = rt.call(getattr, (subject, name, NULL), None, f)
        if v is NULL:
            return None
        attrs.append(v)
    return tuple(attrs)


def _is_match_self(cls: type) -> bool:
    return any(issubclass(cls, t) for t in _MATCH_SELF_TYPES)


@register_opcode("COPY_DICT_WITHOUT_KEYS", max_version=(3, 10))
def copy_dict_without_keys(ins: Instruction, ctx: CompileContext) -> Op:
    nxt = ctx.next_index(ins)

    def op(f: Frame) -> int:
        st = f.stack
        keys = st[-1]
        subject = st[-2]
        rest = dict(subject)
        for k in keys:
            del rest[k]
        st[-1] = rest
        return nxt

    return op


_ = Mapping
