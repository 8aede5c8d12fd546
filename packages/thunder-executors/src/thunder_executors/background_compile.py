"""One background thread that compiles fusion regions while the program runs without them.

A region compiled in the background runs its plain torch calls (as the torch executors would)
until its compiled program is ready, then switches to it: the first call costs what tracing
costs, not what a compiler costs (torch.compile takes tens of seconds on a CPU model).

The compile runs the region once, as torch.compile must, on example inputs made from the call
that asked for it: the caller's floating-point tensors' storage when they are still alive (held
by weak reference, so a queued job keeps no activation alive; detached, so the caller's autograd
history is never read), else zeros of the same size,
strides, dtype and device; ones for integer tensors, never the caller's values: compiled integer
division by zero traps the whole process (SIGFPE) where eager raises, and a value the caller
passed or is changing may be such a divisor. Regions hold no in-place ops, so that run writes
nothing the caller can see. The grad mode, autocast state and CUDA device of the
caller are set in the thread, so the compiled program's guards hold on the caller's side.

``wait_for_background_compiles()`` blocks until the queue is empty (benchmarks and tests use it
to measure or check the compiled state).
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import ctypes
import importlib
import logging
import queue
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from thunder_executors.compile_thread_isolation import (
    isolate_private_compiler_flags,
    isolate_private_rng_state,
    isolate_triton_bundler,
    serialize_pattern_inits,
    serialize_torch_imports,
    thread_private_compiler_flags,
    thread_private_fx_tracing,
    thread_private_rng_state,
)

__all__ = [
    "Ambient",
    "ExampleInputs",
    "fx_tracer_patching",
    "is_fx_tracer_patch",
    "submit",
    "wait_for_background_compiles",
    "wait_while_fx_tracer_patches",
]

log = logging.getLogger(__name__)

_AUTOCAST_DEVICES = ("cpu", "cuda")

_FX_TRACER_FILE = torch.fx._symbolic_trace.__file__


# torch's compiler configurations. Their settings are the setting thread's own (context
# variables): ``torch._inductor.config.fx_graph_cache = False`` on the caller's thread, or a
# ``config.patch`` around the call, did not reach the compile thread.
_CONFIG_MODULES = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config")

_Settings = tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]
_UNSET = getattr(importlib.import_module("torch.utils._config_module"), "_UNSET_SENTINEL", None)


def _config_settings() -> _Settings:
    """This thread's own settings of torch's compiler configurations (modules not imported yet
    have none): ``(module name, ((key, value), ...))``."""
    settings: list[tuple[str, tuple[tuple[str, Any], ...]]] = []
    if _UNSET is None:  # another torch's configuration: its settings as they are
        return ()
    for name in _CONFIG_MODULES:
        module = sys.modules.get(name)
        entries = getattr(module, "_config", None)
        if not isinstance(entries, dict):
            continue
        own = []
        for key, entry in entries.items():
            override = getattr(entry, "user_override", None)
            # (a torch whose settings are process-wide: the compile thread sees them)
            if not isinstance(override, contextvars.ContextVar) or entry.alias is not None:
                continue
            value = override.get()
            if value is not _UNSET:
                own.append((key, value))
        if own:
            settings.append((name, tuple(own)))
    return tuple(settings)


@dataclass(frozen=True)
class Ambient:
    """The thread-local torch state a compiled program's guards read, and the caller's settings
    of torch's compilers."""

    grad: bool
    autocast: tuple[tuple[str, torch.dtype], ...]  # (device type, dtype) of the enabled ones
    cuda_device: int | None
    config: _Settings = ()

    @staticmethod
    def of_this_thread(*, compiler_settings: bool = True) -> Ambient:
        """This thread's state; ``compiler_settings=False``: without its settings of torch's
        compilers (what a compiled program's guards compare: those settings are the compile's,
        and the compile thread's differ from its caller's while it compiles)."""
        autocast = tuple(
            (d, torch.get_autocast_dtype(d))
            for d in _AUTOCAST_DEVICES
            if torch.is_autocast_enabled(d)
        )
        initialized = torch.cuda.is_initialized()  # type: ignore[no-untyped-call]
        cuda = torch.cuda.current_device() if initialized else None
        config = _config_settings() if compiler_settings else ()
        return Ambient(torch.is_grad_enabled(), autocast, cuda, config)

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            stack.enter_context(torch.set_grad_enabled(self.grad))
            for device, dtype in self.autocast:
                stack.enter_context(torch.autocast(device, dtype=dtype))
            if self.cuda_device is not None:
                stack.enter_context(torch.cuda.device(self.cuda_device))
            for name, own in self.config:
                stack.enter_context(sys.modules[name].patch(dict(own)))
            yield


