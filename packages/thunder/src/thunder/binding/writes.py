"""Writes: stores, deletions and container mutations of outside state are recorded for the
epilogue (as templates it can rebuild on every call) and undone when tracing ends, so tracing
itself has no visible effect."""

from __future__ import annotations

import collections
import contextlib
import copy
import copyreg
import inspect
import itertools
import types
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.modules.module as _nn_module

from thunder.access import GLOBAL, Access
from thunder.binding.reads import ReadsMixin, _interpreted, native_unchanged
from thunder.binding.state import (
    _CONTAINER_MUTATORS,
    _HEAPTYPE,
    _MISSING,
    _SCALAR_TYPES,
    ExternalRef,
    Guard,
    Rebuilt,
    Write,
    _cell_is_set,
    is_ndarray,
    is_scalar_constant,
    new_function,
    restorable_base,
)
from thunder.errors import (
    RunsEagerly,
    UnsupportedSideEffectError,
)
from thunder.lookasides import SymbolicSize, is_library_code
from thunder_ir import Proxy, TensorProxy

_NEWOBJ = getattr(copyreg, "__newobj__")  # noqa: B009 (not in the stubs)
_SUSPENDED_CODE = (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)
# C types the program may build and return or store, rebuilt by their ``__reduce_ex__`` as a
# Python class's instance is (their own code is torch-free: the rebuilt one equals the program's).
_REDUCED_BUILTINS = frozenset(
    {collections.OrderedDict, collections.defaultdict, collections.deque, types.SimpleNamespace}
)
# A defaultdict's factories rebuilt as constants (builtin types, not made by the program).
_PLAIN_FACTORIES = frozenset({list, dict, set, tuple, int, float, str, collections.OrderedDict})


def _is_built_object(value: Any) -> bool:
    """An instance of a Python class (not a class, tensor or module), as the program may build
    and store one."""
    return bool(type(value).__flags__ & _HEAPTYPE) and not isinstance(
        value, (type, torch.Tensor, torch.nn.Module)
    )


def _restore_item(d: dict[str, Any], name: str, old: Any) -> None:
    if old is _MISSING:
        d.pop(name, None)
    else:
        d[name] = old


def _restore_cell(cell: types.CellType, old: Any) -> None:
    if old is _MISSING:
        if _cell_is_set(cell):
            del cell.cell_contents
    else:
        cell.cell_contents = old


def _restore_attr(obj: Any, name: str, old: Any) -> None:
    # A class's own __setattr__ or __delattr__ in user code has effects of its own (a log, a
    # counter) that undoing must not make: the attribute is put back by the first one of a base
    # class that is not user code (object's, nn.Module's).
    cls = type(obj)
    if old is _MISSING:
        if hasattr(obj, name):
            _native_attribute_hook(cls, "__delattr__")(obj, name)
    elif isinstance(obj, torch.nn.Module) and name in obj._buffers:
        obj._buffers[name] = old  # (an earlier store of this call may have left a proxy there)
    else:
        _native_attribute_hook(cls, "__setattr__")(obj, name, old)


def _user_attribute_hook(cls: type, how: str) -> Any:
    """The ``__setattr__`` or ``__delattr__`` (``how``) of ``cls`` when it is Python code the
    trace interprets (a user class's own), else None (object's, or a library's run natively)."""
    hook = _class_attr(cls, how)
    return hook if _interpreted(hook) else None


def _native_attribute_hook(cls: type, how: str) -> Any:
    """The ``__setattr__`` or ``__delattr__`` (``how``) of ``cls``'s first class in the method
    resolution order whose own one is not interpreted user code."""
    for k in cls.__mro__:
        hook = vars(k).get(how)
        if hook is not None and not _interpreted(hook):
            return hook
    return getattr(object, how)


def _refuse_user_attribute_hook(obj: Any, name: str, how: str) -> None:
    """A store (``how``: ``__setattr__``) or deletion of an attribute of an outside object whose
    class defines that special method in user code: the epilogue replays the write through it,
    which runs it again on top of its own effects the trace recorded. Eager runs the call.
    A library's hook (transformers' config maps attribute aliases) is replayed as before: the
    ones in use only rename the key and have no effect of their own to repeat."""
    hook = _user_attribute_hook(type(obj), how)
    if hook is not None and not is_library_code(hook.__code__):
        action = "sets" if how == "__setattr__" else "deletes"
        raise RunsEagerly(
            f"{action} the attribute {name!r} of a {type(obj).__name__}, whose class defines "
            f"{how} ({hook.__qualname__}), which a compiled program cannot replay once per "
            "write"
        )


