"""Keeping the compile thread's work invisible to the program's own threads.

Several kinds of process-wide state would otherwise leak between thunder's background compile
thread and the caller's code (a user's own ``torch.compile``, ``make_fx`` or ``symbolic_trace``):

- Imports. ``torch._dynamo`` and ``torch._inductor`` import each other: two threads importing
  them at once deadlock, which Python reports as a ``_DeadlockError`` or as a half-initialized
  module (``cannot import name ... from partially initialized module``), and the process keeps
  them so. ``serialize_torch_imports`` makes the first import of any ``torch.*`` module one
  thread at a time, every thread's (the user's own imports too): a thread that starts one while
  another thread is importing waits until that import is done. It waits before it takes any of
  Python's module locks, so the two cannot interleave.

- FX tracing. torch.fx's tracer (``make_fx``, AOTAutograd: every inductor compile) marks the
  whole process as tracing (``torch.fx._symbolic_trace._is_fx_tracing_flag``, which makes
  dynamo refuse to run a compiled function: "Detected that you are using FX to symbolically
  trace a dynamo-optimized function") and replaces ``nn.Module.__call__``/``__getattr__`` for
  every thread; two threads tracing at once can even leave them replaced for good (each
  restores what it saw when it started). Under ``thread_private_fx_tracing`` the tracer keeps
  that state in the thread: its flag in a copy of the tracer module's globals, and no patches
  (``make_fx``'s tracers record operators by dispatch; the patches only let them see module
  calls and attribute reads, which they pass through unchanged). Other threads run torch's
  tracer as before.

- Compiler flags. Dynamo holds ``torch.compiler``'s ``_is_compiling_flag`` True for its whole
  compile: every thread's ``torch.compiler.is_compiling()`` answered True meanwhile, so a
  ``ThunderModule`` ran the bare module it wraps (as under a user's ``torch.compile``) and
  libraries took their compile paths. Dynamo and inductor also set torch.fx's
  ``_use_lazy_graph_module_flag`` around a compile: a strict ``torch.export`` on another thread
  then failed, and two threads' context managers could leave the flag set for good. Under
  ``thread_private_compiler_flags`` the thread's queries read, and its context managers write,
  flags of the thread's own; other threads see torch's as before.

- Triton bundles. Inductor gathers the Triton kernels of the compile in progress, to store them
  in its cache entry, in class attributes of ``TritonBundler``: one bundle for the whole
  process. A compile on the compile thread while a program's thread compiled failed that
  thread's compile (``assert cls._entries is None``) or emptied its bundle. Under
  ``thread_private_compiler_flags`` (once ``isolate_triton_bundler`` is installed) the
  thread's compiles bundle nothing: their kernels stay in Triton's own cache.

- Pattern registrations. Inductor's pattern passes register their patterns the first time a
  compile runs them (a ``functools.cache``d ``lazy_init``): two threads' first compiles both
  registered them, and one failed ("Duplicate pattern"). ``serialize_pattern_inits`` makes them
  take turns.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib._bootstrap as _bootstrap  # the module the interpreter calls on every import
import inspect
import logging
import os
import random
import sys
import textwrap
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx._lazy_graph_module

__all__ = [
    "isolate_private_compiler_flags",
    "isolate_private_rng_state",
    "isolate_triton_bundler",
    "serialize_pattern_inits",
    "serialize_torch_imports",
    "thread_private_compiler_flags",
    "thread_private_fx_tracing",
    "thread_private_rng_state",
]

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Imports


def _serialized(name: str) -> bool:
    return name.startswith(("torch.", "functorch"))


class _ImportTurn:
    """A re-entrant lock over first imports of torch modules that gives way where holding out
    would deadlock: where its owner waits (through Python's module locks) for this thread."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._owner: int | None = None
        self._depth = 0

    def acquire(self) -> bool:
        """True once this thread holds it; False where waiting would never end."""
        me = threading.get_ident()
        with self._cond:
            while self._owner is not None and self._owner != me:
                if _waits_for(self._owner, me):
                    return False
                self._cond.wait(0.01)
            self._owner = me
            self._depth += 1
            return True

    def release(self) -> None:
        with self._cond:
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._cond.notify_all()

    def after_fork_in_child(self) -> None:
        """Only the forking thread lives on in a child process: a turn another thread held
        would never be given back."""
        self._cond = threading.Condition(threading.Lock())
        if self._owner != threading.get_ident():
            self._owner, self._depth = None, 0


def _module_locks_awaited_by(tid: int | None) -> list[Any]:
    awaited = _bootstrap._blocking_on.get(tid)  # type: ignore[attr-defined]
    if awaited is None:
        return []
    if hasattr(awaited, "owner"):  # Python 3.11: one lock
        return [awaited]
    return list(awaited)  # 3.12+: a list of them


def _waits_for(tid: int, me: int) -> bool:
    """Whether thread ``tid`` waits, through a chain of module locks, for a lock ``me`` holds."""
    try:
        seen: set[int | None] = set()
        frontier: list[int | None] = [tid]
        while frontier:
            t = frontier.pop()
            if t in seen:
                continue
            seen.add(t)
            for lock in _module_locks_awaited_by(t):
                if lock.owner == me:
                    return True
                frontier.append(lock.owner)
    except Exception:  # another Python's import internals: wait, as Python itself would
        return False
    return False


_import_turn = _ImportTurn()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_import_turn.after_fork_in_child)
_original_find_and_load: Callable[..., Any] | None = None