@dataclass(frozen=True)
class _TensorMeta:
    size: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool
    alive: Callable[[], torch.Tensor | None] | None  # a weak reference for float tensors
    # dynamo guards on the type: a plain tensor standing in for a parameter made the caller's
    # first call recompile the region on its own thread
    parameter: bool = False

    def extent(self) -> int:
        """Elements of storage the tensor spans."""
        return 1 + sum((n - 1) * s for n, s in zip(self.size, self.stride)) if all(self.size) else 0

    def usable(self, t: torch.Tensor | None) -> bool:
        """``t`` still has this layout and its storage still holds it (storage freed with
        ``resize_(0)``, as sharded training does, would be read out of bounds)."""
        if t is None or tuple(t.shape) != self.size or t.stride() != self.stride:
            return False
        needed = (t.storage_offset() + self.extent()) * t.element_size()
        return t.untyped_storage().nbytes() >= needed

    def detached(self, t: torch.Tensor) -> torch.Tensor:
        """``t``'s storage without its autograd history: the caller may write ``t`` (or its
        base) in place meanwhile, and autograd refuses a view of it made in no_grad mode
        once its base is written."""
        return self._typed(t.detach())

    def stand_in(self) -> torch.Tensor:
        """A tensor of this layout: zeros, ones for integers (never a zero divisor)."""
        extent = self.extent()
        integer = not (
            self.dtype.is_floating_point or self.dtype.is_complex or self.dtype == torch.bool
        )
        fill = torch.ones if integer else torch.zeros
        base = fill(extent, dtype=self.dtype, device=self.device)
        # Not a view of ``base``: dynamo guards on a view's base, which the caller's tensor
        # lacks, and its first call would recompile the region on the caller's thread.
        t = torch.empty(0, dtype=self.dtype, device=self.device)
        return self._typed(t.set_(base.untyped_storage(), 0, self.size, self.stride))

    def _typed(self, t: torch.Tensor) -> torch.Tensor:
        if self.parameter:
            return torch.nn.Parameter(t, requires_grad=self.requires_grad)
        return t.requires_grad_() if self.requires_grad else t


class ExampleInputs:
    """What a region was called with, kept without keeping the caller's tensors alive."""

    def __init__(self, args: tuple[Any, ...]) -> None:
        self._items: list[Any] = []
        self._slot_of: dict[int, int] = {}  # id(tensor) -> first position: aliases stay aliases
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                first = self._slot_of.setdefault(id(a), i)
                if first != i:
                    self._items.append(first)
                    continue
                floating = a.is_floating_point() or a.is_complex()
                ref = weakref.ref(a) if floating else None
                self._items.append(
                    _TensorMeta(
                        tuple(a.shape),
                        a.stride(),
                        a.dtype,
                        a.device,
                        a.requires_grad,
                        ref,
                        type(a) is torch.nn.Parameter,
                    )
                )
            else:
                self._items.append(("value", a))

    def materialize(self) -> list[Any]:
        out: list[Any] = []
        for item in self._items:
            if isinstance(item, int):  # an alias of an earlier argument
                out.append(out[item])
            elif isinstance(item, _TensorMeta):
                live = item.alive() if item.alive is not None else None
                if live is not None and item.usable(live):
                    out.append(item.detached(live))
                else:
                    out.append(item.stand_in())
            else:
                out.append(item[1])
        return out


@dataclass
class _Job:
    run: Callable[[list[Any]], None]  # compiles, given the materialized example inputs
    examples: ExampleInputs
    ambient: Ambient


