"""Callbacks: optional hooks the interpreter calls on loads, stores and opaque calls."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import CellType, CodeType, FunctionType
from typing import Any

from thunder_interp._provenance import Provenance

__all__ = ["CALL_HOOKS", "PROVENANCE", "Callbacks", "hook_profile"]


@dataclass(frozen=True)
class Callbacks:
    """Hooks for a binding layer. Every field is optional.

    Load hooks return the value the program will see (return ``value`` to keep it); that is how a
    binding layer substitutes proxies. ``provenance`` is the record of the value (``None`` unless
    ``interpret(..., provenance=True)``).

    - ``load_global(name, value, globals, provenance) -> value``: a global or builtin is read
      (``LOAD_GLOBAL``, and ``LOAD_NAME`` when it falls back to globals/builtins).
    - ``load_closure_cell(name, value, code, provenance, cell) -> value``: a closure cell is
      read (``cell`` is the cell object: functions made by one ``def`` share ``code``).
    - ``load_constant(value, provenance) -> value``: a constant of a code object is read.
    - ``load_defaults(fn) -> (defaults, kwdefaults) | None``: a call of the Python function
      ``fn`` is about to be bound, and ``fn`` has default values (read from ``fn.__defaults__``
      and ``fn.__kwdefaults__`` without a load the other hooks see). A pair returned is bound
      instead of them, for the rest of the interpretation (while ``fn``'s own stay the same).
    - ``load_attribute(obj, name, value, provenance) -> value``: ``obj.name`` was read.
    - ``load_attribute_missing(obj, name) -> None``: ``obj.name``, ``getattr(obj, name[,
      default])`` or ``hasattr(obj, name)`` found no such attribute (the program's path depends
      on its absence, where it catches the ``AttributeError``).
    - ``load_generic_attribute(obj, name, value, provenance) -> value`` and
      ``load_generic_attribute_missing(obj, name) -> None``: the same for an explicit
      ``object.__getattribute__(obj, name)`` (``super().__getattribute__(name)`` inside a class's
      own ``__getattribute__``): the generic lookup, which that class's ``obj.name`` does not
      run. Unset, ``load_attribute`` and ``load_attribute_missing`` are called instead.
    - ``store_global(name, value, globals) -> None``: before a global is written.
    - ``store_closure_cell(name, value, code, cell) -> None``: before a closure cell is written.
    - ``make_cell(cell) -> None``: the program made a cell (a frame's cell variable): a closure
      cell it reads or writes later is the program's own, any other one was made outside it.
    - ``store_attribute(obj, name, value) -> token``: before ``obj.name = value``. The four
      store and delete hooks of attributes and items may return a token (not ``None``):
      ``write_failed(token)`` is called where the write then raises instead of writing.
    - ``load_item(container, key, value) -> None``: after ``value = container[key]`` was read
      (``BINARY_SUBSCR``; ``BINARY_SLICE`` passes a ``slice``). A notification: the value stays.
    - ``load_item_missing(container, key) -> None``: ``container[key]`` raised ``KeyError`` or
      ``IndexError`` (the program's path may depend on the key's absence: ``Mapping.get``).
    - ``store_item(container, key, value) -> None``: before ``container[key] = value`` (a slice
      assignment ``c[a:b] = v`` passes ``slice(a, b)`` as the key).
    - ``delete_global(name, globals) -> None``: before ``del name`` of a global.
    - ``delete_closure_cell(name, code, cell) -> None``: before ``del name`` of a closure cell.
    - ``delete_attribute(obj, name) -> None``: before ``del obj.name``.
    - ``delete_item(container, key) -> None``: before ``del container[key]``.
    - ``compare_identity(a, b, same) -> bool | None``: ``a is b`` (or ``is not``) compared two
      objects, neither ``None``; ``same`` is the answer. The program's path may depend on it.
      A bool returned is the answer instead (values that stand for others: proxies).
    - ``identity_used(obj, container=None) -> None``: a native operation's result depended on
      which object ``obj`` is (its class compares by identity): ``obj in container``,
      ``hash(obj)``, an ``==`` that no hook saw. Also an ``obj in container`` of an ``obj`` whose
      ``==`` is its own but whose hash is its id (a proxy), passing the container.
    - ``descriptor_get(obj, name, descr) -> None``: ``obj.name`` is about to run the Python
      ``__get__`` of ``descr``, an object found on ``type(obj)`` (its code may read and write
      the descriptor's own state).
    - ``special_lookup(cls, name, found) -> None | found``: the interpreter looked ``name`` (a
      ``__dunder__``) up on a Python class ``cls`` itself (``_PyType_Lookup``: ``len(x)``,
      ``x[k]``, calling an instance, ``__init__``, a custom ``__getattribute__``) and found
      ``found`` in its MRO. A class can change after that (a method replaced), and with it
      what the program does. A result other than ``None`` is found instead (a stand-in class
      answering for one whose method was replaced).
    - ``opaque_call(fn, args, kwargs) -> result``: called *instead of* an opaque callable (a C
      function, or one the interpreter does not enter); it must perform the call itself, e.g.
      ``return fn(*args, **kwargs)``, and may replace the result.
    - ``write_failed(token) -> None``: the store or deletion whose hook returned ``token``
      raised (``del d[missing]``, a read-only attribute): it wrote nothing, what the hook
      recorded of it is void (the exception goes on to the program).
    - ``exception_handled(exc) -> None``: ``exc`` is about to enter one of the program's own
      handlers (an ``except`` clause, a ``finally`` block, a ``with`` block's exit), which may
      catch it: if the interpreted function then returns, it was caught.
    """

    load_global: Callable[[str, Any, dict[str, Any], Provenance | None], Any] | None = None
    load_closure_cell: Callable[[str, Any, CodeType, Provenance | None, CellType], Any] | None = (
        None
    )
    load_constant: Callable[[Any, Provenance | None], Any] | None = None
    load_defaults: (
        Callable[[FunctionType], tuple[tuple[Any, ...] | None, dict[str, Any] | None] | None] | None
    ) = None
    load_attribute: Callable[[Any, str, Any, Provenance | None], Any] | None = None
    load_attribute_missing: Callable[[Any, str], None] | None = None
    load_generic_attribute: Callable[[Any, str, Any, Provenance | None], Any] | None = None
    load_generic_attribute_missing: Callable[[Any, str], None] | None = None
    load_item_missing: Callable[[Any, Any], None] | None = None
    store_global: Callable[[str, Any, dict[str, Any]], None] | None = None
    store_closure_cell: Callable[[str, Any, CodeType, CellType], None] | None = None
    make_cell: Callable[[CellType], None] | None = None
    store_attribute: Callable[[Any, str, Any], object] | None = None
    store_item: Callable[[Any, Any, Any], object] | None = None
    load_item: Callable[[Any, Any, Any], None] | None = None
    delete_global: Callable[[str, dict[str, Any]], None] | None = None
    delete_closure_cell: Callable[[str, CodeType, CellType], None] | None = None
    delete_attribute: Callable[[Any, str], object] | None = None
    delete_item: Callable[[Any, Any], object] | None = None
    special_lookup: Callable[[type, str, Any], Any] | None = None
    compare_identity: Callable[[Any, Any, bool], bool | None] | None = None
    identity_used: Callable[..., None] | None = None
    descriptor_get: Callable[[Any, str, Any], None] | None = None
    opaque_call: Callable[[Callable[..., Any], tuple[Any, ...], dict[str, Any]], Any] | None = None
    exception_handled: Callable[[BaseException], None] | None = None
    write_failed: Callable[[Any], None] | None = None


PROVENANCE = "provenance"
"""The member of a hook profile that stands for provenance recording (see :func:`hook_profile`)."""

CALL_HOOKS = frozenset({"opaque_call", "special_lookup", "load_defaults"})
"""Hooks that calls and special-method lookups test for themselves: an interpretation with no
other hook and no provenance runs the plain (unhooked) ops."""


def hook_profile(callbacks: Callbacks | None, provenance: bool) -> frozenset[str]:
    """The names of the hooks of ``callbacks`` that are set, with :data:`PROVENANCE` when
    provenance is recorded: what code compiled for an interpretation may rely on (compiled code
    is kept per profile, so that it tests at run time for no hook it knows to be unset)."""
    names = (
        [name for name, value in vars(callbacks).items() if value is not None] if callbacks else []
    )
    if provenance:
        names.append(PROVENANCE)
    return frozenset(names)