def _find_and_load(name: str, import_: Callable[..., Any]) -> Any:
    # Called by the interpreter for every module not yet (fully) in sys.modules.
    load = _original_find_and_load
    assert load is not None
    if not _serialized(name):
        return load(name, import_)
    module = sys.modules.get(name)
    if module is not None and not getattr(
        getattr(module, "__spec__", None), "_initializing", False
    ):
        return load(name, import_)
    held = _import_turn.acquire()
    try:
        module = load(name, import_)
        if _pattern_inits_serialized and name in _PATTERN_INIT_MODULES:
            _serialize_init_of(module)
        return module
    finally:
        if held:
            _import_turn.release()


_install_lock = threading.Lock()


def serialize_torch_imports() -> None:
    """From now on, first imports of ``torch.*`` modules run one thread at a time (idempotent)."""
    global _original_find_and_load
    with _install_lock:
        if _original_find_and_load is not None:
            return
        current = getattr(_bootstrap, "_find_and_load", None)
        if not callable(current):
            log.debug("this Python has no importlib._bootstrap._find_and_load to serialize")
            return
        _original_find_and_load = current
        _bootstrap._find_and_load = _find_and_load  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------
# FX tracing

_tracer_module = torch.fx._symbolic_trace
_private = threading.local()  # .enabled; .globals, .trace: this thread's tracer state
_fx_installed: bool | None = None  # None: not tried; False: this torch's tracer is not as known


def _in_private_thread() -> bool:
    return getattr(_private, "enabled", False)


class _NoPatches(getattr(_tracer_module, "_Patcher", object)):  # type: ignore[misc]
    """A patcher that leaves every module and function in place."""

    def patch(self, *args: Any, **kwargs: Any) -> None:
        pass

    def patch_method(self, *args: Any, **kwargs: Any) -> None:
        pass


@contextlib.contextmanager
def _new_private_patcher() -> Iterator[Any]:
    yield _NoPatches()


def _private_state() -> tuple[Callable[..., Any], dict[str, Any]]:
    trace = getattr(_private, "trace", None)
    if trace is None:
        raw = _raw_trace
        module_globals = dict(vars(_tracer_module))
        module_globals.update(
            _is_fx_tracing_flag=False, CURRENT_PATCHER=None, _new_patcher=_new_private_patcher
        )
        trace = types.FunctionType(
            raw.__code__, module_globals, raw.__name__, raw.__defaults__, raw.__closure__
        )
        trace.__kwdefaults__ = raw.__kwdefaults__
        _private.trace, _private.globals = trace, module_globals
    return trace, _private.globals


