"""Regions of state the program enters itself: ``torch.autocast`` blocks (applied as each op is
recorded, as eager's dispatcher applies them), grad and inference mode, ``torch.utils.checkpoint.checkpoint``
regions, ``contextvars.ContextVar`` values set and reset within the call (and those read from the
calling context, guarded), and locks taken and released within the call."""

from __future__ import annotations

import contextvars
import functools
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from thunder.access import QUERY, Access
from thunder.binding.backend_flags import BackendFlagsMixin
from thunder.binding.state import Guard, ProgramLock
from thunder.binding.torch_modules import transformer_encoder_forward
from thunder.binding.writes import module_setattr
from thunder.errors import (
    ImpureCallError,
    RunsEagerly,
    UnsupportedOperationError,
    UnsupportedSideEffectError,
)
from thunder.guards import (
    NO_CONTEXT_VALUE,
    Held,
    context_var_get,
    context_var_value,
    has_context_default,
)
from thunder.lookasides import native_special
from thunder_interp import interpret, uncatchable
from thunder_ir import Proxy, TensorProxy, get_tracectx
from thunder_ir.aliasing import alias_info

_UNSET = object()
# The device types whose torch.autocast the autocast transform implements.
AUTOCAST_TRANSFORM_DEVICES = ("cpu", "cuda")


class _TracedToken:
    """What ``ContextVar.set`` returns while tracing: the value to restore on ``reset``."""

    __slots__ = ("old", "used", "var")

    MISSING = contextvars.Token.MISSING

    def __init__(self, var: contextvars.ContextVar[Any], old: Any) -> None:
        self.var, self.old, self.used = var, old, False

    @property
    def old_value(self) -> Any:
        if self.old is _UNSET:  # the calling context's: not read by the program
            raise UnsupportedOperationError(
                f"Token.old_value of ContextVar {self.var.name} set in the jitted function",
                "read the variable with get() before setting it",
            )
        return self.old


def _compiling() -> bool:
    return True


def _not_traced() -> bool:
    return False


# Queries of the ambient dispatch state (the stack of ``TorchDispatchMode``s the call runs under,
# which ``torch.utils._python_dispatch._get_current_dispatch_mode_stack`` reads): answered as
# for the call being traced, and asked again by the prologue on every call (a call made under
# another mode stack recompiles). A mode is an outside object: what the program reads from it is
# guarded at its path.
_DISPATCH_STATE_QUERIES = tuple(
    q
    for q in (
        getattr(torch._C, "_len_torch_dispatch_stack", None),
        getattr(torch._C, "_get_dispatch_stack_at", None),
        getattr(torch._C, "_get_dispatch_mode", None),
    )
    if q is not None
)


def _fast_path_lookasides() -> dict[Any, Any]:
    """Checks torch's modules make to choose between a fused fast path and their ordinary one.

    ``nn.MultiheadAttention`` asks ``_is_make_fx_tracing()`` (is a make_fx or export trace
    recording this call?) before it calls ``torch._native_multi_head_attention``, one C++ kernel
    for the whole block. Thunder answers False, as eager does: where the module's other checks
    (eval mode, grad off or nothing requiring grad, no autocast, self-attention, the fast path
    enabled: all state the program guards) choose the fast path, its kernel runs as an opaque
    torch op, so the values are eager's. The ordinary path (linear, scaled_dot_product_attention,
    linear) differs from it: a query whose keys are all masked gives NaN in the kernel and 0
    there.

    ``nn.TransformerEncoder``/``TransformerDecoder`` look at the data of a mask given without an
    ``is_causal`` hint (``_detect_is_causal_mask``: is it the causal mask?) only to pass
    scaled_dot_product_attention ``is_causal=True`` instead of the mask, which computes the same
    attention. Here the data is not known: the mask is applied as given (the hint, when the
    program gives one, is kept)."""
    out: dict[Any, Any] = {}
    activation = sys.modules.get("torch.nn.modules.activation")
    is_make_fx_tracing = getattr(activation, "_is_make_fx_tracing", None)
    if is_make_fx_tracing is not None:
        out[is_make_fx_tracing] = _not_traced
    transformer = sys.modules.get("torch.nn.modules.transformer")
    detect_is_causal_mask = getattr(transformer, "_detect_is_causal_mask", None)
    if detect_is_causal_mask is not None:
        out[detect_is_causal_mask] = _is_causal_hint
    return out


def _is_causal_hint(mask: Any, is_causal: bool | None = None, size: int | None = None) -> bool:
    return is_causal is True


def _is_compiling_queries() -> list[Any]:
    queries = [torch.compiler.is_compiling, torch._utils.is_compiling]
    # Importing torch._dynamo is slow: only if loaded already. It may be half-imported (a
    # background torch.compile importing it on another thread): then it has no query yet.
    for name in ("torch._dynamo", "torch._dynamo.external_utils"):
        query = getattr(sys.modules.get(name), "is_compiling", None)
        if query is not None:
            queries.append(query)
    return queries


@uncatchable
class GradEnabledInside(BaseException):
    """The program enables grad mode inside a call made with it off (it then computes tensors
    that require grad, as eager does): raised to trace it again through autodiff. Not an
    ``Exception``, and uncatchable by the interpreted program's ``except`` clauses."""


@uncatchable
class LockBusy(BaseException):
    """The program takes a lock another thread holds while tracing still holds locks the
    program released (``RegionState.released_locks``): waiting there could deadlock with code
    taking them in another order, so tracing gives everything back, waits for this one and
    starts again (``binding.program.trace_program``). Uncatchable by the program."""

    def __init__(self, lock: Any) -> None:
        super().__init__(f"{type(lock).__name__} held by another thread")
        self.lock = lock

    def wait(self) -> None:
        """Until the lock is free (taken and given back at once, holding nothing else)."""
        acquire, release = _lock_methods(self.lock)
        acquire(self.lock)
        release(self.lock)


