"""A compiled call of a program that takes locks (``TracedProgram.locks``: ``threading`` Lock,
RLock, a Condition's lock, Semaphore) holds them from its prologue through its epilogue, so what
it reads and writes of outside state under them is as exclusive as in eager.

The Python prologue first runs without them (a call another entry serves never waits for them);
then the locks are taken, each once, never waiting for one while holding another (``_take_all``),
and the prologue runs again under them, with the computation and the epilogue. Every lock is
given back before the call's stages return: the wrapped prologue runs the whole call and hands
its outcome to the computation and epilogue that stand in for the real ones, which return it or
raise the error of the stage that raised, so the caller handles each stage's errors as for any
program."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from thunder.binding.state import ProgramLock
from thunder_ir.prims.prologue import PROLOGUE_MISSES, GuardFailure

__all__ = ["holding_locks"]


class _Outcome:
    """What the call computed under the locks: its result, or the error of the stage that
    raised (the computation's, else the epilogue's)."""

    __slots__ = ("computation_error", "epilogue_error", "result")

    def __init__(self) -> None:
        self.result: Any = None
        self.computation_error: BaseException | None = None
        self.epilogue_error: BaseException | None = None


def _give_back(taken: list[tuple[Any, ProgramLock]]) -> None:
    while taken:
        obj, lock = taken.pop()
        lock.release(obj)


def _take_all(found: list[tuple[Any, ProgramLock]]) -> None:
    """Takes every lock of ``found``, never waiting while holding one: it waits for one (the
    first, then the one that was busy), then takes the others only if free, else gives back
    what it took and waits again. The call so holds locks together that the program may have
    taken one after another without deadlocking code that takes them in another order."""
    first = 0
    while True:
        obj, lock = found[first]
        lock.acquire(obj)
        taken = [found[first]]
        busy = None
        try:
            for i, (other, other_lock) in enumerate(found):
                if i != first:
                    if not other_lock.acquire(other, False):
                        busy = i
                        break
                    taken.append((other, other_lock))
        except BaseException:
            _give_back(taken)
            raise
        if busy is None:
            return
        _give_back(taken)
        first = busy


def _taking(
    find: Callable[..., tuple[Any, ...]], locks: Sequence[ProgramLock]
) -> Callable[..., list[tuple[Any, ProgramLock]]]:
    def take(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[Any, ProgramLock]]:
        try:
            objs = find(args, kwargs)
        except PROLOGUE_MISSES as e:
            raise GuardFailure(f"{type(e).__name__}: {e}") from e
        found: list[tuple[Any, ProgramLock]] = []
        for obj, lock in zip(objs, locks):
            if type(obj) is not lock.kind:  # (its acquire would run something else)
                raise GuardFailure(
                    f"{lock.access.describe()} is a {type(obj).__name__}, not the "
                    f"{lock.kind.__name__} the program took"
                )
            if not any(obj is t for t, _ in found):  # (found twice: taken once)
                found.append((obj, lock))
        if len(found) == 1:
            found[0][1].acquire(found[0][0])
        else:
            _take_all(found)
        return found

    return take


def holding_locks(
    prologue: Callable[..., Any],
    computation: Callable[..., Any],
    epilogue: Callable[..., Any] | None,
    locks: Sequence[ProgramLock],
    find: Callable[..., tuple[Any, ...]],
    applies: Callable[..., Any],
) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any] | None]:
    """The entry's prologue, computation and epilogue for a program that takes ``locks``
    (``find(args, kwargs)`` reads them at their paths). ``applies`` is the Python prologue
    alone, run first without the locks: outside them, other threads may change what it reads
    between the guard tree's reads and a check of the tree against it."""
    take = _taking(find, locks)

    def locked_prologue(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[_Outcome]:
        applies(args, kwargs)  # GuardFailure: not this entry, before waiting for its locks
        taken = take(args, kwargs)
        outcome = _Outcome()
        try:
            inputs = prologue(args, kwargs)  # again: the state as the locks hold it
            try:
                out = computation(*inputs)
            except BaseException as e:
                outcome.computation_error = e
                return (outcome,)
            if epilogue is None:
                outcome.result = out
            else:
                try:
                    outcome.result = epilogue(args, kwargs, out)
                except BaseException as e:
                    outcome.epilogue_error = e
        finally:
            _give_back(taken)
        return (outcome,)

    def locked_computation(outcome: _Outcome) -> Any:
        error, outcome.computation_error = outcome.computation_error, None
        if error is not None:
            raise error
        return outcome.result if epilogue is None else outcome

    def locked_epilogue(args: tuple[Any, ...], kwargs: dict[str, Any], outcome: _Outcome) -> Any:
        error, outcome.epilogue_error = outcome.epilogue_error, None
        if error is not None:
            raise error
        return outcome.result

    # (tools find what runs under the wrappers)
    locked_prologue.__wrapped__ = prologue  # type: ignore[attr-defined]
    locked_computation.__wrapped__ = computation  # type: ignore[attr-defined]
    for name in ("__thunder_source__", "guard_tree"):
        if hasattr(prologue, name):
            setattr(locked_prologue, name, getattr(prologue, name))
    return locked_prologue, locked_computation, None if epilogue is None else locked_epilogue