class _Interrupted(BaseException):
    """Raised in the compile thread at interpreter exit, so the thread is not mid-compile when
    the interpreter shuts down (a daemon thread re-entering it from torch's C++ aborts the
    process)."""


_jobs: queue.Queue[_Job] = queue.Queue()
_pending = 0
_idle = threading.Condition()
_running = False  # a job is being run (guarded by _idle)
_stopped = threading.Event()  # the thread has left its loop after an interruption
_worker: threading.Thread | None = None
_closing = False


def _isolate_triton_bundler() -> None:
    try:
        isolate_triton_bundler()
    except Exception:  # an inductor this module does not know: its bundle stays shared
        log.debug("could not make inductor's Triton bundle the program's own", exc_info=True)


def _run(job: _Job) -> None:
    global _pending, _running
    try:
        if not _closing:
            with _idle:
                _running = True
            # (installed after the first import already; again where that import failed)
            _isolate_triton_bundler()
            # torch's compilers save the generators' state and write it back when done: here
            # that would rewind the program's streams by what its threads drew meanwhile.
            # Nor may dynamo's compile here make ``torch.compiler.is_compiling()`` True on the
            # program's threads: a ThunderModule would run the module it wraps meanwhile.
            with job.ambient.entered(), thread_private_rng_state(), thread_private_compiler_flags():
                job.run(job.examples.materialize())
    except _Interrupted:
        raise
    except BaseException:  # the job reports its own failures; never let the thread die
        log.exception("background compile job failed")
    finally:
        with _idle:
            _running = False
            _pending -= 1
            _idle.notify_all()


# torch._dynamo and torch._inductor import each other: two threads importing them at once
# deadlock, which Python reports as half-initialized modules (and the process keeps them so).
# Every thread's first imports of torch modules take turns (the user's own too: a
# ``torch.compile`` on the main thread while the compile thread imports inductor).
serialize_torch_imports()
# Inductor's pattern registrations too (on a compile's first use of its passes): a user's
# compile and one here would register the same patterns twice, and one of them would fail.
serialize_pattern_inits()
# Before any program is traced: the compile thread's saves and restores of the generators'
# state then stay in it (``thread_private_rng_state``), and no function a trace read changes.
isolate_private_rng_state()
# Before any program is traced too (it rewrites torch.compiler's flag functions' code): the
# compile thread's dynamo compiles then set flags of its own (``thread_private_compiler_flags``).
isolate_private_compiler_flags()


def import_compile_stack(*modules: str) -> None:
    """Imports ``modules`` (default: torch._dynamo, then inductor's compiler); first imports of
    torch modules run one thread at a time (``serialize_torch_imports``)."""
    for name in modules or ("torch._dynamo", "torch._inductor.compile_fx"):
        # Also where another thread has it half-imported: this waits for that import.
        importlib.import_module(name)


def _import_first() -> None:
    """The compile stack imported before the first job, as a running job: exit interrupts it
    (a daemon thread inside torch's C++ imports at shutdown aborts the process)."""
    global _running
    with _idle:
        _running = True
    try:
        import_compile_stack()
        _isolate_triton_bundler()  # before any compile here: inductor's bundle stays the caller's
    except Exception:  # the jobs report the import's failure themselves
        log.exception("importing torch's compile stack failed")
    finally:
        with _idle:
            _running = False
            _idle.notify_all()


def _work() -> None:
    # Tracing here (make_fx, AOTAutograd) must not look, to the program's threads, like a
    # trace of theirs: dynamo would refuse to run their compiled functions meanwhile.
    thread_private_fx_tracing()
    try:
        _import_first()
        while (job := _next_job()) is not None:
            _run(job)
        return
    except _Interrupted:
        pass
    # The interrupted job's frames and tensors are freed by now, while exit waits for this;
    # then the thread never runs again.
    while True:
        try:
            _stopped.set()
            threading.Event().wait()
        except _Interrupted:
            pass


