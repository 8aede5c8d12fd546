"""Default lookasides: builtins that need the interpreter's view of the calling frame."""

from __future__ import annotations

import builtins
import functools
import operator
import sys
from collections.abc import Callable, Mapping
from types import CellType, FunctionType, MappingProxyType
from typing import Any

from thunder_interp._exec import exec_lookaside
from thunder_interp._frame import NULL, Frame
from thunder_interp._frames import frame_lookasides
from thunder_interp._implicit_lookasides import CONVERSIONS, converting, implicit_lookasides
from thunder_interp._locals import frame_locals
from thunder_interp._provenance import Provenance
from thunder_interp._registry import PY_VERSION
from thunder_interp._runtime import InternalLookaside, Runtime
from thunder_interp._slots import (
    call_special,
    delete_attr,
    generic_delattr,
    generic_getattr,
    generic_setattr,
    is_python_level,
    load_attr,
    lookup_type,
    repr_of,
    store_attr,
    str_of,
)

__all__ = ["attribute_loaded", "default_lookasides", "frame_globals", "text_lookaside"]


def _no_frame(name: str) -> RuntimeError:
    return RuntimeError(f"{name}() called without an interpreted frame")


def _super(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if args or kwargs or f is None:
        return super(*args, **kwargs)
    code = f.code
    if code.co_argcount == 0 and not (code.co_flags & 4):
        raise RuntimeError("super(): no arguments")
    first_name = code.co_varnames[0]
    first = f.lv[0]
    if isinstance(first, CellType) and first_name in code.co_cellvars:
        first = first.cell_contents
    if first is NULL and PY_VERSION < (3, 11) and first_name in code.co_cellvars:
        cell = f.lv[code.co_nlocals + code.co_cellvars.index(first_name)]
        first = cell.cell_contents
    if first is NULL:
        raise RuntimeError("super(): arg[0] deleted")
    if "__class__" not in code.co_freevars:
        raise RuntimeError("super(): __class__ cell not found")
    index = f.cc.local_names.index("__class__", f.cc.nslots - len(code.co_freevars))
    try:
        cls = f.lv[index].cell_contents
    except ValueError:
        raise RuntimeError("super(): empty __class__ cell") from None
    return super(cls, first)


def _locals(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if args or kwargs or f is None:
        return locals(*args, **kwargs)  # raises the CPython error
    return frame_locals(f)


def text_lookaside(
    kind: Any, check_value: Callable[[Any], None], check_text: Callable[[str], None]
) -> InternalLookaside:
    """A lookaside for ``str`` or ``repr`` (``kind``) of one value that makes its text as the
    program would, a Python ``__str__``/``__repr__`` interpreted (its reads seen), between
    ``check_value(value)`` and ``check_text(text)``, which may raise; other calls are
    ``kind``'s own."""
    text_of = str_of if kind is str else repr_of

    def impl(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if len(args) != 1 or kwargs:
            return kind(*args, **kwargs)
        check_value(args[0])
        text = text_of(rt, args[0])
        check_text(text)
        return text

    return InternalLookaside(kind.__name__, impl)


def number_lookaside(kind: type, first: Callable[..., Any]) -> InternalLookaside:
    """A lookaside for ``int``, ``float`` or ``complex`` (``kind``): ``first(*args, **kwargs)``
    answers unless it returns NotImplemented; else the value is converted as the program would,
    a Python ``__float__``/``__int__``/``__index__`` interpreted (its reads seen)."""
    return InternalLookaside(kind.__name__, converting(kind, CONVERSIONS[kind], first))


def frame_globals(namespace: dict[str, Any]) -> dict[str, Any]:
    """``globals()`` of an interpreted frame: its globals, returned by an opaque call, so that a
    caller sees the program take the dict (what it does with it then runs natively)."""
    return namespace


def _globals(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if args or kwargs or f is None:
        return globals(*args, **kwargs)
    return rt.opaque_call(frame_globals, (f.globals,), None)


def _vars(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if len(args) == 1 and not kwargs:  # obj.__dict__, read as the program reads an attribute
        try:
            value = load_attr(rt, args[0], "__dict__")
        except AttributeError:
            raise TypeError("vars() argument must have __dict__ attribute") from None
        return attribute_loaded(rt, args[0], "__dict__", value)
    if args or kwargs or f is None:
        return vars(*args, **kwargs)
    return frame_locals(f)


def _dir(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if len(args) == 1 and not kwargs:
        # type(obj).__dir__(obj), sorted: a Python ``__dir__`` (or one looked aside) interpreted.
        method = lookup_type(type(args[0]), "__dir__")
        if is_python_level(method) or method in rt.lookasides:
            return sorted(call_special(rt, method, args[0]))
    if args:  # C reads the object's dicts: an opaque call, which a caller sees
        return rt.opaque_call(dir, args, kwargs)
    if kwargs or f is None:
        return dir(*args, **kwargs)
    return sorted(frame_locals(f))


def _exc_info(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if args or kwargs:
        return sys.exc_info(*args, **kwargs)
    exc = rt.topmost_handled()
    if exc is None:
        return (None, None, None)
    return (type(exc), exc, exc.__traceback__)


def _exception(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if args or kwargs:
        return sys.exception(*args, **kwargs)  # type: ignore[attr-defined]
    return rt.topmost_handled()


def _build_class(
    rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    if len(args) < 2:
        raise TypeError("__build_class__: not enough arguments")
    func, name, *bases_list = args
    if not isinstance(func, FunctionType):
        raise TypeError("__build_class__: func must be a function")
    if not isinstance(name, str):
        raise TypeError("__build_class__: name is not a string")
    orig_bases = tuple(bases_list)
    import types

    bases = types.resolve_bases(orig_bases)
    kwds = dict(kwargs)
    meta = kwds.pop("metaclass", NULL)
    is_class = True
    if meta is NULL:
        meta = type(bases[0]) if bases else type
    else:
        is_class = isinstance(meta, type)
    if is_class:
        meta = _calculate_meta(meta, bases)
    prepare = getattr(meta, "__prepare__", None)
    ns = prepare(name, bases, **kwds) if prepare is not None else {}
    if not isinstance(ns, Mapping) and not hasattr(ns, "__getitem__"):
        meta_name = getattr(meta, "__name__", "<metaclass>")
        raise TypeError(f"{meta_name}.__prepare__() must return a mapping, not {type(ns).__name__}")
    cell = rt.run_class_body(func, ns)
    if bases is not orig_bases and bases != orig_bases:
        ns["__orig_bases__"] = orig_bases
    cls = rt.call(meta, (name, bases, ns), kwds, f)
    if isinstance(cls, type) and isinstance(cell, CellType):
        try:
            cell_cls = cell.cell_contents
        except ValueError:
            cell_cls = NULL
        if cell_cls is not cls:
            if cell_cls is NULL:
                raise RuntimeError(
                    f"__class__ not set defining {name!r} as {cls!r}. "
                    "Was __classcell__ propagated to type.__new__?"
                )
            raise TypeError(f"__class__ set to {cell_cls!r} defining {name!r} as {cls!r}")
    return cls


def _calculate_meta(meta: type, bases: tuple[Any, ...]) -> type:
    winner = meta
    for base in bases:
        base_meta = type(base)
        if issubclass(winner, base_meta):
            continue
        if issubclass(base_meta, winner):
            winner = base_meta
            continue
        raise TypeError(
            "metaclass conflict: the metaclass of a derived class must be a (non-strict) "
            "subclass of the metaclasses of all its bases"
        )
    return winner


def _getattr(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if kwargs or len(args) not in (2, 3) or type(args[1]) is not str:
        return getattr(*args, **kwargs)
    obj, name = args[0], args[1]
    try:
        value = load_attr(rt, obj, name)
    except AttributeError:
        hook = rt.cb_load_attr_missing
        if hook is not None:
            hook(obj, name)
        if len(args) == 3:
            return args[2]
        raise
    return attribute_loaded(rt, obj, name, value)


def attribute_loaded(rt: Runtime, obj: Any, name: str, value: Any, generic: bool = False) -> Any:
    """Record provenance and run the ``load_attribute`` hook for ``obj.name -> value`` (the
    ``load_generic_attribute`` hook for ``object.__getattribute__(obj, name)``)."""
    prov: Provenance | None = None
    hook = rt.cb_load_generic_attr if generic else rt.cb_load_attr
    table = rt.prov
    if table is not None:
        entry = table.get(id(obj))
        if entry is not None and entry[0] is obj:
            prov = rt.attribute_record(entry[1], name)
            entry = table.get(id(value))
            if entry is None or entry[0] is not value:
                table[id(value)] = (value, prov)
        elif hook is not None:
            prov = rt.provenance_of(value)
    if hook is not None:
        value = hook(obj, name, value, prov)
    return value


def _setattr(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if kwargs or len(args) != 3 or type(args[1]) is not str:
        return setattr(*args, **kwargs)
    hook = rt.cb_store_attr
    token = hook(args[0], args[1], args[2]) if hook is not None else None
    try:
        store_attr(rt, *args)
    except BaseException:
        rt.write_failed(token)
        raise
    return None


def _delattr(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if kwargs or len(args) != 2 or type(args[1]) is not str:
        return delattr(*args, **kwargs)
    hook = rt.cb_delete_attr
    token = hook(args[0], args[1]) if hook is not None else None
    try:
        delete_attr(rt, *args)
    except BaseException:
        rt.write_failed(token)
        raise
    return None


def _object_getattribute(
    rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    if kwargs or len(args) != 2 or type(args[1]) is not str or not isinstance(args[0], object):
        return object.__getattribute__(*args, **kwargs)
    obj, name = args
    try:
        value = generic_getattr(rt, obj, name)
    except AttributeError:
        hook = rt.cb_load_generic_attr_missing
        if hook is not None:
            hook(obj, name)
        raise
    return attribute_loaded(rt, obj, name, value, generic=True)


def _object_setattr(
    rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    if kwargs or len(args) != 3 or type(args[1]) is not str:
        return object.__setattr__(*args, **kwargs)
    hook = rt.cb_store_attr
    token = hook(*args) if hook is not None else None
    try:
        generic_setattr(rt, *args)
    except BaseException:
        rt.write_failed(token)
        raise
    return None


def _object_delattr(
    rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    if kwargs or len(args) != 2 or type(args[1]) is not str:
        return object.__delattr__(*args, **kwargs)
    hook = rt.cb_delete_attr
    token = hook(*args) if hook is not None else None
    try:
        generic_delattr(rt, *args)
    except BaseException:
        rt.write_failed(token)
        raise
    return None


def _type_call(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``type.__call__(cls, ...)`` (``super().__call__`` in a metaclass): construct ``cls``
    with its Python ``__new__`` and ``__init__`` interpreted."""
    if not args or not isinstance(args[0], type) or (args[0] is type and len(args) == 2):
        return type.__call__(*args, **kwargs)
    return rt.construct(args[0], args[1:], kwargs or None, f)


def _hasattr(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if kwargs or len(args) != 2 or type(args[1]) is not str:
        return hasattr(*args, **kwargs)
    try:
        _getattr(rt, f, args, {})
    except AttributeError:
        return False
    return True


def _attrgetter_call(
    rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``operator.attrgetter(*names)(obj)``: each (dotted) name read as ``getattr`` reads it."""
    getter, call_args = args[0], args[1:]
    if kwargs or len(call_args) != 1:
        return rt.opaque_call(getter, call_args, kwargs)
    names = getter.__reduce__()[1]
    values = tuple(_dotted_attribute(rt, f, call_args[0], name) for name in names)
    return values[0] if len(values) == 1 else values


def _dotted_attribute(rt: Runtime, f: Frame | None, obj: Any, dotted: str) -> Any:
    for name in dotted.split("."):
        obj = _getattr(rt, f, (obj, name), {})
    return obj


def _methodcaller_call(
    rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``operator.methodcaller(name, *a, **kw)(obj)``: ``obj.name`` read, then called."""
    caller, call_args = args[0], args[1:]
    if kwargs or len(call_args) != 1:
        return rt.opaque_call(caller, call_args, kwargs)
    make, made_with = caller.__reduce__()
    if isinstance(make, functools.partial):  # keyword arguments: partial(methodcaller, name, **kw)
        name, method_args, method_kwargs = make.args[0], made_with, dict(make.keywords)
    else:
        name, method_args, method_kwargs = made_with[0], made_with[1:], {}
    method = _getattr(rt, f, (call_args[0], name), {})
    return rt.call(method, method_args, method_kwargs or None, f)


def _build_defaults() -> dict[Any, InternalLookaside]:
    table: dict[Any, InternalLookaside] = {
        super: InternalLookaside("super", _super),
        locals: InternalLookaside("locals", _locals),
        globals: InternalLookaside("globals", _globals),
        vars: InternalLookaside("vars", _vars),
        dir: InternalLookaside("dir", _dir),
        sys.exc_info: InternalLookaside("sys.exc_info", _exc_info),
        exec: exec_lookaside("exec"),
        eval: exec_lookaside("eval"),
        builtins.__build_class__: InternalLookaside("__build_class__", _build_class),
        getattr: InternalLookaside("getattr", _getattr),
        setattr: InternalLookaside("setattr", _setattr),
        delattr: InternalLookaside("delattr", _delattr),
        hasattr: InternalLookaside("hasattr", _hasattr),
        operator.attrgetter.__call__: InternalLookaside("operator.attrgetter", _attrgetter_call),
        operator.methodcaller.__call__: InternalLookaside(
            "operator.methodcaller", _methodcaller_call
        ),
        type.__call__: InternalLookaside("type.__call__", _type_call),
        object.__getattribute__: InternalLookaside("object.__getattribute__", _object_getattribute),
        object.__setattr__: InternalLookaside("object.__setattr__", _object_setattr),
        object.__delattr__: InternalLookaside("object.__delattr__", _object_delattr),
    }
    for fn, impl in implicit_lookasides().items():
        table[fn] = InternalLookaside(getattr(fn, "__qualname__", str(fn)), impl)
    table.update(frame_lookasides())
    if PY_VERSION >= (3, 11):
        table[sys.exception] = InternalLookaside("sys.exception", _exception)  # type: ignore[attr-defined]
    return table


_DEFAULTS: Mapping[Any, InternalLookaside] = MappingProxyType(_build_defaults())


def default_lookasides() -> Mapping[Any, InternalLookaside]:
    """The lookasides every interpretation starts with (user lookasides override them)."""
    return _DEFAULTS