def _private_flag() -> bool:
    return bool(_private_state()[1]["_is_fx_tracing_flag"])


_raw_trace: Any = None


def _install_fx_isolation() -> bool:
    global _fx_installed, _raw_trace
    with _install_lock:
        if _fx_installed is not None:
            return _fx_installed
        _fx_installed = False
        module = _tracer_module
        shared_trace = module.Tracer.trace
        raw = shared_trace
        while hasattr(raw, "__wrapped__"):  # dynamo wraps it in its ``disable``
            raw = raw.__wrapped__
        names = getattr(getattr(raw, "__code__", None), "co_names", ())
        needed = ("_is_fx_tracing_flag", "_new_patcher")
        known = all(hasattr(module, n) for n in ("is_fx_tracing", "_maybe_revert_all_patches"))
        if not (all(n in names for n in needed) and known and hasattr(module, "_Patcher")):
            log.debug("torch.fx's tracer is not the one known here: its state stays shared")
            return False
        _raw_trace = raw
        shared_is_tracing = module.is_fx_tracing
        shared_is_symbolic = getattr(module, "is_fx_symbolic_tracing", None)
        shared_revert = module._maybe_revert_all_patches

        def trace(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _in_private_thread():
                return _private_state()[0](self, *args, **kwargs)
            return shared_trace(self, *args, **kwargs)

        def is_fx_tracing() -> bool:
            return _private_flag() if _in_private_thread() else bool(shared_is_tracing())

        def is_fx_symbolic_tracing() -> bool:
            if _in_private_thread():
                return _private_flag() and not torch.compiler.is_compiling()
            return bool(shared_is_symbolic())  # type: ignore[misc]

        def maybe_revert_all_patches() -> Any:
            # The tracer patches dynamo would lift while it compiles belong to another thread.
            if _in_private_thread():
                return contextlib.nullcontext()
            return shared_revert()

        wrappers: tuple[tuple[Any, Any], ...] = (
            (trace, shared_trace),
            (is_fx_tracing, shared_is_tracing),
            (is_fx_symbolic_tracing, shared_is_symbolic),
            (maybe_revert_all_patches, shared_revert),
        )
        for wrapper, shared in wrappers:
            if shared is not None:
                wrapper.__wrapped__ = shared
                wrapper.__name__ = shared.__name__
                wrapper.__qualname__ = shared.__qualname__
                wrapper.__doc__ = shared.__doc__
        module.Tracer.trace = trace  # type: ignore[method-assign]
        module.is_fx_tracing = is_fx_tracing
        if shared_is_symbolic is not None:
            module.is_fx_symbolic_tracing = is_fx_symbolic_tracing
        module._maybe_revert_all_patches = maybe_revert_all_patches
        _fx_installed = True
        return True


def thread_private_fx_tracing() -> bool:
    """From now on, torch.fx's tracing state on this thread stays in this thread (see the
    module's doc); False where this torch's tracer is not the one known here."""
    if not _install_fx_isolation():
        return False
    _private.enabled = True
    return True


# ---------------------------------------------------------------------------------------------
# Random generators' state

_rng_private = threading.local()  # .states: {generator key: state} while the thread keeps its own
_RNG_HOOKS = "_thunder_rng_state_hooks"  # the name the rewritten torch functions call through
_rng_installed: bool | None = None


def _generator_key(device_type: str, device: Any) -> Any:
    """The default generator ``torch.<device_type>.get_rng_state(device)`` reads."""
    if isinstance(device, str):
        device = torch.device(device)
    elif isinstance(device, int):
        device = torch.device(device_type, device)
    index = getattr(device, "index", None)
    if index is None:
        index = getattr(getattr(torch, device_type), "current_device", lambda: 0)()
    return (device_type, index)


def _private_rng_hook(original: Callable[..., Any], device_type: str, setter: bool) -> Any:
    def hook(*args: Any) -> Any:
        states = getattr(_rng_private, "states", None)
        if states is None:
            return original(*args)
        device = args[1 if setter else 0] if device_type != "cpu" else None
        key = "cpu" if device_type == "cpu" else _generator_key(device_type, device)
        if setter:
            states[key] = args[0].clone()
            return None
        state = states.get(key)
        return original(*args) if state is None else state.clone()

    return hook


def _route_through_hook(fn: Any, device_type: str, setter: bool) -> bool:
    """Rewrites ``fn``'s code (the function object stays: torch, dynamo and thunder know these
    functions by identity) to call a hook that keeps a private thread's state apart."""
    code = getattr(fn, "__code__", None)
    if (
        not isinstance(fn, types.FunctionType)
        or code is None
        or fn.__closure__
        or code.co_kwonlyargcount
        or code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
        or code.co_argcount != (2 if setter else 1) - (device_type == "cpu")
    ):
        return False
    original = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__)
    original.__kwdefaults__ = fn.__kwdefaults__
    params = ", ".join(code.co_varnames[: code.co_argcount])
    namespace: dict[str, Any] = {}
    exec(
        f"def {fn.__name__}({params}):\n    return {_RNG_HOOKS}[{fn.__name__!r}]({params})\n",
        namespace,
    )
    fn.__globals__.setdefault(_RNG_HOOKS, {})[fn.__name__] = _private_rng_hook(
        original, device_type, setter
    )
    fn.__code__ = namespace[fn.__name__].__code__
    return True