def _next_job() -> _Job | None:
    """The next queued job; None when none is, and the thread then ends (``submit`` starts
    another). A thread that ran a parallel torch op keeps an OpenMP team of its own as long as it
    lives; with more OpenMP threads than cores, all of them sleep between parallel regions
    instead of spinning, and the program's small ops run up to twice as slow (a training step
    1.3x) for as long as an idle compile thread would live."""
    global _worker
    with _idle:
        try:
            return _jobs.get_nowait()
        except queue.Empty:
            _worker = None
            return None


def submit(run: Callable[[list[Any]], None], args: tuple[Any, ...]) -> None:
    """Queues ``run(example_inputs)`` for the background thread, with this thread's torch state."""
    global _pending, _worker
    if _closing:
        return
    job = _Job(run, ExampleInputs(args), Ambient.of_this_thread())
    with _idle:  # (queued under the lock a thread leaving ``_next_job`` holds)
        _pending += 1
        _jobs.put(job)
        if _worker is None:
            _worker = threading.Thread(target=_work, name="thunder-compile", daemon=True)
            _worker.start()


def compiling() -> bool:
    """Whether a region compile is queued or running (the thread then competes for the CPU, so
    timings taken meanwhile say little)."""
    return _pending > 0


def is_fx_tracer_patch(value: Any) -> bool:
    """Whether ``value`` is one of the wrappers torch.fx's tracer puts in place of
    ``nn.Module.__call__`` and ``nn.Module.__getattr__`` while it traces."""
    code = getattr(value, "__code__", None)
    return code is not None and code.co_filename == _FX_TRACER_FILE


def fx_tracer_patching() -> bool:
    """Whether torch.fx's tracer has ``nn.Module``'s ``__call__`` or ``__getattr__`` replaced
    right now. It does so for the whole process while it traces, which every inductor compile
    does (``make_fx``, AOTAutograd): not the compile thread's (``thread_private_fx_tracing``),
    but a trace on another of the program's threads makes every module look patched."""
    methods = vars(torch.nn.Module)
    return is_fx_tracer_patch(methods.get("__call__")) or is_fx_tracer_patch(
        methods.get("__getattr__")
    )


def wait_while_fx_tracer_patches(timeout: float = 60.0) -> bool:
    """Waits, while a background compile runs, as long as ``nn.Module``'s methods are replaced
    by torch.fx's tracer, so that a program is neither traced nor checked against them; True if
    it waited."""
    if not (_pending and fx_tracer_patching()):
        return False
    deadline = time.monotonic() + timeout
    while _pending and fx_tracer_patching() and time.monotonic() < deadline:
        time.sleep(0.0005)
    return True


def wait_for_background_compiles(timeout: float | None = None) -> bool:
    """Blocks until every queued region compile has finished (compiled or failed); False if
    ``timeout`` seconds passed first."""
    with _idle:
        return _idle.wait_for(lambda: _pending == 0, timeout)


def _drop_lost_interruptions() -> None:
    """An interruption raised inside a callback whose errors are ignored (a weakref's) is
    reported as "Exception ignored in ..." on stderr: it is ours, and no error of the user's."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if unraisable.exc_type is not _Interrupted:
            previous(unraisable)

    sys.unraisablehook = hook


def _close() -> None:
    """At exit, queued compiles are dropped and a running one is interrupted (its region keeps
    running its torch calls; nothing is waiting for it)."""
    global _closing
    _closing = True
    worker = _worker
    if worker is None or worker.ident is None:
        return
    _drop_lost_interruptions()
    deadline = time.monotonic() + 60.0
    while not _stopped.is_set() and time.monotonic() < deadline:
        with _idle:
            if not _running:
                return
            # Raised at its next Python instruction; raised inside a callback whose errors are
            # ignored (a weakref's), it is lost, hence the loop. A compiler subprocess it waits
            # for finishes first.
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(worker.ident), ctypes.py_object(_Interrupted)
            )
        _stopped.wait(timeout=0.2)


# Before atexit's handlers (torch's own shut its compile workers down, which a running compile
# may be waiting for): the hook concurrent.futures uses to stop its threads at exit.
_register = getattr(threading, "_register_atexit", atexit.register)
_register(_close)
