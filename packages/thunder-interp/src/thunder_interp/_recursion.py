"""Recursion depth: CPython's limit as interpreted code sees it, and the real one the interpreter needs.

Interpreted code sees CPython's limit: the depth below the interpretation plus the interpreted
frames may reach ``sys.getrecursionlimit()``, then the next call raises ``RecursionError``. The
interpreter counts interpreted frames itself (:class:`DepthGuard`).

It also runs on several real Python frames per interpreted one, so while it runs the real limit
must be higher. Every few interpreted levels it measures CPython's real depth and asks for a real
limit of that depth, plus what the user may still nest (native code it calls, such as a key
function called by ``sorted``, recurses on real frames as in CPython and must stop where CPython
would), or headroom up to the next measurement. The limit is process-wide state, so
:class:`_ProcessLimit` applies the largest need of the running interpretations and gives the
user's limit back once none needs more.

A higher limit must not let the C stack overflow (a crash, not an exception): 3.10 keeps every
Python frame on it, and every version the frames resumed from C (interpreted generators). The
interpreter estimates the C stack the thread has and uses, and raises ``RecursionError`` itself
before it runs out, earlier than CPython would where the thread's stack is small.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import weakref
from types import CodeType, FrameType
from typing import Any

__all__ = ["LIMITS", "DepthGuard", "depth_below"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

# Interpreted levels between two measurements of the real stack.
CHECK_EVERY = 16
# Real frames one interpreted level may take (the usual call path takes 3 to 7).
FRAMES_PER_LEVEL_MAX = 12
# Real frames the interpreter needs beyond the last measurement before the next one.
HEADROOM = CHECK_EVERY * FRAMES_PER_LEVEL_MAX + 32

# Bytes of C stack per real Python frame, rounded up from measurements: 3.10 puts every frame on
# the C stack (about 420 bytes for plain calls, 800 for calls through C); 3.11+ only frames
# entered from C, such as generators resumed by next() (about 500 bytes each).
if sys.version_info >= (3, 11):
    _BYTES_PER_FRAME, _BYTES_PER_C_ENTRY = 0, 1000
else:
    _BYTES_PER_FRAME, _BYTES_PER_C_ENTRY = 600, 400
if hasattr(sys, "gettotalrefcount"):  # a debug build: far larger C frames
    _BYTES_PER_FRAME, _BYTES_PER_C_ENTRY = 4 * _BYTES_PER_FRAME, 4 * _BYTES_PER_C_ENTRY
# The interpreter's own functions that C code calls back (a sort key, the iterator list() pulls
# from): the C frames between them and their caller (list.sort keeps kilobytes of merge state on
# the C stack) are counted with them, generously.
_BYTES_PER_C_CALLBACK = 8 * max(_BYTES_PER_C_ENTRY, 1000)
_C_CALLBACK_CODES: set[CodeType] = set()
_WORST_LEVEL_BYTES = (
    FRAMES_PER_LEVEL_MAX * _BYTES_PER_FRAME + 2 * _BYTES_PER_C_ENTRY + _BYTES_PER_C_CALLBACK
)


def register_c_callbacks(*codes: CodeType) -> None:
    """Codes of interpreter functions that C code calls (see :data:`_BYTES_PER_C_CALLBACK`)."""
    _C_CALLBACK_CODES.update(codes)


def _holds(codes: Any, code: CodeType) -> bool:
    """``code in codes``, False for a code object that cannot be hashed (one generated with a
    dict among its constants, as torch.compile's are): none of those is registered."""
    try:
        return code in codes
    except TypeError:
        return False


_GENERATOR_FLAGS = 0x20 | 0x80 | 0x200  # generator, coroutine, async generator: resumed from C
_NO_LIMIT = 1 << 62
_MESSAGE = "maximum recursion depth exceeded"


class _ProcessLimit:
    """The process-wide recursion limit, shared by the interpretations running in all threads.

    ``user`` is the limit the user set (what ``sys.getrecursionlimit()`` shows interpreted code);
    the real limit is the largest of it and the needs of running interpretations. A change made
    by someone else while the limit is raised becomes the user's limit.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._needs: dict[int, int] = {}
        self._user = sys.getrecursionlimit()
        self._applied: int | None = None

    def _sync(self) -> int:
        current = sys.getrecursionlimit()
        if current != self._applied:
            self._user = current
            self._applied = None
        return self._user

    def _apply(self) -> None:
        target = max(self._user, *self._needs.values()) if self._needs else self._user
        current = sys.getrecursionlimit()
        if current != target:
            try:
                sys.setrecursionlimit(target)
                current = target
            except RecursionError:  # lower than the calling thread's depth: keep it higher
                pass
        self._applied = current if self._needs else None
        if not self._needs:
            self._user = current

    def reapply(self) -> None:
        with self._lock:
            self._apply()

    def user_limit(self) -> int:
        with self._lock:
            return self._sync()

    def set_user_limit(self, limit: int) -> None:
        with self._lock:
            self._sync()
            self._user = limit
            self._apply()

    def need(self, key: int, real_limit: int) -> None:
        with self._lock:
            self._sync()
            if self._needs.get(key) != real_limit:
                self._needs[key] = real_limit
                self._apply()

    def release(self, key: int) -> int:
        """Forget ``key``'s need; the user's limit."""
        with self._lock:
            self._sync()
            self._needs.pop(key, None)
            self._apply()
            return self._user


LIMITS = _ProcessLimit()


# 3.10/3.11 count a call of a builtin, and of an object's __call__ (a C-level call), in the
# recursion depth.
_C_CALL_COUNTED = 1 if sys.version_info < (3, 12) else 0
_DEPTH_IN_MESSAGE = re.compile(r"at the recursion depth (\d+)")


def _cpython_depth() -> int | None:
    """CPython's own recursion count here: Python frames and, on 3.10/3.11, C calls in progress
    (which frames alone miss). Asking for a limit below it fails with a message that tells it."""
    try:
        sys.setrecursionlimit(1)
    except RecursionError as e:
        found = _DEPTH_IN_MESSAGE.search(str(e))
        return int(found.group(1)) if found else None
    LIMITS.reapply()  # pragma: no cover - every caller is deeper than one frame
    return None


def _frame_bytes(frame: FrameType) -> int:
    cost = _BYTES_PER_FRAME
    code = frame.f_code
    if code.co_flags & _GENERATOR_FLAGS:
        cost += _BYTES_PER_C_ENTRY
    if _holds(_C_CALLBACK_CODES, code):
        cost += _BYTES_PER_C_CALLBACK
    return cost


# Functions whose real frames run an interpreted frame's dispatch loop (their local ``f`` is the
# Frame): run_frame, and Runtime.call_function with its exception path. Set by _runtime.
LOOP_CODES: set[CodeType] = set()


def register_loop_codes(*codes: CodeType) -> None:
    """The codes of the functions that run dispatch loops (see :data:`LOOP_CODES`)."""
    LOOP_CODES.update(codes)


# The compiled entries of warm functions (``_blocks``: ``enter_frame`` and the function's entry
# block in one generated function) run dispatch loops too; they are known by name and file (one
# per compiled code object: kept in no set, which would keep them alive).
COMPILED_ENTRY_NAME = "_compiled_entry_"
COMPILED_ENTRY_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "<generated block>")


def is_loop_code(code: CodeType) -> bool:
    """Whether real frames running ``code`` run an interpreted frame's dispatch loop."""
    return _holds(LOOP_CODES, code) or (
        code.co_name == COMPILED_ENTRY_NAME and code.co_filename == COMPILED_ENTRY_FILE
    )


def loop_frame_of(real: FrameType) -> Any:
    """The interpreted Frame whose dispatch loop the real frame ``real`` runs, or None."""
    if not is_loop_code(real.f_code):
        return None
    return real.f_locals.get("f")


def depth_below(entry: FrameType) -> tuple[int, int, int]:
    """``(user, real, c_bytes)`` below ``entry`` (the frame of the interpreter's entry point,
    called from the user's code): the depth as CPython counts it for the user (the frames the
    user sees: interpreted frames once, the interpreter's own not at all; on 3.10/3.11 also the C
    calls in progress), CPython's real depth here, and an estimate of the C stack in use."""
    user = real = c_bytes = entries = 0
    frame: FrameType | None = entry
    last: Any = None  # the interpreted frame counted last (its loop may span two real frames)
    while frame is not None:
        real += 1
        code = frame.f_code
        if code.co_flags & _GENERATOR_FLAGS:
            c_bytes += _BYTES_PER_C_ENTRY
        if _holds(_C_CALLBACK_CODES, code):
            c_bytes += _BYTES_PER_C_CALLBACK
        if is_loop_code(code):
            interpreted = frame.f_locals.get("f")
            if interpreted is not None and interpreted is not last:
                user += 1  # an interpreted frame's dispatch loop
                last = interpreted
        elif not code.co_filename.startswith(_PACKAGE_DIR):
            user += 1
        elif code is entry.f_code:
            entries += 1  # this interpretation's or an enclosing one's
        frame = frame.f_back
    c_bytes += real * _BYTES_PER_FRAME
    counted = _cpython_depth()
    if counted is None:
        return user, real, c_bytes
    # Counted but not the user's: this frame and _cpython_depth's, and on 3.10/3.11 the builtin
    # _cpython_depth calls and the C-level calls of the interpreter's entry points.
    c_calls_below = max(counted - real - 2 - _C_CALL_COUNTED * (1 + entries), 0)
    return user + c_calls_below, counted, c_bytes + c_calls_below * _BYTES_PER_FRAME


_PER_THREAD = threading.local()


def _thread_stack_bytes() -> int | None:
    """The size of this thread's C stack as far as it can be known (None: unbounded); measured
    once per thread."""
    try:
        size: int | None = _PER_THREAD.stack_bytes
    except AttributeError:
        size = _PER_THREAD.stack_bytes = _probe_stack_bytes()
    return size


def _probe_stack_bytes() -> int | None:
    if threading.current_thread() is threading.main_thread():
        try:
            import resource
        except ImportError:  # pragma: no cover - not POSIX
            return 1 << 20
        soft = resource.getrlimit(resource.RLIMIT_STACK)[0]
        return None if soft == resource.RLIM_INFINITY else soft
    # The size new threads get (most likely this one's too); asking also sets it: put it back.
    size = threading.stack_size()
    threading.stack_size(size)
    if size:
        return size
    if sys.platform.startswith("linux"):
        # glibc gives new threads RLIMIT_STACK, or 2 MiB when it is unlimited.
        import resource

        soft = resource.getrlimit(resource.RLIMIT_STACK)[0]
        return 2 << 20 if soft == resource.RLIM_INFINITY else soft
    if sys.platform == "darwin":  # pragma: no cover
        return 16 << 20  # what CPython asks for its threads on macOS
    return 1 << 20  # pragma: no cover


def _c_stack_budget() -> int:
    """Bytes of this thread's C stack the interpreter may fill (three quarters: C code needs some)."""
    size = _thread_stack_bytes()
    return _NO_LIMIT if size is None else size * 3 // 4


class _Checkpoint:
    """A measurement, every few interpreted levels."""

    __slots__ = ("c_bytes", "depth", "frame", "levels_cap", "real", "real_limit")

    def __init__(self, depth: int, frame: FrameType | None, real: int, c_bytes: int) -> None:
        self.depth = depth  # interpreted depth
        # The real frame measured, to count from next time. Kept only while the interpretation
        # is about as deep: a frame object that outlives its frame keeps the frames below alive,
        # and freeing a long chain of them recurses deep in C.
        self.frame = frame
        self.real = real  # CPython's real depth
        self.c_bytes = c_bytes  # estimated C stack in use
        self.real_limit = 0
        self.levels_cap = _NO_LIMIT  # interpreted depth the C stack surely holds


class DepthGuard:
    """The recursion bookkeeping of one interpretation.

    The dispatch loop counts interpreted frames in ``rt.depth`` and calls :meth:`deeper` when it
    reaches ``rt.depth_limit`` and :meth:`shallower` when it drops below ``rt.depth_floor``.
    """

    def __init__(self, rt: Any, below: tuple[int, int, int]) -> None:
        # Weakly: the runtime holds its guard, and what the interpretation touched (a callback
        # made per call) dies with the runtime as in eager, not at a gc pass.
        self._rt = weakref.ref(rt)
        self.base, real, c_bytes = below  # see depth_below
        self.c_budget = _c_stack_budget()
        first = _Checkpoint(0, None, real, c_bytes)
        self.checkpoints = [first]
        self.measured: dict[int, _Checkpoint] = {}  # by id of their frame
        self.active = True
        room = self.user_room()
        self._plan(first, room)
        self._install(first, room)

    @property
    def rt(self) -> Any:
        return self._rt()

    def user_room(self) -> int:
        """How many interpreted frames may nest (CPython's limit minus the frames below)."""
        return LIMITS.user_limit() - self.base

    def _measure(self, depth: int, frame: FrameType) -> _Checkpoint:
        """A checkpoint at the real frame ``frame``, ``depth`` interpreted levels deep: count the
        frames down to the nearest one measured before (or all of them)."""
        measured = self.measured
        real = c_bytes = 0
        below: FrameType | None = frame
        while below is not None:
            cp = measured.get(id(below))
            if cp is not None and cp.frame is below:
                real += cp.real
                c_bytes += cp.c_bytes
                break
            real += 1
            c_bytes += _frame_bytes(below)
            below = below.f_back
        cp = _Checkpoint(depth, frame, _cpython_depth() or real, c_bytes)
        measured[id(frame)] = cp
        return cp

    def _plan(self, cp: _Checkpoint, room: int) -> None:
        """The real limit to ask for at ``cp`` and how deep the C stack lets it go (``room``:
        the interpreted frames the user's limit allows)."""
        # What the user may still nest (native code recurses on real frames as in CPython), or
        # what the interpreter needs until the next measurement, whichever is more.
        cp.real_limit = cp.real + max(room - cp.depth + 2 * CHECK_EVERY, HEADROOM)
        c_room = self.c_budget - cp.c_bytes
        if _BYTES_PER_FRAME:
            cp.real_limit = min(cp.real_limit, cp.real + max(c_room, 0) // _BYTES_PER_FRAME)
        if c_room < CHECK_EVERY * _WORST_LEVEL_BYTES:
            cp.levels_cap = cp.depth + max(c_room, 0) // _WORST_LEVEL_BYTES

    def _install(self, cp: _Checkpoint, room: int) -> None:
        rt = self.rt
        if not self.active:
            rt.depth_limit = min(room, cp.levels_cap)
            rt.depth_floor = -1
            return
        rt.depth_limit = min(room, cp.depth + CHECK_EVERY, cp.levels_cap)
        rt.depth_floor = cp.depth - CHECK_EVERY if len(self.checkpoints) > 1 else -1
        LIMITS.need(id(self), cp.real_limit)

    def deeper(self, depth: int, frame: FrameType, where: str = "") -> None:
        """``depth`` levels run and ``frame`` (a real one) starts another (``where``: what the
        message adds, as CPython's does)."""
        room = self.user_room()
        if depth >= room:
            raise RecursionError(_MESSAGE + where)
        top = self.checkpoints[-1]
        if not self.active:
            if depth >= top.levels_cap:
                raise RecursionError(_MESSAGE)
            return
        if depth < top.depth + CHECK_EVERY and depth < top.levels_cap:
            self._install(top, room)  # the user's limit changed
            return
        cp = self._measure(depth, frame)
        self._plan(cp, room)
        self.checkpoints.append(cp)
        self._install(cp, room)
        if depth >= cp.levels_cap:
            raise RecursionError(_MESSAGE)  # before the C stack overflows

    def limit_changed(self) -> None:
        """The user's limit changed (``sys.setrecursionlimit`` in interpreted code)."""
        top = self.checkpoints[-1]
        room = self.user_room()
        self._plan(top, room)
        self._install(top, room)

    def shallower(self, depth: int) -> None:
        """Back at ``depth`` interpreted frames: forget the measurements made deeper."""
        checkpoints = self.checkpoints
        while len(checkpoints) > 1 and depth < checkpoints[-1].depth - CHECK_EVERY:
            del self.measured[id(checkpoints.pop().frame)]
        self.limit_changed()

    def user_depth(self) -> int:
        """The depth CPython would report in the frame running now."""
        depth: int = self.rt.depth
        return self.base + depth

    def close(self) -> None:
        """The interpretation is over; generators it made may still run, with CPython's limit."""
        self.active = False
        room = LIMITS.release(id(self)) - self.base
        del self.checkpoints[1:]
        self.measured.clear()
        self._install(self.checkpoints[0], room)