def _python_random_state_functions() -> None:
    """``random.getstate``/``setstate`` (dynamo saves and restores them around a compile, by
    name) keep a private thread's state apart."""
    shared_get, shared_set = random.getstate, random.setstate

    def getstate() -> Any:
        states = getattr(_rng_private, "states", None)
        state = None if states is None else states.get("python")
        return shared_get() if state is None else state

    def setstate(state: Any) -> None:
        states = getattr(_rng_private, "states", None)
        if states is None:
            shared_set(state)
        else:
            states["python"] = state

    getstate.__wrapped__ = shared_get  # type: ignore[attr-defined]
    setstate.__wrapped__ = shared_set  # type: ignore[attr-defined]
    getstate.__doc__, setstate.__doc__ = shared_get.__doc__, shared_set.__doc__
    random.getstate, random.setstate = getstate, setstate  # type: ignore[assignment]


def _install_rng_isolation() -> bool:
    global _rng_installed
    with _install_lock:
        if _rng_installed is not None:
            return _rng_installed
        modules = [("cpu", torch.random)]
        for device_type in ("cuda", "xpu"):
            module = getattr(getattr(torch, device_type, None), "random", None)
            if isinstance(module, types.ModuleType):
                modules.append((device_type, module))
        routed = True
        for device_type, module in modules:
            for name, setter in (("get_rng_state", False), ("set_rng_state", True)):
                fn = getattr(module, name, None)
                if fn is not None and not _route_through_hook(fn, device_type, setter):
                    log.debug("torch.%s.%s is not the one known here", device_type, name)
                    routed = False
        _python_random_state_functions()
        _rng_installed = routed
        return routed


def isolate_private_rng_state() -> bool:
    """Lets threads keep their generators' state apart (``thread_private_rng_state``); installed
    once, before any program is traced (it rewrites torch's ``get_rng_state``/``set_rng_state``
    for the CPU and each device type, and replaces ``random.getstate``/``setstate``). False
    where one of them is not as known here."""
    return _install_rng_isolation()