def _absent(container: Any, key: Any) -> bool:
    try:
        return key not in container
    except TypeError:  # an unhashable key: setdefault raises as well
        return False


def _class_attr(cls: type, name: str) -> Any:
    return next((vars(k)[name] for k in cls.__mro__ if name in vars(k)), None)


def _python_data_descriptor(cls: type, name: str, how: str) -> Any:
    """The Python function a store (``how``: ``__set__``) or deletion (``__delete__``) of
    ``name`` on a ``cls`` instance runs through a data descriptor of the class, or None."""
    descr = _class_attr(cls, name)
    if descr is None or isinstance(descr, (types.MemberDescriptorType, types.GetSetDescriptorType)):
        return None
    if type(descr) is property:
        fn = descr.fset if how == "__set__" else descr.fdel
        return fn if isinstance(fn, types.FunctionType) else None
    fn = _class_attr(type(descr), how)
    return fn if isinstance(fn, types.FunctionType) else None


def _instance_dict(obj: Any) -> dict[str, Any] | None:
    try:
        state = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None
    return state if type(state) is dict else None


def _replayable_sort_options(kw: dict[str, Any]) -> bool:
    return (
        set(kw) <= {"key", "reverse"}
        and kw.get("key") is None
        and type(kw.get("reverse", False)) in (bool, int)
    )


# The stores of an nn.Module besides its ``__dict__`` that its ``__setattr__`` and
# ``__delattr__`` change.
_MODULE_STORES = ("_parameters", "_buffers", "_modules", "_non_persistent_buffers_set")
_REGISTERED = ("buffer", "module", "parameter")


def module_setattr(module: torch.nn.Module, name: str, value: Any) -> None:
    """``module.name = value``: a computed tensor assigned to a buffer replaces the buffer, as in
    eager (the store is recorded and replayed by the epilogue, and undone after tracing)."""
    if isinstance(value, TensorProxy) and name in module._buffers:
        module._buffers[name] = value  # type: ignore[assignment]
        return
    torch.nn.Module.__setattr__(module, name, value)


def _restore_container(container: Any, snapshot: Any) -> None:
    if isinstance(container, list):
        container[:] = snapshot
    else:
        container.clear()
        container.update(snapshot)


# Mutators that, failing, may leave a container changed part way (an update whose iterable
# raises after some items; a sort whose comparison raises).
_PARTIAL_ON_FAILURE = frozenset(
    {
        "extend",
        "sort",
        "__iadd__",
        "update",
        "__ior__",
        "difference_update",
        "intersection_update",
        "symmetric_difference_update",
    }
)


def same_contents(before: Any, now: Any) -> bool:
    """Whether container ``now`` holds the same objects as its copy ``before``."""
    if isinstance(now, dict):
        return list(before) == list(now) and all(before[k] is v for k, v in now.items())
    if isinstance(now, list):
        return len(before) == len(now) and all(a is b for a, b in zip(before, now, strict=True))
    return bool(before == now)


class RecordedWrite:
    """What the hook of one write recorded (``WritesMixin._recorded``): taken back where the
    write then fails natively (``WritesMixin.write_failed``), as eager, where it raised,
    changed nothing."""

    def __init__(self, binder: WritesMixin, container: Any) -> None:
        effects, paths = binder.effects, binder.paths
        self.container = container  # (a container mutated, else None)
        self.writes = len(effects.writes)
        self.own_undo: list[Callable[[], None]] = []
        self._sets = [
            (s, set(s)) for s in (effects.written_paths, effects.inserted, effects.mutated)
        ]
        self._dicts = [
            (d, len(d)) for d in (effects.escaped, paths.access_of, paths.modules, paths.bound_at)
        ]
        self.writes_end = self.writes
        self._added_to_sets: list[tuple[set[Any], set[Any]]] = []
        self._added_to_dicts: list[tuple[dict[Any, Any], list[Any]]] = []

    def finish(self, binder: WritesMixin) -> RecordedWrite | None:
        self.writes_end = len(binder.effects.writes)
        self._added_to_sets = [(s, s - before) for s, before in self._sets if len(s) > len(before)]
        self._added_to_dicts = [
            (d, list(itertools.islice(reversed(d.keys()), len(d) - n)))
            for d, n in self._dicts
            if len(d) > n
        ]
        self._sets, self._dicts = [], []
        recorded = self.writes_end > self.writes or self.own_undo
        return self if recorded or self._added_to_sets or self._added_to_dicts else None

    def take_back(self, binder: WritesMixin) -> None:
        writes = binder.effects.writes
        if self.writes_end > self.writes and len(writes) != self.writes_end:
            # The write ran code of the program's that wrote as well before it raised (a
            # descriptor's setter): those writes stay, the failed one cannot be singled out.
            raise RunsEagerly(
                "makes a store that raised after code it ran (a setter) wrote state, which a "
                "compiled program cannot replay"
            )
        if self.writes_end > self.writes:
            del writes[self.writes :]
            positions = getattr(writes, "positions", None)
            if positions is not None:
                del positions[self.writes :]
        binder.effects.undo[:] = [
            u for u in binder.effects.undo if not any(u is own for own in self.own_undo)
        ]
        for s, added in self._added_to_sets:
            s -= added
        for d, keys in self._added_to_dicts:
            for k in keys:
                d.pop(k, None)