def _waits_until_taken(lock: Any, args: tuple[Any, ...], kwargs: Any) -> bool:
    """Whether ``lock.acquire(*args, **kwargs)`` waits until it holds the lock (and so returns
    True): blocking, without a timeout (-1 for a C lock, None for a Semaphore)."""
    if len(args) > 2 or not set(kwargs) <= {"blocking", "timeout"}:
        return False
    given = dict(zip(("blocking", "timeout"), args))
    if set(given) & set(kwargs):
        return False
    given.update(kwargs)
    blocking = given.get("blocking", True)
    no_timeout = None if isinstance(lock, threading.Semaphore) else -1
    timeout = given.get("timeout", no_timeout)
    return (
        type(blocking) in (bool, int)
        and bool(blocking)
        and type(timeout) is type(no_timeout)
        and timeout == no_timeout
    )


def _last_index(locks: list[Any], lock: Any) -> int | None:
    return next((i for i in range(len(locks) - 1, -1, -1) if locks[i] is lock), None)


def _lock_methods(lock: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The native acquire and release of ``lock`` (a Semaphore's, never a subclass's own)."""
    if isinstance(lock, threading.BoundedSemaphore):
        return threading.Semaphore.acquire, threading.BoundedSemaphore.release
    if isinstance(lock, threading.Semaphore):
        return threading.Semaphore.acquire, threading.Semaphore.release
    return type(lock).acquire, type(lock).release


@dataclass
class RegionState:
    """The regions the program is inside (owned by ``RegionsMixin``)."""

    # Autocast entered by the program: the stack of its states (device type -> dtype, for the
    # devices it is on for).
    autocast_stack: list[dict[str, torch.dtype]] = field(default_factory=list)
    # cache_enabled of the autocast block entered at each depth of the stack, and the count of
    # outermost blocks entered (autocast's weight cache lives until the outermost one is left).
    autocast_cache: dict[int, bool] = field(default_factory=dict)
    # The dtype each block sets at its depth, per device, whether it enables autocast or not (as
    # eager's ``__enter__`` sets it): what ``torch.get_autocast_dtype`` answers inside it.
    autocast_dtypes: dict[int, dict[str, torch.dtype]] = field(default_factory=dict)
    autocast_regions: int = 0
    # The program's grad mode (None: as the call started) and its inference_mode blocks:
    # (grad mode before the block, whether the block enables inference mode).
    grad_mode: bool | None = None
    started_without_grad: bool = False  # traced under grad mode for a call made without it
    # The program switched grad mode: an op's error after the switch leaves eager's process in
    # the switched mode (``torch.set_grad_enabled(False)`` then an index out of range).
    grad_mode_switched: bool = False
    inference_stack: list[tuple[bool, bool]] = field(default_factory=list)
    # Context variables the program set in this call, and their values.
    context_values: dict[Any, Any] = field(default_factory=dict)
    # The path of each read of a context variable in the calling context, by (variable, query).
    context_reads: dict[tuple[Any, Any], Access] = field(default_factory=dict)
    held_locks: list[Any] = field(default_factory=list)  # taken and not released yet
    # Released by the program, still held by tracing until its writes are undone: they are
    # real until then, and another thread must not see (or write under the lock) what undoing
    # them puts back.
    released_locks: list[Any] = field(default_factory=list)
    # The locks the program took, by id, in the order first taken (with the lock, kept alive
    # while tracing).
    taken_locks: dict[int, tuple[Any, ProgramLock]] = field(default_factory=dict)


def _eager_stand_in(value: Any) -> Any:
    """A concrete value of ``value``'s type (a proxy's value), for torch to judge."""
    if isinstance(value, TensorProxy):
        return torch.empty(0, device="meta")
    if isinstance(value, Proxy):
        return getattr(value, "value", value)
    return value


def _validated_like_eager(setter: Any, getter: Any, *args: Any, accepts: type = bool) -> None:
    """Raises the error eager's ``setter(*args)`` raises (its argument parser's TypeError); the
    process state is left as it was. Context managers whose ``__enter__`` the binder models call
    such setters in eager: the program must reject the arguments eager rejects, not coerce them."""
    prefix, value = args[:-1], args[-1]
    if type(value) is accepts:  # (bool and torch.dtype have no subclasses)
        return
    if isinstance(value, Proxy) and getattr(value, "python_type", None) is accepts:
        return
    before = getter(*prefix)
    try:
        setter(*prefix, _eager_stand_in(value))
    finally:
        setter(*prefix, before)


class RegionsMixin(BackendFlagsMixin):
    """Autocast and checkpoint regions entered by the program."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.regions = RegionState()

    def _context_lookasides(self, table: dict[Any, Any]) -> dict[Any, Any]:
        """``torch.autocast`` entered inside the program (as a context manager or decorator)
        changes the dtypes the ops recorded inside compute in; ``torch.utils.checkpoint.checkpoint``
        records a checkpointed region."""
        from torch.amp.autocast_mode import autocast as autocast_cls
        from torch.autograd.grad_mode import inference_mode

        out: dict[Any, Any] = {
            torch._C._set_grad_enabled: self._set_grad_enabled,
            torch.is_grad_enabled: self._is_grad_enabled,
            torch.is_inference_mode_enabled: self._is_inference_mode_enabled,
            inference_mode.__enter__: self._inference_mode_enter,
            inference_mode.__exit__: self._inference_mode_exit,
            torch.is_autocast_enabled: self._is_autocast_enabled,
            torch.get_autocast_dtype: self._get_autocast_dtype,
            torch.is_autocast_cache_enabled: self._is_autocast_cache_enabled,
            torch._C._is_any_autocast_enabled: self._is_any_autocast_enabled,
            torch.utils.checkpoint.checkpoint: functools.partial(self._checkpoint, table),
            **self._copy_lookasides(table),
            torch.nn.Module.__setattr__: module_setattr,
        }
        # Once torch.compile ran in the process, Module.__init__ is dynamo's wrapper recording
        # new modules in its own bookkeeping: torch's state, not the program's; it runs natively.
        init = torch.nn.Module.__init__
        if getattr(init, "__module__", "").startswith("torch._dynamo"):
            out[init] = init
        # Libraries ask this to take their compile-friendly paths (no data-dependent checks,
        # no context variables): the program is being compiled.
        for is_compiling in _is_compiling_queries():
            out[is_compiling] = _compiling
        out.update(_fast_path_lookasides())
        out.update(self._semaphore_lookasides())
        # nn.TransformerEncoder's nested-tensor path, computed as eager does (binding.torch_modules).
        # Interpreted with the finished table (built at its first call): an interpretation copies
        # its table, and this one's must hold the lookasides added after these (grad mode's).
        interpreted: list[Any] = []

        def encoder_forward(*args: Any, **kwargs: Any) -> Any:
            if not interpreted:
                interpreted.append(
                    interpret(
                        transformer_encoder_forward,
                        lookasides=table,
                        callbacks=self.callbacks(),
                        native_special=native_special,
                    )
                )
            return interpreted[0](*args, **kwargs)

        out[torch.nn.TransformerEncoder.forward] = encoder_forward
        for query in _DISPATCH_STATE_QUERIES:
            out[query] = functools.partial(self._ambient_query, query)
        legacy_queries: list[tuple[str, Any, str]] = [
            ("is_autocast_cpu_enabled", self._is_autocast_enabled, "cpu"),
            ("get_autocast_cpu_dtype", self._get_autocast_dtype, "cpu"),
            ("get_autocast_gpu_dtype", self._get_autocast_dtype, "cuda"),
        ]
        for name, answer, device in legacy_queries:
            legacy = getattr(torch, name, None)
            if legacy is not None:  # deprecated spellings of the two queries
                out[legacy] = functools.partial(answer, device)
        classes: list[Any] = [autocast_cls]
        for module in ("cpu", "cuda"):  # torch.cpu.amp.autocast, torch.cuda.amp.autocast
            amp = getattr(getattr(torch, module, None), "amp", None)
            device_autocast = getattr(amp, "autocast", None)
            if isinstance(device_autocast, type):  # (deprecated)
                classes.append(device_autocast)
        for cls in classes:
            # Constructing one reads ambient state only: run natively, with the defaults it
            # reads (dtype, cache_enabled) answered as the program's state is (guarded).
            out[cls] = functools.partial(self._new_autocast, cls) if cls is autocast_cls else cls
            out[cls.__enter__] = self._autocast_enter
            out[cls.__exit__] = self._autocast_exit
        out.update(self._fx_graph_lookasides(table, autocast_cls))
        out.update(self._backend_flag_lookasides())
        return out

    def _fx_graph_lookasides(self, table: dict[Any, Any], autocast_cls: type) -> dict[Any, Any]:
        """The calls torch.compile's FX graphs make for regions (``thunder.dynamo``): autocast
        entered and left as functions, and the higher-order operators of a checkpointed or
        wrapped body (a submodule of the graph), recorded as the ``with`` block and
        ``checkpoint`` call they stand for."""
        from torch.amp import autocast_mode

        out: dict[Any, Any] = {}
        enter = getattr(autocast_mode, "_enter_autocast", None)
        leave = getattr(autocast_mode, "_exit_autocast", None)
        if enter is not None and leave is not None:
            out[enter] = lambda *vals: self._autocast_enter(autocast_cls(*vals))
            out[leave] = lambda mode: self._autocast_exit(mode, None, None, None)
        hops = getattr(torch.ops, "higher_order", None)
        checkpointed = getattr(hops, "tag_activation_checkpoint", None)
        if checkpointed is not None:

            def checkpoint_body(body: Any, *args: Any, **kwargs: Any) -> Any:
                kwargs.pop("context_fn", None)  # selective recompute: rematerialization decides
                return self._checkpoint(table, body, *args, **kwargs)

            out[checkpointed] = checkpoint_body
        wrapped = getattr(hops, "wrap", None)
        if wrapped is not None:

            def wrapped_body(body: Any, *args: Any, **kwargs: Any) -> Any:
                inner = interpret(
                    getattr(body, "forward", body),
                    lookasides=table,
                    callbacks=self.callbacks(),
                    native_special=native_special,
                )
                return inner(*args, **kwargs)

            out[wrapped] = wrapped_body
        return out

    def _ambient_query(self, query: Any, *args: Any) -> Any:
        """``query(*args)`` of the ambient torch state: this call's answer, which the prologue
        asks again on every call (``Access(QUERY, ...)``: equal numbers, a mode of the same
        type)."""
        return self.on_load(query(*args), Access(QUERY, (query, args)))

    # -- context variables ----------------------------------------------------------------------

    def _context_var_call(self, var: Any, name: str, args: tuple[Any, ...]) -> Any:
        """``var.set/get/reset`` while tracing. Values the program sets live in this run only (the
        variable itself is untouched); it must reset them before it returns, as libraries do
        around a call, so a call leaves the variable as it found it. A value the calling context
        holds is read as outside state (``_context_var_read``)."""
        overlay = self.regions.context_values
        if name == "set" and len(args) == 1:
            token = _TracedToken(var, overlay.get(var, _UNSET))
            overlay[var] = args[0]
            return token
        if name == "reset" and len(args) == 1 and isinstance(args[0], _TracedToken):
            token = args[0]
            if token.var is not var:
                raise ValueError(f"{token!r} was created by a different ContextVar")
            if token.used:
                raise RuntimeError(f"{token!r} has already been used once")
            token.used = True
            if token.old is _UNSET:
                overlay.pop(var, None)
            else:
                overlay[var] = token.old
            return None
        if name == "get" and var in overlay:
            return overlay[var]
        if name == "get" and not args and has_context_default(var):
            # (a value set equal to the default reads as the default does: one program)
            return self._context_var_read(var, context_var_get)
        if name == "get" and len(args) <= 1:
            value = self._context_var_read(var, context_var_value)
            if value is not NO_CONTEXT_VALUE:
                return value
            if args:
                return args[0]
            return var.get()  # (LookupError: no value and no default, as the prologue checks)
        raise ImpureCallError(
            f"contextvars.ContextVar.{name} ({var.name})",
            "it changes the variable's value outside the function (only values the function "
            "sets and resets itself are traced)",
        )

    def _context_var_read(self, var: contextvars.ContextVar[Any], query: Any) -> Any:
        """What ``query`` (``context_var_value``, ``context_var_get``) answers of ``var`` in the
        calling context, read as outside state is: the prologue asks again on every call and
        guards it, so a call in a context holding another value takes another program."""
        key = (var, query)
        access = self.regions.context_reads.get(key)
        if access is None:
            found_at = self.access_for(var)
            if found_at is not None and not self.is_inserted(found_at):
                self._pin_identity(found_at, var)  # the query holds this very variable
            access = Access(QUERY, (query, (Held(var, f"ContextVar {var.name}"),)))
            self.regions.context_reads[key] = access
        value = query(*access.key[1])
        if value is NO_CONTEXT_VALUE:
            self.facts.guards.setdefault(access, Guard(access, "is", value))
            return value
        return self.on_load(value, access)

    # -- locks ----------------------------------------------------------------------------------

    def _lock_call(
        self,
        lock: Any,
        name: str,
        args: tuple[Any, ...],
        kwargs: Any,
        native: Callable[..., Any] | None = None,
    ) -> Any:
        """``lock.acquire/release`` and ``with lock:`` while tracing (``native``: the unbound
        method to run, a Semaphore's). The lock is taken for real (another thread holding it
        makes tracing wait, as eager waits), so the Python the program runs under it while
        tracing runs exclusively; the program must release it before it returns, so a call
        leaves the lock as it found it. Tracing gives it back once the writes the program made
        are undone (``released_locks``). The compiled call takes the locks the program took
        (``program_locks``) for its whole run: what the program reads and writes under them
        stays exclusive, as in eager."""
        method = getattr(lock, name) if native is None else functools.partial(native, lock)
        held, released = self.regions.held_locks, self.regions.released_locks
        if name in ("acquire", "__enter__"):
            self._taking_lock(lock, name, args, kwargs)
            again = _last_index(released, lock)
            if again is not None:  # released by the program, still held by tracing
                del released[again]
                result = True
            elif not released:
                result = method(*args, **kwargs)
            elif _lock_methods(lock)[0](lock, False):  # never waits holding released ones
                result = True
            else:
                raise LockBusy(lock)
            held.append(lock)
            return result
        i = _last_index(held, lock)
        if i is None:
            raise UnsupportedSideEffectError(
                f"thunder.jit: the function releases a {type(lock).__name__} it did not acquire "
                "(a signal to other threads); the compiled program cannot replay that"
            )
        if name == "release" and (args or kwargs) and (*args, *kwargs.values()) != (1,):
            raise UnsupportedSideEffectError(
                f"thunder.jit: the function releases a {type(lock).__name__} more than once in "
                "one call; the compiled program cannot replay that"
            )
        del held[i]
        released.append(lock)  # (given back after tracing: release_held_locks)
        return None

    def _taking_lock(self, lock: Any, name: str, args: tuple[Any, ...], kwargs: Any) -> None:
        """Records a lock the program takes (refusing, before it waits, what the compiled call
        could not take as eager does)."""
        if name == "acquire" and not _waits_until_taken(lock, args, kwargs):
            raise UnsupportedSideEffectError(
                f"thunder.jit: the function calls {type(lock).__name__}.acquire without "
                "waiting until it holds it (blocking=False, or a timeout): its result depends on "
                "other threads at each call, which the compiled program cannot decide"
            )
        held = self.regions.held_locks
        if isinstance(lock, threading.Semaphore) and any(h is lock for h in held):
            raise UnsupportedSideEffectError(
                "thunder.jit: the function acquires a Semaphore it holds already; the compiled "
                "program takes each lock once"
            )
        taken = self.regions.taken_locks
        if id(lock) not in taken:
            access = self.access_for(lock)
            if access is None or self.is_inserted(access):
                raise UnsupportedSideEffectError(
                    f"thunder.jit: the function takes a {type(lock).__name__} it made itself or "
                    "reached where later calls cannot find it again; the compiled program takes "
                    "the locks the function takes from where they are found"
                )
            acquire, release = _lock_methods(lock)
            taken[id(lock)] = (lock, ProgramLock(access, type(lock), acquire, release))

    def _semaphore_lookasides(self) -> dict[Any, Any]:
        """A Semaphore's acquire and release (Python over a Condition) run natively, as a C
        lock's do: the program takes the semaphore, not the lock inside it."""

        def lock_call(name: str, native: Callable[..., Any]) -> Callable[..., Any]:
            def call(semaphore: Any, *args: Any, **kwargs: Any) -> Any:
                return self._lock_call(semaphore, name, args, kwargs, native)

            return call

        semaphore, bounded = threading.Semaphore, threading.BoundedSemaphore
        return {
            semaphore.acquire: lock_call("acquire", semaphore.acquire),  # (and __enter__)
            semaphore.__exit__: lock_call("__exit__", semaphore.__exit__),
            semaphore.release: lock_call("release", semaphore.release),
            bounded.release: lock_call("release", bounded.release),
        }

    def program_locks(self) -> tuple[ProgramLock, ...]:
        """The locks the compiled call takes, in the order the program first took them."""
        return tuple(lock for _, lock in self.regions.taken_locks.values())

    def release_held_locks(self) -> None:
        """Gives back every lock tracing holds, after the program's writes are undone: those
        the program released, and those it did not (tracing stopped, or the program returns
        holding a lock, which ``check_context_vars`` refuses)."""
        for locks in (self.regions.held_locks, self.regions.released_locks):
            while locks:
                lock = locks.pop()
                _lock_methods(lock)[1](lock)

    def check_context_vars(self) -> None:
        """Refuse a program that returns with a context variable still set by it, holding a
        lock it took, or with grad mode or a backend flag changed (torch then runs the call,
        split)."""
        self.check_backend_flags()
        if self.regions.grad_mode is not None:
            at_call = False if self.regions.started_without_grad else torch.is_grad_enabled()
            if self.regions.grad_mode != at_call:
                left = "on" if self.regions.grad_mode else "off"
                raise UnsupportedSideEffectError(
                    f"thunder.jit: the function returns with grad mode switched {left} "
                    "(torch.set_grad_enabled without restoring it), which the caller then runs "
                    "with; the compiled program cannot replay that"
                )
        if self.regions.held_locks:
            raise UnsupportedSideEffectError(
                "thunder.jit: the function returns holding a lock it acquired; the compiled "
                "program cannot replay that. Release it before returning, or take it outside"
            )
        if self.regions.context_values:
            names = ", ".join(sorted(v.name for v in self.regions.context_values))
            raise UnsupportedSideEffectError(
                f"thunder.jit: the function returns with ContextVar {names} set; the compiled "
                "program cannot replay that. Reset it before returning, or set it outside"
            )

    # -- grad mode and inference mode -----------------------------------------------------------

    def start_without_grad(self) -> None:
        """The program is traced under grad mode but called under no_grad: it starts in a
        no-grad region (what it computes carries no gradient until it enables grad itself)."""
        self.regions.grad_mode = False
        self.regions.started_without_grad = True
        self.trace.grad_enabled = False

    def _computed_without_grad(self, t: Proxy) -> bool:
        """A tensor the program computed while called under no_grad (and never enabling grad
        inside: that is traced again from a no-grad region): eager's has no gradient history.
        The trace leaves its flag as the inputs' (no stop_gradient per op), so the program's
        read of ``t.requires_grad`` is answered here."""
        if torch.is_grad_enabled() or self.regions.started_without_grad:
            return False
        if any(p is t for p, _ in self.inputs.in_order):
            return False
        return all(p is not t for p in self.inputs.seen_as.values())  # a gathered shard

    def _grad_mode(self) -> bool:
        if self.regions.grad_mode is None:
            self.regions.grad_mode = torch.is_grad_enabled()  # part of the cache key
        return self.regions.grad_mode

    def _is_grad_enabled(self) -> bool:
        return self._grad_mode()

    def _set_grad_enabled(self, mode: bool) -> None:
        """``torch.no_grad()``, ``enable_grad()``, ``set_grad_enabled(b)`` inside the program:
        the program's grad mode changes, not the process's. Ops recorded while it is off pass
        what they compute through ``stop_gradient`` (the trace's ``grad_enabled``)."""
        _validated_like_eager(torch._C._set_grad_enabled, torch.is_grad_enabled, mode)
        mode = bool(mode)
        at_start = torch.is_grad_enabled()
        # Under inference mode grad mode is only an answer: nothing gets a gradient history.
        records = mode and not self._is_inference_mode_enabled()
        if records and not at_start:
            # Compiled without autodiff so far: traced again, through autodiff, starting in a
            # no-grad region (see compile_entry).
            raise GradEnabledInside
        if mode != self._grad_mode():
            self.regions.grad_mode_switched = True
        self.regions.grad_mode = mode
        # The trace being recorded: a function of a higher-order op records into its own.
        trace = get_tracectx() or self.trace
        trace.grad_enabled = records or not at_start

    def _is_inference_mode_enabled(self) -> bool:
        return bool(self.regions.inference_stack and self.regions.inference_stack[-1][1]) or (
            not self.regions.inference_stack and torch.is_inference_mode_enabled()
        )

    def _inference_mode_enter(self, cm: Any) -> None:
        """``torch.inference_mode()`` inside the program: grad mode off for the block (the
        process's own inference mode is never entered while tracing)."""
        mode = self._context_setting(cm, "mode", True)
        if not isinstance(mode, (bool, Proxy, torch.Tensor)):
            # eager's __enter__ builds this guard: it rejects a str or a list (and enters and
            # leaves inference mode here, at once, for what it accepts)
            torch._C._InferenceMode(mode)  # (dropped at once)
        enabled = bool(mode)
        self.regions.inference_stack.append((self._grad_mode(), enabled))
        if enabled:
            self._set_grad_enabled(False)

    def _inference_mode_exit(self, cm: Any, *exc_info: Any) -> None:
        if not self.regions.inference_stack:
            raise UnsupportedOperationError(
                "torch.inference_mode.__exit__ without a matching __enter__ inside the function"
            )
        grad_before, _enabled = self.regions.inference_stack.pop()
        self._set_grad_enabled(grad_before)

    # -- autocast -------------------------------------------------------------------------------

    def autocast_at_start(self) -> dict[str, torch.dtype]:
        """The devices autocast is on for as the program starts, each with its dtype (CPU and
        CUDA, the devices the autocast transform implements; empty: autocast off)."""
        return {
            d: torch.get_autocast_dtype(d)
            for d in AUTOCAST_TRANSFORM_DEVICES
            if torch.is_autocast_enabled(d)
        }

    def record_under_autocast(self) -> None:
        """Ops recorded from now on are cast as eager's autocast casts them (under the state of
        the call, then of the blocks the program enters): their dtypes are eager's while the
        program runs."""
        from thunder_transforms.autocast import AutocastRecorder

        recorder = self.trace.intercept or AutocastRecorder(
            self._autocast_now, self._autocast_cache_region, self._autocast_caches
        )
        self.trace.intercept = recorder
        current = get_tracectx()  # a function of a higher-order op records into its own
        if current is not None and current.intercept is None:
            current.intercept = recorder

    def _autocast_now(self) -> dict[str, torch.dtype]:
        return (
            self.regions.autocast_stack[-1]
            if self.regions.autocast_stack
            else self.autocast_at_start()
        )

    def _autocast_cache_region(self) -> int | None:
        """The outermost autocast block the program is in where autocast's weight cache is on
        now (the call's own state outside the program's blocks); None where it is off."""
        return self.regions.autocast_regions if self._is_autocast_cache_enabled() else None

    def _autocast_caches(self, t: TensorProxy) -> bool:
        """Whether eager's autocast cache holds conversions of ``t``: a tensor the call was given
        that is a leaf requiring grad (a parameter), not a view. The answer decides the
        conversions (and so the gradients): it is guarded, as ``requires_grad`` is."""
        for tensor, proxy in self.inputs.tensors.values():
            if proxy.name == t.name:
                if not tensor.requires_grad:
                    return False
                self._guard_leaf_not_view(tensor, proxy)
                return bool(tensor.is_leaf and not tensor._is_view())
        return False

    def _guard_leaf_not_view(self, tensor: torch.Tensor, proxy: TensorProxy) -> None:
        """Guards that a later call's tensor at this path is a leaf (and a view) as this one is."""
        access = next((a for p, a in self.inputs.in_order if p is proxy), None)
        if access is None:
            return
        is_leaf = access.attr("is_leaf")
        self.facts.guards.setdefault(is_leaf, Guard(is_leaf, "value", bool(tensor.is_leaf)))
        if tensor.is_leaf:  # (a non-leaf is never cached, a view or not)
            base = access.attr("_base")
            self.facts.guards.setdefault(base, Guard(base, "is", tensor._base))

    def _input_autograd_fact(self, t: TensorProxy, name: str) -> tuple[bool, Any]:
        """``t.is_leaf``, ``t._is_view()``, ``t._base`` (None), ``t.grad_fn`` (None) of a tensor
        the call was given, not written in place by the program: known at call time, read here
        and guarded by the prologue (another fact is another program). ``(False, None)`` where
        torch must answer (a view's base, a non-leaf's grad_fn, a tensor the program made)."""
        found = next(((r, p) for r, p in self.inputs.tensors.values() if p is t), None)
        if found is None and name in ("is_leaf", "grad_fn"):
            return self._computed_is_leaf(t, name)
        access = next((a for p, a in self.inputs.in_order if p is t), None)
        if found is None or access is None or self._written_in_place(t):
            return False, None
        tensor = found[0]
        if name in ("is_leaf", "grad_fn"):
            is_leaf = access.attr("is_leaf")
            self.facts.guards.setdefault(is_leaf, Guard(is_leaf, "value", bool(tensor.is_leaf)))
            if name == "is_leaf":
                return True, bool(tensor.is_leaf)
            return bool(tensor.is_leaf), None
        # ``_is_view()`` is ``_base is not None``: the type of ``_base`` is guarded
        base = access.attr("_base")
        self.facts.guards.setdefault(base, Guard(base, "type", type(tensor._base)))
        if name == "_is_view":
            return True, functools.partial(bool, tensor._base is not None)
        return tensor._base is None, None

    def _computed_is_leaf(self, t: TensorProxy, name: str) -> tuple[bool, Any]:
        """``is_leaf`` (and a None ``grad_fn``) of a tensor the program computed: a leaf where
        it requires no grad, else not (its grad_fn is torch's). Unanswered where the trace's
        flags may differ from eager's: the program made a leaf (``requires_grad_()``), or
        ``t`` is, or shares memory with, a tensor passed in."""
        if (
            self.made_leaves
            or any(p is t for p in self.inputs.seen_as.values())
            or self._written_in_place(t)
            or self._input_viewed_by(t) is not None
        ):
            return False, None
        is_leaf = not (t.requires_grad and not self._computed_without_grad(t))
        if name == "is_leaf":
            return True, is_leaf
        return is_leaf, None

    def _written_in_place(self, t: TensorProxy) -> bool:
        """Whether an in-place op of the program so far wrote ``t`` or memory it shares
        (``x.add_(w)`` makes a leaf not requiring grad a non-leaf)."""
        traces = {id(tr): tr for tr in (self.trace, get_tracectx()) if tr is not None}
        return any(alias_info(tr.bound_symbols).is_written(t.name) for tr in traces.values())

    def _context_setting(self, cm: Any, name: str, default: Any) -> Any:
        """A setting of a context manager the program enters (``autocast.fast_dtype``,
        ``inference_mode.mode``). One the program did not build (an argument, a global) is
        read as the program's reads are: guarded, so another object with other settings
        recompiles. One built in the call is its own; its settings need no guard."""
        value = getattr(cm, name, default)
        access = self.access_for(cm)
        if access is None or self.is_inserted(access) or isinstance(value, Proxy):
            return value
        return self.on_load(value, access.attr(name), holder=cm)

    def _autocast_enter(self, cm: Any) -> Any:
        device = self._context_setting(cm, "device", None)
        enabled = self._context_setting(cm, "_enabled", False)
        if isinstance(device, str):
            # eager's __enter__ sets these in this order; its setters reject a bad argument
            _validated_like_eager(
                torch.set_autocast_enabled, torch.is_autocast_enabled, device, enabled
            )
            dtype = self._context_setting(cm, "fast_dtype", None)
            _validated_like_eager(
                torch.set_autocast_dtype,
                torch.get_autocast_dtype,
                device,
                dtype,
                accepts=torch.dtype,
            )
            cache = self._context_setting(cm, "_cache_enabled", None)
            _validated_like_eager(
                torch.set_autocast_cache_enabled, torch.is_autocast_cache_enabled, cache
            )
        enabled = bool(enabled)
        if device not in AUTOCAST_TRANSFORM_DEVICES:
            if enabled:
                raise UnsupportedOperationError(
                    f"torch.autocast(device_type={device!r}) inside a jitted function",
                    "only device_type='cpu' and 'cuda' autocast regions are supported",
                )
            self._push_autocast(cm, self._autocast_now())  # changes nothing for CPU or CUDA
            return cm
        if len(self.trace.scopes) > 1:
            raise UnsupportedOperationError(
                "entering torch.autocast inside a checkpointed region",
                "enter it outside torch.utils.checkpoint.checkpoint, or around the jitted call",
            )
        state = dict(self._autocast_now())
        if enabled:
            state[device] = self._context_setting(cm, "fast_dtype", None)
        else:
            state.pop(device, None)
        self._push_autocast(cm, state)
        self.record_under_autocast()
        return cm

    def _new_autocast(self, cls: type, *args: Any, **kwargs: Any) -> Any:
        """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)`` built
        in the program: the defaults of ``dtype`` and ``cache_enabled`` are the state where it
        is built (an outer block of the program's, else the call's, guarded)."""
        names = ("device_type", "dtype", "enabled", "cache_enabled")
        params = dict(zip(names, args))
        if len(args) > len(names) or any(k in params or k not in names for k in kwargs):
            return cls(*args, **kwargs)  # torch reports the misuse
        params.update(kwargs)
        device = params.get("device_type")
        if isinstance(device, str):
            if params.get("dtype") is None:
                try:
                    params["dtype"] = self._get_autocast_dtype(device)
                except RuntimeError:  # a device torch does not know: its own error
                    return cls(*args, **kwargs)
            if params.get("cache_enabled") is None:
                params["cache_enabled"] = self._is_autocast_cache_enabled()
        return cls(**params)

    def _push_autocast(self, cm: Any, state: dict[str, torch.dtype]) -> None:
        """The block ``cm`` entered with ``state``; its ``cache_enabled`` holds inside it (as
        eager's ``__enter__`` sets it, whatever the device)."""
        if not self.regions.autocast_stack and not self.autocast_at_start():
            self.regions.autocast_regions += 1  # an outermost block: a new weight cache
        self.regions.autocast_stack.append(state)
        depth = len(self.regions.autocast_stack)
        cache = self._context_setting(cm, "_cache_enabled", None)
        self.regions.autocast_cache[depth] = (
            self._is_autocast_cache_enabled(depth - 1) if cache is None else bool(cache)
        )
        device = self._context_setting(cm, "device", None)
        dtype = self._context_setting(cm, "fast_dtype", None)
        if isinstance(device, str) and isinstance(dtype, torch.dtype):
            self.regions.autocast_dtypes[depth] = {device: dtype}

    def _autocast_exit(self, cm: Any, *exc_info: Any) -> bool:
        if not self.regions.autocast_stack:
            raise UnsupportedOperationError(
                "torch.autocast.__exit__ without a matching __enter__ inside the jitted function"
            )
        if getattr(cm, "device", None) in AUTOCAST_TRANSFORM_DEVICES and len(self.trace.scopes) > 1:
            raise UnsupportedOperationError(
                "leaving torch.autocast inside a checkpointed region",
                "enter and leave it outside torch.utils.checkpoint.checkpoint",
            )
        self.regions.autocast_cache.pop(len(self.regions.autocast_stack), None)
        self.regions.autocast_dtypes.pop(len(self.regions.autocast_stack), None)
        self.regions.autocast_stack.pop()
        return False

    def _is_autocast_enabled(self, *args: Any, **kwargs: Any) -> bool:
        # torch.is_autocast_enabled() without a device type asks about CUDA (legacy).
        device = kwargs.get("device_type", args[0] if args else "cuda")
        if device in AUTOCAST_TRANSFORM_DEVICES and self.regions.autocast_stack:
            return device in self.regions.autocast_stack[-1]
        if isinstance(device, str) and device not in AUTOCAST_TRANSFORM_DEVICES:
            # (CPU and CUDA are in the cache key; other devices' autocast is asked anew)
            return bool(self._ambient_query(torch.is_autocast_enabled, device))
        return bool(torch.is_autocast_enabled(*args, **kwargs))

    def _get_autocast_dtype(self, *args: Any, **kwargs: Any) -> torch.dtype:
        device = kwargs.get("device_type", args[0] if args else None)
        if not isinstance(device, str):
            return torch.get_autocast_dtype(*args, **kwargs)  # torch reports the misuse
        for depth in range(len(self.regions.autocast_stack), 0, -1):
            dtype = self.regions.autocast_dtypes.get(depth, {}).get(device)
            if dtype is not None:
                return dtype
        if len(args) + len(kwargs) == 1:
            # The call's dtype is in the cache key only while autocast is on: asked anew.
            return self._ambient_query(torch.get_autocast_dtype, device)  # type: ignore[no-any-return]
        return torch.get_autocast_dtype(*args, **kwargs)

    def _is_any_autocast_enabled(self) -> bool:
        # (Autocast of devices other than CPU and CUDA is refused at the call.)
        if self.regions.autocast_stack:
            return bool(self.regions.autocast_stack[-1])
        return bool(torch._C._is_any_autocast_enabled())

    def _is_autocast_cache_enabled(self, depth: int | None = None) -> bool:
        """Whether autocast's weight cache is on at ``depth`` of the program's blocks (now where
        None): as the innermost block there set it, else as the call started (in the key)."""
        depth = len(self.regions.autocast_stack) if depth is None else depth
        for d in range(depth, 0, -1):
            enabled = self.regions.autocast_cache.get(d)
            if enabled is not None:
                return enabled
        return bool(torch.is_autocast_cache_enabled())

    def _region_without_effects(
        self, region: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """The checkpointed region recorded, where its function has no effect beyond its
        result. Eager's backward runs the function again, repeating each effect (a batch norm's
        update of its running statistics, a counter in Python): such a call runs eagerly."""
        from thunder_ir.aliasing import written_inputs
        from thunder_transforms.checkpoint import record_region

        writes = len(self.effects.writes)
        trace = get_tracectx() or self.trace
        scope = trace.scopes[-1]
        before = len(scope)
        out = record_region(region, *args, **kwargs)
        written = [b for b in scope[before:] if written_inputs(b)]
        python_writes = len(self.effects.writes) != writes
        if (
            python_writes
            and not written
            and self._grad_mode()
            and self._writes_the_same_again(region, args, kwargs, writes)
        ):
            return out  # eager's recompute writes what is already there (a cached size)
        if self._grad_mode() and (written or python_writes):
            what = "writes into tensors it did not make" if written else "writes outside state"
            # The whole call: torch.compile's checkpoint of such a function fails in backward.
            raise RunsEagerly(
                f"calls torch.utils.checkpoint.checkpoint on {region.name}, which {what}: "
                "eager's backward runs it again, repeating that"
            )
        return out

    def _writes_the_same_again(
        self, region: Any, args: tuple[Any, ...], kwargs: dict[str, Any], start: int
    ) -> bool:
        """Whether the region's Python writes since ``start`` (all to outside state: attributes,
        globals, cells) are made again, with equal constants, by a second run after them, as
        eager's recompute in the backward runs it: then repeating them is invisible
        (``self.window_size = min(size)``; a counter is not). The second run is discarded."""
        from thunder_transforms.checkpoint import record_region

        first = self.effects.writes[start:]
        if not all(w.kind in ("attr", "global", "cell") for w in first):
            return False
        trace = get_tracectx() or self.trace
        scope = trace.scopes[-1]
        before, writes = len(scope), len(self.effects.writes)
        rng = torch.random.get_rng_state()
        try:
            record_region(region, *args, **kwargs)
            again = self.effects.writes[writes:]
        except Exception:
            return False
        finally:
            del scope[before:]
            del self.effects.writes[writes:]
            torch.random.set_rng_state(rng)
        return len(again) == len(first) and all(
            (a.kind, a.target, a.name) == (b.kind, b.target, b.name)
            and _same_constant(a.value, b.value)
            for a, b in zip(first, again)
        )

    def _checkpoint(
        self,
        table: dict[Any, Any],
        function: Any,
        *args: Any,
        use_reentrant: bool | None = None,
        context_fn: Any = None,
        determinism_check: str = "default",
        debug: bool = False,
        early_stop: bool = True,
        **kwargs: Any,
    ) -> Any:
        """``torch.utils.checkpoint.checkpoint`` inside a jitted function: ``function`` is
        interpreted into a checkpointed region (its intermediates are recomputed in the backward
        instead of saved). Random values drawn inside it are saved, not drawn again, so dropout
        in the backward uses the forward's mask. The reentrant variant (``use_reentrant=True``,
        torch's default when it is not passed) differs from the other where eager's does: it
        refuses keyword arguments, and when no tensor input requires grad nothing it computes
        does (the parameters it uses get no gradient)."""
        from thunder_transforms.checkpoint import checkpoint_symbol, record_region

        if use_reentrant is None:
            warnings.warn(
                "torch.utils.checkpoint: the use_reentrant parameter should be passed "
                "explicitly; it defaults to True (use_reentrant=False is recommended)",
                stacklevel=3,
            )
            use_reentrant = True
        if context_fn is not None and context_fn is not torch.utils.checkpoint.noop_context_fn:
            raise UnsupportedOperationError(
                "torch.utils.checkpoint.checkpoint(context_fn=...)",
                "custom context functions are not supported",
            )
        kwargs.pop("preserve_rng_state", None)  # random values are saved, so always preserved
        if use_reentrant and kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
        interpreted = interpret(
            function, lookasides=table, callbacks=self.callbacks(), native_special=native_special
        )
        name = getattr(function, "__name__", None) or type(function).__name__
        name = name if name.isidentifier() else "region"
        region = checkpoint_symbol(interpreted, name=name)
        if not use_reentrant or any(isinstance(a, TensorProxy) and a.requires_grad for a in args):
            return self._region_without_effects(region, args, kwargs)
        if self._grad_mode():
            warnings.warn(
                "None of the inputs have requires_grad=True. Gradients will be None", stacklevel=3
            )
        trace = get_tracectx() or self.trace
        old = trace.grad_enabled
        trace.grad_enabled = False  # eager: the region's outputs do not require grad
        try:
            return record_region(region, *args)
        finally:
            trace.grad_enabled = old


def _same_constant(a: Any, b: Any) -> bool:
    """Whether two written values are the same Python constant (a proxy never is: its value
    may differ between the two runs)."""
    if type(a) is not type(b) or not isinstance(a, (bool, int, float, str, type(None))):
        return False
    return repr(a) == repr(b)  # -0.0 is not 0.0; nan is nan