@contextlib.contextmanager
def thread_private_rng_state() -> Iterator[None]:
    """Inside, this thread's ``torch.get_rng_state``/``set_rng_state`` (and CUDA's, XPU's,
    Python's ``random.getstate``/``setstate``) act on a state of its own: a read returns what
    the thread last set, else the generator's state; a write never reaches the generator.

    torch's compilers save the default generators' state when a compile starts and write it
    back when it ends (``preserve_rng_state``, dynamo's ``preserve_global_state``): on the
    compile thread that rewound the program's own threads' streams by whatever they drew
    meanwhile. Draws themselves still use the process's generators (regions draw nothing)."""
    isolate_private_rng_state()
    previous = getattr(_rng_private, "states", None)
    _rng_private.states = {}
    try:
        yield
    finally:
        _rng_private.states = previous


# ---------------------------------------------------------------------------------------------
# Compiler flags: torch.compiler's, and torch.fx's graph module class

# The flag functions of a torch module, rewritten in place (dynamo and thunder know them by
# identity; other modules import the context managers by name) to read and write flags of the
# calling thread's own while it keeps them, torch's module globals otherwise.
_ROUTE = "_thunder_compiler_flags"  # the name the rewritten functions read


class _FlagRoute:
    """What one module's rewritten flag functions read: whether a thread keeps flags of its own,
    and the calling thread's copies of the functions (reading and writing a namespace of the
    thread's own)."""

    def __init__(
        self, module: types.ModuleType, flags: tuple[str, ...], functions: tuple[str, ...]
    ) -> None:
        self.module = module
        self.flags = flags  # the module globals the functions read and write
        self.names = functions  # plain functions and ``contextmanager``s (their generators)
        self.private_threads = 0
        # A thread's own copies are instance attributes; torch's, the class's.
        self.functions: Any = type("_ThreadFlagFunctions", (threading.local,), {})()
        self.installed: bool | None = None

    def _function(self, name: str) -> types.FunctionType | None:
        fn = getattr(self.module, name, None)
        fn = getattr(fn, "__wrapped__", fn)  # a contextmanager: its generator function
        code = getattr(fn, "__code__", None)
        if (
            not isinstance(fn, types.FunctionType)
            or code is None
            or fn.__closure__
            or fn.__globals__ is not vars(self.module)
            or code.co_kwonlyargcount
            or code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
            or not any(flag in code.co_names for flag in self.flags)
        ):
            return None
        return fn

    def install(self) -> bool:
        with _install_lock:
            if self.installed is not None:
                return self.installed
            self.installed = False
            functions = {name: self._function(name) for name in self.names}
            if not all(hasattr(self.module, flag) for flag in self.flags) or None in functions:
                log.debug("%s's flags are not the ones known here: shared", self.module.__name__)
                return False
            try:
                routed = {name: _routed_code(fn) for name, fn in functions.items() if fn}
            except Exception as e:  # no source, or source unlike the function
                log.debug("%s's flag functions stay shared (%s)", self.module.__name__, e)
                return False
            vars(self.module)[_ROUTE] = self
            for name, fn in functions.items():
                assert fn is not None
                # The copy each thread with flags of its own starts from.
                setattr(type(self.functions), name, staticmethod(_copy(fn, fn.__globals__)))
                fn.__code__ = routed[name]
            self.installed = True
            return True

    def owned_by_this_thread(self) -> bool:
        return self.names[0] in vars(self.functions)

    def enter(self) -> None:
        """From now on, this thread's flags are its own, all False."""
        namespace = dict(vars(self.module))
        namespace.update(dict.fromkeys(self.flags, False))
        torch_functions = vars(type(self.functions))
        for name in self.names:
            setattr(self.functions, name, _copy(torch_functions[name].__func__, namespace))
        with _flag_lock:
            self.private_threads += 1

    def leave(self) -> None:
        with _flag_lock:
            self.private_threads -= 1
        for name in self.names:
            delattr(self.functions, name)

    def count_private_threads_after_fork(self) -> None:
        # Only the forking thread lives on in a child process.
        self.private_threads = int(self.owned_by_this_thread())