class WritesMixin(ReadsMixin):
    """Outside writes, deletions and mutations."""

    _recording: RecordedWrite | None = None

    def _recorded(
        self, record: Callable[..., None], *args: Any, container: Any = None
    ) -> RecordedWrite | None:
        """``record(*args)``, what it records of a write kept apart: returned (None where it
        recorded nothing) for ``write_failed`` to take back where the write then raises."""
        outer, self._recording = self._recording, RecordedWrite(self, container)
        try:
            record(*args)
            recorded = self._recording.finish(self)
        finally:
            self._recording = outer
        return recorded

    def _undo_own(self, undo: Callable[[], None]) -> None:
        """``undo`` puts back what the write being recorded changes: void with the write."""
        self.effects.undo.append(undo)
        if self._recording is not None:
            self._recording.own_undo.append(undo)

    def write_failed(self, recorded: RecordedWrite) -> None:
        """The write ``recorded`` raised natively (caught by the program, it goes on): eager
        wrote nothing, so nothing is replayed. A container mutation that raised depended on
        the container's contents (``list.remove`` of a missing item): they are guarded."""
        container = recorded.container
        recorded.take_back(self)
        if container is not None:
            self._note_content_read_of(container)

    def _cb_store_global(self, name: str, value: Any, globs: dict[str, Any]) -> None:
        module = globs.get("__name__")
        module = module if isinstance(module, str) else f"<globals {id(globs):x}>"
        self.paths.globals_dicts.setdefault(module, globs)
        access = Access(GLOBAL, (module, name))
        template = self._template(value, f"global {name}")
        old = globs.get(name, _MISSING)
        self.effects.undo.append(lambda: _restore_item(globs, name, old))
        self.effects.writes.append(Write("global", access, name, template))
        self.effects.written_paths.add(access)
        self._track_stored(value, access)

    def _cb_store_cell(
        self, name: str, value: Any, code: types.CodeType, cell: types.CellType
    ) -> None:
        cell_access = self._cell_access(cell, name, code)
        if cell_access is None:
            return  # a cell made by this call
        template = self._template(value, f"nonlocal {name}")
        old = cell.cell_contents if _cell_is_set(cell) else _MISSING
        self.effects.undo.append(lambda: _restore_cell(cell, old))
        self.effects.writes.append(Write("cell", cell_access, name, template))
        self.effects.written_paths.add(cell_access)
        self._track_stored(value, cell_access)

    def _requires_grad_(self, t: TensorProxy, requires_grad: bool = True) -> TensorProxy:
        raise NotImplementedError  # calls.CallsMixin

    def refuse_inference_tensor(self, value: Any, what: str) -> None:
        raise NotImplementedError  # calls.CallsMixin

    def _cb_store_attribute(self, obj: Any, name: str, value: Any) -> RecordedWrite | None:
        return self._recorded(self._store_attribute, obj, name, value)

    def _store_attribute(self, obj: Any, name: str, value: Any) -> None:
        if isinstance(obj, TensorProxy):
            if name == "requires_grad":
                # as x.requires_grad_(b) (transformers' gradient checkpointing sets it); the
                # store then sets the proxy's flag
                self._requires_grad_(obj, value)
                return
            if name == "data":
                # x.data = y: torch.compile's split gets ``setattr(x, "data", y)`` wrong (the
                # call returns y, not None): eager runs the call.
                raise RunsEagerly("sets torch.Tensor.data, swapping the tensor's storage")
            # x.grad = g: torch's tensor state, which the trace does not model; torch runs it
            # (the program runs split there).
            from thunder_ir.ops.fallback import TorchRunsItError

            raise TorchRunsItError(f"torch.Tensor.{name} = ...", "it sets a tensor attribute")
        self._refuse_detached(obj, f"sets the attribute {name!r} of")
        access = self.access_for(obj)
        if access is None:
            self._refuse_escaped(obj, f"sets the attribute {name!r} of")
            return
        if self._through_setter(obj, name, access, "__set__"):
            return
        _refuse_user_attribute_hook(obj, name, "__setattr__")
        self._snapshot_attribute_stores(obj)
        self._module_hook_on_copies(obj, torch.nn.Module.__setattr__, name, value)
        template = self._template(value, f"attribute {name}")
        own = self.paths.container_at.get(access.attr("__dict__"))
        if own is not None:
            # Its __dict__ was read (a cached_property's cache): the contents the call found,
            # before this write changes them, are what a later item write guards.
            self._snapshot_entry(own)
        old = getattr(obj, name, _MISSING)
        self._undo_own(lambda: _restore_attr(obj, name, old))
        self.effects.writes.append(Write("attr", access, name, template))
        self.effects.written_paths.add(access.attr(name))
        self._track_stored(value, access.attr(name))

    def _snapshot_attribute_stores(self, obj: Any) -> None:
        """Before a native ``__setattr__`` or ``__delattr__`` (object's, nn.Module's) changes
        ``obj``: each of its stores as the call found it, its instance dict and a module's
        others. Undoing puts back all of them (the attribute may move between stores: a buffer
        deleted, a parameter replaced by a module), and a later read of a store (``vars(obj)``,
        ``"k" in self.__dict__`` in ``register_buffer``) sees the program's writes while its
        guards state the entry contents (``ReadsMixin._changed_natively``, ``as_found``)."""
        state = _instance_dict(obj)
        if state is None:
            return
        others = _MODULE_STORES if isinstance(obj, torch.nn.Module) else ()
        for store in (state, *(state.get(name) for name in others)):
            if (
                type(store) in (dict, OrderedDict, set)
                and id(store) not in self.effects.module_stores
            ):
                self._snapshot_entry(store)
                self.effects.module_stores[id(store)] = store

    def _module_hook_on_copies(self, obj: Any, hook: Any, name: str, *value: Any) -> None:
        """The copies holding proxies the program sees of a module's ``_parameters`` and
        ``_buffers`` changed as nn.Module's native ``hook`` (``__setattr__``/``__delattr__``),
        about to run, changes the stores themselves: the program may hold a copy already
        (``bufs = self._buffers; del self.b; len(bufs)``). The hook runs first on a stand-in
        of the module holding copies of its stores."""
        state = _instance_dict(obj) if isinstance(obj, torch.nn.Module) else None
        if state is None or _class_attr(type(obj), hook.__name__) is not hook:
            return
        copies = []
        for store in ("_parameters", "_buffers"):
            original = state.get(store)
            known = self.inputs.proxied_copies.get(id(original))
            if known is not None and known[0] is original:
                copies.append((store, known[1]))
        if not copies:
            return
        if any(getattr(_nn_module, f"_global_{k}_registration_hooks") for k in _REGISTERED):
            raise UnsupportedSideEffectError(
                f"thunder.jit: the function sets or deletes the attribute {name!r} of a module "
                "whose stores it holds, while global module registration hooks are set"
            )
        stand_in_state = {k: copy.copy(v) if k in _MODULE_STORES else v for k, v in state.items()}
        try:
            stand_in = object.__new__(type(obj))
            object.__setattr__(stand_in, "__dict__", stand_in_state)
        except TypeError as e:
            raise UnsupportedSideEffectError(
                f"thunder.jit: the function sets or deletes the attribute {name!r} of a "
                f"{type(obj).__name__} whose stores it holds ({e})"
            ) from e
        try:
            # (as the interpreter runs it: ``module_setattr`` is its lookaside)
            (module_setattr if hook is torch.nn.Module.__setattr__ else hook)(
                stand_in, name, *value
            )
        except Exception:  # (the native call raises it for the program)
            return
        for store, copied in copies:
            copied.clear()
            copied.update((k, self._as_seen(v)) for k, v in stand_in_state[store].items())

    def _through_setter(self, obj: Any, name: str, access: Access, how: str) -> bool:
        """A store or deletion that runs a descriptor's Python code (a property's setter):
        setting the old value back would run that code again, not undo it. Interpreted, its own
        writes are recorded (replaying the outer one too would run the setter twice): True.
        Run natively (behind a native ``__setattr__``: ``nn.Module``'s), the instance dict is
        restored after tracing and what it changed there counts as written by the program."""
        descr = _python_data_descriptor(type(obj), name, how)
        if descr is None:
            return False
        self.effects.written_paths.add(access.attr(name))
        setattr_ = _class_attr(type(obj), "__delattr__" if how == "__delete__" else "__setattr__")
        native_store = setattr_ in (object.__setattr__, object.__delattr__)
        if (native_store or _interpreted(setattr_)) and _interpreted(descr):
            return True
        self._snapshot_attribute_stores(obj)
        state = _instance_dict(obj)
        if state is not None and id(obj) not in self.effects.dict_snapshots:
            snapshot = dict(state)
            self.effects.dict_snapshots[id(obj)] = (obj, access, snapshot)
            self.effects.undo.append(lambda: _restore_container(state, snapshot))
        return False

    def _track_stored(self, value: Any, access: Access | None, depth: int = 0) -> None:
        """A container the program made and stored into outside state is outside state from now
        on: what the program does to it later (or to the containers it holds) is replayed on
        it, found where it was stored. Stored where no path leads (``access`` None), a later
        mutation cannot be replayed and is refused."""
        container = type(value) in _CONTAINER_MUTATORS
        if not (container or _is_built_object(value)) or self.access_for(value) is not None:
            return
        if access is None or depth > 8:
            self.effects.escaped[id(value)] = value
            return
        stored = Access(access.kind, access.key, access.parent, version=len(self.effects.writes))
        self._associate(value, stored)
        self.effects.inserted.add(stored)
        if not container:
            return  # an object of a Python class: later stores into it are replayed on it
        if isinstance(value, dict):
            for k, v in value.items():
                self._track_stored(v, stored.item(k), depth + 1)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self._track_stored(v, stored.item(i), depth + 1)
        elif isinstance(value, (set, frozenset)):
            pass  # holds no mutable containers

    def _track_inserted(self, container: Any, access: Access, method: str, args: Any) -> None:
        """Containers the program made that a mutation of outside ``container`` (called before
        it runs) puts into outside state."""
        if (method == "__setitem__" and len(args) == 2 and type(args[0]) is not slice) or (
            method == "setdefault" and len(args) == 2 and _absent(container, args[0])
        ):
            self._track_stored(args[1], access.item(args[0]))
        elif method == "append" and isinstance(container, list) and len(args) == 1:
            self._track_stored(args[0], access.item(len(container)))
        else:
            for a in args:
                for v in a if type(a) in (list, tuple) else (a,):
                    self._track_stored(v, None)

    def _cb_delete_global(self, name: str, globs: dict[str, Any]) -> None:
        module = globs.get("__name__")
        module = module if isinstance(module, str) else f"<globals {id(globs):x}>"
        self.paths.globals_dicts.setdefault(module, globs)
        old = globs[name]
        self.effects.undo.append(lambda: _restore_item(globs, name, old))
        self.effects.writes.append(Write("del_global", Access(GLOBAL, (module, name)), name, None))
        self.effects.written_paths.add(Access(GLOBAL, (module, name)))

    def _cb_delete_cell(self, name: str, code: types.CodeType, cell: types.CellType) -> None:
        cell_access = self._cell_access(cell, name, code)
        if cell_access is None:
            return  # a cell made by this call
        old = cell.cell_contents
        self.effects.undo.append(lambda: _restore_cell(cell, old))
        self.effects.writes.append(Write("del_cell", cell_access, name, None))
        self.effects.written_paths.add(cell_access)

    def _cb_delete_attribute(self, obj: Any, name: str) -> RecordedWrite | None:
        return self._recorded(self._delete_attribute, obj, name)

    def _delete_attribute(self, obj: Any, name: str) -> None:
        self._refuse_detached(obj, f"deletes the attribute {name!r} of")
        access = self.access_for(obj)
        if access is None:
            self._refuse_escaped(obj, f"deletes the attribute {name!r} of")
            return
        if self._through_setter(obj, name, access, "__delete__"):
            return
        _refuse_user_attribute_hook(obj, name, "__delattr__")
        self._snapshot_attribute_stores(obj)
        self._module_hook_on_copies(obj, torch.nn.Module.__delattr__, name)
        old = getattr(obj, name, _MISSING)
        self._undo_own(lambda: _restore_attr(obj, name, old))
        self.effects.writes.append(Write("del_attr", access, name, None))
        self.effects.written_paths.add(access.attr(name))

    def _cb_delete_item(self, container: Any, key: Any) -> RecordedWrite | None:
        return self._recorded(self._delete_item, container, key, container=container)

    def _delete_item(self, container: Any, key: Any) -> None:
        if isinstance(container, Proxy):
            return
        if self._is_namespace(container) and type(key) is str:
            self._cb_delete_global(key, container)  # del globals()[k] is del k
            return
        if is_ndarray(container):
            self._refuse_array_write(container)
        elif type(container) in _CONTAINER_MUTATORS:
            self._record_mutation(container, "__delitem__", (key,), {})
            self._note_content_read_of(container)  # it raises where the item is missing
        elif self.access_for(container) is not None:
            raise UnsupportedSideEffectError(
                f"thunder.jit: cannot replay deleting an item of a {type(container).__name__} "
                "that the function did not create"
            )

    def _cb_store_item(self, container: Any, key: Any, value: Any) -> RecordedWrite | None:
        return self._recorded(self._store_item, container, key, value, container=container)

    def _store_item(self, container: Any, key: Any, value: Any) -> None:
        if isinstance(container, Proxy):
            return
        if self._is_namespace(container) and type(key) is str:
            self._cb_store_global(key, value, container)  # globals()[k] = v is k = v
            return
        if is_ndarray(container):
            self._refuse_array_write(container)
        elif type(container) in _CONTAINER_MUTATORS:
            self._record_mutation(container, "__setitem__", (key, value), {})
        elif self.access_for(container) is not None:
            raise UnsupportedSideEffectError(
                f"thunder.jit: cannot replay item assignment on a {type(container).__name__} "
                "that the function did not create"
            )

    def _record_mutation(self, container: Any, method: str, args: tuple[Any, ...], kw: Any) -> None:
        self._refuse_detached(container, f"calls {method} on")
        if self._is_namespace(container):
            raise UnsupportedSideEffectError(
                f"thunder.jit: cannot replay dict.{method} on a module's globals; assign the "
                "names (globals()[name] = value) instead"
            )
        access = self.access_for(container)
        if access is None:
            self._refuse_escaped(container, f"calls {method} on")
            return  # created by the program
        if kw and not (method == "sort" and _replayable_sort_options(kw)):
            # (a key the interpreter wraps to interpret it has no path to replay it by)
            raise UnsupportedSideEffectError(
                f"thunder.jit: cannot replay {type(container).__name__}.{method} with keywords"
            )
        what = f"{type(container).__name__}.{method} argument"
        template = self._template(tuple(args), what)
        if kw:
            template = (template, {k: self._template(v, what) for k, v in kw.items()})
        self._snapshot_entry(container)
        self.effects.mutated.add(id(container))
        self._mirror_on_original(container, method, args)
        if id(container) in self.facts.content_read:
            self._guard_entry_contents(container, access)
        else:
            # The guards made when it was loaded (its length or keys, its items) stay: the program
            # may have looked at the contents in ways no hook reports (``len``, ``in``, a truth
            # test, iterating) before this write, so the entry contents are part of what it
            # relied on.
            self.facts.guards.setdefault(access, Guard(access, "type", type(container)))
        self.effects.writes.append(Write("call_kw" if kw else "call", access, method, template))
        self._track_inserted(container, access, method, args)

    def _snapshot_entry(self, container: Any) -> None:
        """What ``container`` held when the call found it, before its first change."""
        if id(container) not in self.effects.snapshotted:
            self.effects.snapshotted.add(id(container))
            snapshot = copy.copy(container)
            self.effects.snapshots[id(container)] = snapshot
            self.effects.undo.append(lambda: _restore_container(container, snapshot))
            self.effects.entry_contents[id(container)] = (
                copy.deepcopy(snapshot) if is_scalar_constant(snapshot) else _MISSING
            )

    def _mirror_on_original(self, container: Any, method: str, args: tuple[Any, ...]) -> None:
        """A mutation of the copy (holding proxies) the program sees of an outside dict of
        tensors, made on the outside dict too while tracing (undone after): code run natively
        reads that dict, not the copy (``nn.Module.__getattr__`` reads ``_parameters``), and
        must see what the program wrote there (``module._parameters[k] = w``, as
        ``torch.func.functional_call`` does)."""
        original = self._original_of_copy(container)
        if original is None:
            return
        if id(original) not in self.effects.snapshotted:
            self.effects.snapshotted.add(id(original))
            snapshot = copy.copy(original)
            self.effects.snapshots[id(original)] = snapshot
            self.effects.undo.append(lambda: _restore_container(original, snapshot))
        with contextlib.suppress(KeyError, TypeError):  # the copy raises the same for the program
            getattr(original, method)(*args)

    def _original_of_copy(self, container: Any) -> dict[Any, Any] | None:
        if not isinstance(container, dict):
            return None
        for original, copied in self.inputs.proxied_copies.values():
            if copied is container and isinstance(original, dict):
                return original
        return None

    def _refuse_escaped(self, obj: Any, what: str) -> None:
        if id(obj) in self.effects.escaped and self.effects.escaped[id(obj)] is obj:
            raise UnsupportedSideEffectError(
                f"thunder.jit: the function {what} a {type(obj).__name__} it made and put into "
                "an outside container where later calls cannot find it again; build it "
                "completely before storing it"
            )

    def _template(self, value: Any, what: str, memo: dict[int, Any] | None = None) -> Any:
        """``value`` as something the epilogue can rebuild on every call. A list, dict or
        object met twice is one template object (``memo``), which the epilogue builds once:
        the rebuilt value shares its parts as the program's did."""
        if isinstance(value, (Proxy, *_SCALAR_TYPES)):
            self.refuse_inference_tensor(value, what)
            return value
        access = self.access_for(value)
        if access is not None:
            return ExternalRef(access)
        if memo is None:
            memo = {}
        known = memo.get(id(value))
        if known is not None:
            return known[1]
        t = type(value)
        if t in (tuple, SymbolicSize) or (isinstance(value, tuple) and hasattr(t, "n_fields")):
            items = tuple(self._template(v, what, memo) for v in value)
            built = items if t is tuple else t(items)  # t(items): a size, torch.return_types
            if t is tuple and value:  # held twice (a ModelOutput's item and attribute): one
                memo[id(value)] = (value, built)
            return built
        if t is slice:  # a slice assignment's key
            parts = (value.start, value.stop, value.step)
            return slice(*(self._template(v, what, memo) for v in parts))
        template: Any
        if t is list:
            template = [self._template(v, what, memo) for v in value]
        elif t is dict:
            template = {k: self._template(v, what, memo) for k, v in value.items()}
        elif t is types.FunctionType:
            template = self._function_template(value, what, memo)
        elif t is types.CellType:
            template = self._cell_template(value, what, memo)
        else:
            template = self._rebuilt(value, what, memo)
        if template is not None:
            memo[id(value)] = (value, template)  # the value kept: its id stays its own
            return template
        if isinstance(value, _SUSPENDED_CODE):
            # Its code runs when it is resumed, after the call: torch.compile would run it
            # within the call (or crash on a coroutine's frame), so eager runs the call.
            if (
                isinstance(value, types.CoroutineType)
                and inspect.getcoroutinestate(value) == inspect.CORO_CREATED
            ):
                value.close()  # tracing's copy: no "never awaited" warning for it
            raise RunsEagerly(
                f"puts a {t.__name__} it made into {what}, whose code runs after the call"
            )
        raise UnsupportedSideEffectError(
            f"thunder.jit: cannot replay storing a {t.__name__} created by the function into "
            f"{what} on later calls; only tensors, numbers, strings, None, outside objects and "
            "tuples/lists/dicts of those can be written to state outside the function"
        )

    def _rebuilt(self, value: Any, what: str, memo: dict[int, Any]) -> Rebuilt | None:
        """An object of a Python class the program built, as the copy protocol rebuilds it; None
        when it cannot be (C types, a reduction this does not follow, a cycle)."""
        t = type(value)
        builtin = not t.__flags__ & _HEAPTYPE
        if (builtin and t not in _REDUCED_BUILTINS) or isinstance(value, (type, torch.Tensor)):
            return None
        if id(value) in self.effects.rebuilding:
            return None
        base = restorable_base(t)
        if base is not None:
            return self._restored(value, base, what, memo)
        try:
            reduced = value.__reduce_ex__(4)
        except Exception:
            return None
        if type(reduced) is not tuple or not 2 <= len(reduced) <= 5:
            return None
        func, args, state, listitems, dictitems = (*reduced, None, None, None)[:5]
        if type(args) is not tuple:
            return None
        constants: tuple[Any, ...] = ()
        if t is collections.defaultdict:
            if args[0] is not None and args[0] not in _PLAIN_FACTORIES:
                return None  # a factory the program made (a lambda): not rebuilt
            constants, args = args, ()
        elif func is _NEWOBJ and args and args[0] is t:
            constants, args = args[:1], args[1:]  # cls.__new__(cls, *args)
        elif func is not t:
            return None
        self.effects.rebuilding.add(id(value))
        try:
            parts = (
                self._template(args, what, memo),
                None if state is None else self._template(state, what, memo),
                None if listitems is None else self._template(list(listitems), what, memo),
                None if dictitems is None else self._template(list(dictitems), what, memo),
            )
        finally:
            self.effects.rebuilding.discard(id(value))
        return Rebuilt(func, constants, parts)

    def _function_template(
        self, fn: types.FunctionType, what: str, memo: dict[int, Any]
    ) -> Rebuilt | None:
        """A function the program made (a closure, a hook it registers): the epilogue makes a new
        one on every call from the same code, globals and defaults, with new cells holding what
        the program's cells held (a captured tensor is the call's own), as eager makes a new
        function on every call. None for a function with attributes of its own, or one that
        captures itself."""
        if fn.__dict__ or id(fn) in self.effects.rebuilding:
            return None
        self.effects.rebuilding.add(id(fn))
        try:
            cells = tuple(fn.__closure__ or ())
            parts = self._template((fn.__defaults__, fn.__kwdefaults__, cells), what, memo)
        finally:
            self.effects.rebuilding.discard(id(fn))
        constants = (fn.__code__, fn.__globals__, fn.__name__, fn.__qualname__)
        return Rebuilt(new_function, constants, (parts, None, None, None))

    def _cell_template(self, cell: types.CellType, what: str, memo: dict[int, Any]) -> Rebuilt:
        """A closure cell of a function the program made: a new cell with what it holds now
        (``check_stored_cells`` makes sure the program does not assign it afterwards)."""
        try:
            contents: tuple[Any, ...] = (cell.cell_contents,)
        except ValueError:  # an empty cell (a name not assigned yet)
            contents = ()
        self.effects.stored_cells.append((cell, contents))
        return Rebuilt(types.CellType, (), (self._template(contents, what, memo), None, None, None))

    def _refuse_array_write(self, array: Any) -> None:
        """``a[k] = v`` on an outside numpy array: C code writes it, which no template replays."""
        access = self.access_for(array)
        if access is not None and not self.is_inserted(access):
            raise UnsupportedSideEffectError(
                f"thunder.jit: cannot replay item assignment on the numpy array "
                f"{access.describe(self.param_names)}, state outside the function"
            )

    def check_native_writes(self) -> None:
        """Refuse a program whose C calls changed an outside object no hook reports a write to
        (``np.add(a, 1, out=a)``, ``a.sort()`` through a view, ``Counter.update``): the
        compiled program would not write it on later calls. The call runs natively (split)."""
        for obj, snapshot in self.effects.native_snapshots.values():
            if not native_unchanged(obj, snapshot):
                access = self.access_for(obj)
                where = access.describe(self.param_names) if access is not None else "an object"
                raise UnsupportedSideEffectError(
                    f"thunder.jit: the function writes into the {type(obj).__name__} {where}, "
                    "state outside it, through a C function whose writes thunder cannot replay"
                )

    def check_stored_cells(self) -> None:
        """Refuse a program that assigns a variable a function it stored outside (or returned)
        reads, after storing it: the stored function was rebuilt with the value it had then.
        (Also where tracing ends: outside objects changed by C code, ``check_native_writes``,
        and the arrays read natively, ``guard_arrays_read_natively``.)"""
        self.check_native_writes()
        self.guard_arrays_read_natively()
        self.guard_written_objects_distinct()
        for cell, contents in self.effects.stored_cells:
            try:
                now: tuple[Any, ...] = (cell.cell_contents,)
            except ValueError:
                now = ()
            if len(now) != len(contents) or (now and now[0] is not contents[0]):
                raise UnsupportedSideEffectError(
                    "thunder.jit: the function assigns a variable that a function it stored "
                    "outside (or returned) reads, after storing it; assign it before the inner "
                    "function escapes"
                )

    def _restored(self, value: Any, base: type, what: str, memo: dict[int, Any]) -> Rebuilt:
        """``value`` as its class, its base and the state it has now (see :class:`Rebuilt`)."""
        t = type(value)
        state = dict(object.__getattribute__(value, "__dict__")) if t.__dictoffset__ else None
        items: Any = None
        if base is list:
            items = list.copy(value)
        elif base is not object:
            items = list(base.items(value))  # type: ignore[attr-defined]
        self.effects.rebuilding.add(id(value))
        try:
            parts = (
                None if state is None else self._template(state, what, memo),
                None if not items else self._template(items, what, memo),
            )
        finally:
            self.effects.rebuilding.discard(id(value))
        return Rebuilt(None, (t, base), parts, restores=True)

    def output_template(self, value: Any) -> Any:
        """The function's return value as a template (the same rules as writes)."""
        if isinstance(value, torch.Tensor) and not isinstance(value, Proxy):
            access = self.access_for(value)
            if access is None:
                raise UnsupportedSideEffectError(
                    "thunder.jit: the function returned a tensor thunder did not trace"
                )
        return self._template(value, "the return value")

    def undo_effects(self) -> None:
        """Restore outside state written while tracing (the epilogue replays it for real)."""
        while self.effects.undo:
            self.effects.undo.pop()()