def _copy(fn: types.FunctionType, namespace: dict[str, Any]) -> types.FunctionType:
    copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


def _routed_code(fn: types.FunctionType) -> types.CodeType:
    """``fn``'s code with a first statement that, while a thread keeps flags of its own, calls
    the calling thread's copy instead: the other calls run torch's code in place, at the cost of
    one read (a thread-local lookup costs a few times the query; ``ThunderModule`` asks
    ``is_compiling()`` on every call). Compiled from its source at its file and lines, so
    TorchScript still reads ``is_compiling``'s source. Raises OSError without the source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    definition = tree.body[0]
    if not isinstance(definition, ast.FunctionDef) or definition.name != fn.__name__:
        raise OSError(f"no definition of {fn.__name__} in its source")
    definition.decorator_list = []  # a contextmanager's generator function is the one routed
    definition.returns = None  # evaluated where it is compiled, without the module's names
    for argument in definition.args.args:
        argument.annotation = None
    arguments = ", ".join(fn.__code__.co_varnames[: fn.__code__.co_argcount])
    call = f"{_ROUTE}.functions.{fn.__name__}({arguments})"
    generator = fn.__code__.co_flags & inspect.CO_GENERATOR
    body = f"yield from {call}\n    return" if generator else f"return {call}"
    route = ast.parse(f"if {_ROUTE}.private_threads:\n    {body}\n").body[0]
    docstring = ast.get_docstring(definition, clean=False) is not None
    definition.body.insert(1 if docstring else 0, route)
    ast.increment_lineno(tree, fn.__code__.co_firstlineno - definition.lineno)
    namespace: dict[str, Any] = {}
    exec(compile(tree, fn.__code__.co_filename, "exec"), namespace)
    code: types.CodeType = namespace[fn.__name__].__code__
    return code


_flag_lock = threading.Lock()
# Dynamo holds ``_is_compiling_flag`` for a compile (``_compile_session_context``). Export sets
# its flags itself and is never run on a compile thread; thunder's tracing reads
# ``is_exporting`` by interpreting it (and guards what it reads): it stays torch's.
_COMPILER_FLAGS = _FlagRoute(
    torch.compiler, ("_is_compiling_flag",), ("is_compiling", "_compile_session_context")
)
# Dynamo and inductor set ``_use_lazy_graph_module_flag`` around a compile: on the program's
# threads, ``torch.export``'s strict graph then came out a ``_LazyGraphModule`` missing
# ``_in_spec``. Nested from two threads, the context managers (each restores what it saw)
# could leave it set for good.
_GRAPH_MODULE_FLAGS = _FlagRoute(
    torch.fx._lazy_graph_module,
    ("_use_lazy_graph_module_flag", "_force_skip_lazy_graph_module_flag"),
    ("_get_graph_module_cls", "_use_lazy_graph_module", "_force_skip_lazy_graph_module"),
)
_ROUTES = (_COMPILER_FLAGS, _GRAPH_MODULE_FLAGS)

if hasattr(os, "register_at_fork"):
    for _route in _ROUTES:
        os.register_at_fork(after_in_child=_route.count_private_threads_after_fork)


def isolate_private_compiler_flags() -> bool:
    """Lets threads keep dynamo's compile flag and torch.fx's graph module flags apart
    (``thread_private_compiler_flags``); installed once, before any program is traced (it
    rewrites the code of ``torch.compiler.is_compiling``, dynamo's compile session and
    ``torch.fx._lazy_graph_module``'s flag functions; the function objects stay). False where
    one of them is not the one known here (that one stays shared)."""
    return all([route.install() for route in _ROUTES])


_bundling = threading.local()  # .private: this thread's compiles bundle no Triton kernels


def isolate_triton_bundler() -> bool:
    """Makes ``TritonBundler``'s bundle the program's threads' alone: on a thread inside
    ``thread_private_compiler_flags`` its methods that read or write the bundle do nothing and
    ``collect`` gives an empty bundle. Installed once inductor is imported; False where this
    torch has no ``TritonBundler`` as known here (it stays shared)."""
    try:
        from torch._inductor.triton_bundler import TritonBundle, TritonBundler
    except ImportError:
        return False
    if getattr(TritonBundler, "_thunder_private_threads", False):
        return True
    names = ("begin_compile", "end_compile", "put", "put_winner", "put_static_autotuner")
    if not all(isinstance(vars(TritonBundler).get(n), classmethod) for n in (*names, "collect")):
        return False

    def quiet(name: str, result: Callable[[], Any]) -> None:
        original = vars(TritonBundler)[name].__func__

        def method(cls: type, *args: Any, **kwargs: Any) -> Any:
            if getattr(_bundling, "private", False):
                return result()
            return original(cls, *args, **kwargs)

        method.__name__ = method.__qualname__ = name
        setattr(TritonBundler, name, classmethod(method))

    for name in names:
        quiet(name, lambda: None)
    quiet("collect", lambda: (TritonBundle([], []), None))
    TritonBundler._thunder_private_threads = True  # type: ignore[attr-defined]
    return True


# Inductor's pattern passes register their patterns on first use (``init_once_fakemode``: a
# ``functools.cache`` of a function that registers them), which two threads may both run: the
# second registration fails the compile ("Duplicate pattern"). The modules whose ``lazy_init``
# is such a function; the calls go through the module global, so replacing it reaches them.
_PATTERN_INIT_MODULES = (
    "torch._inductor.fx_passes.pre_grad",
    "torch._inductor.fx_passes.joint_graph",
    "torch._inductor.fx_passes.post_grad",
    "torch._inductor.fx_passes.freezing_patterns",
)
_pattern_init_lock = threading.RLock()  # (reentrant: one init may run another)


_pattern_inits_serialized = False


def serialize_pattern_inits() -> None:
    """From now on inductor's pattern registrations (``lazy_init`` of its pattern passes) run
    one thread at a time, so that a compile on the compile thread and one on a program's thread
    never register the same patterns twice: the pass modules imported already now, the others
    as they are imported (through ``serialize_torch_imports``'s hook). A module whose
    ``lazy_init`` is not the cached function known here is left as it is."""
    global _pattern_inits_serialized
    _pattern_inits_serialized = True
    for name in _PATTERN_INIT_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            _serialize_init_of(module)


def _serialize_init_of(module: types.ModuleType) -> None:
    init = getattr(module, "lazy_init", None)
    if getattr(init, "_thunder_serialized", False) or not callable(
        getattr(init, "cache_info", None)
    ):
        return
    module.lazy_init = _serialized_init(init)  # type: ignore[attr-defined]


def _serialized_init(init: Any) -> Any:
    @functools.wraps(init)
    def lazy_init(*args: Any, **kwargs: Any) -> Any:
        with _pattern_init_lock:
            return init(*args, **kwargs)

    lazy_init._thunder_serialized = True  # type: ignore[attr-defined]
    lazy_init.cache_info = init.cache_info  # type: ignore[attr-defined]
    lazy_init.cache_clear = init.cache_clear  # type: ignore[attr-defined]
    return lazy_init


@contextlib.contextmanager
def thread_private_compiler_flags() -> Iterator[None]:
    """Inside, this thread's ``torch.compiler.is_compiling()`` reads a flag of its own, False
    but where dynamo's compile session on this thread sets it, and so do torch.fx's lazy graph
    module flags: other threads never see them (nor this one theirs). Export sets torch's flags
    itself: not for use around ``torch.export``."""
    entered = [
        route
        for route in _ROUTES
        if route.install() and not route.owned_by_this_thread()  # else its own already
    ]
    for route in entered:
        route.enter()
    private_bundle = getattr(_bundling, "private", False)
    _bundling.private = True
    try:
        yield
    finally:
        _bundling.private = private_bundle
        for route in entered:
            route.leave()
