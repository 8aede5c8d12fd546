"""Errors raised by ``thunder.jit`` about the program it compiles."""

from __future__ import annotations

from thunder_interp import uncatchable
from thunder_ir.errors import TracingError

__all__ = [
    "HigherOrderOperatorError",
    "InternalErrorWarning",
    "JitError",
    "RandomStateError",
    "RequestedError",
    "ReshapeWriteError",
    "RunsEagerly",
    "RunsNatively",
    "RunsSplit",
    "SharpEdgeError",
    "UnsupportedOperationError",
    "UnsupportedSideEffectError",
]


@uncatchable
class JitError(Exception):
    """The program cannot be compiled as written. Marked ``thunder_interp.uncatchable``: the
    interpreted program's own ``except`` clauses never swallow it."""


class UnsupportedOperationError(JitError, NotImplementedError):
    """A torch callable that thunder can neither mirror with an op nor run by its torch fallback
    was called (``.op`` names it, ``.location`` is the user's ``file:line``)."""

    def __init__(self, op: str, detail: str = "", location: str | None = None) -> None:
        self.op = op
        self.detail = detail
        self.location = location
        where = f" at {location}" if location else ""
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"thunder.jit: {op} is not supported{where}{extra}. Rewrite the call with "
            "supported ops, or make it outside the jitted function (thunder.examine(fn, *args) "
            "lists what a program uses)"
        )

    def with_location(self, location: str) -> UnsupportedOperationError:
        return type(self)(self.op, self.detail, location)


class ImpureCallError(UnsupportedOperationError):
    """A C function whose result may change between calls (``random.random``, ``time.time``,
    ``next`` on an outside iterator) was called while tracing: its result would be baked in."""

    def __init__(self, op: str, detail: str = "", location: str | None = None) -> None:
        self.op = op
        self.detail = detail
        self.location = location
        where = f" at {location}" if location else ""
        JitError.__init__(
            self,
            f"thunder.jit: calling {op}{where} is not supported: {detail}. Call it outside the "
            "jitted function and pass the value in as an argument",
        )


class RandomStateError(JitError, NotImplementedError):
    """A use of random-number-generator state that a compiled program cannot reproduce as eager
    does (a ``torch.Generator`` object passed to a random op would become a constant of the
    program); the message says what to do instead."""


class UnsupportedSideEffectError(JitError):
    """The function writes state outside its arguments in a way thunder cannot replay."""


class RequestedError(JitError):
    """An error the jit's options ask for: raised to the caller, never run through torch
    instead (thunder's other refusals run the call split)."""


class SharpEdgeError(RequestedError):
    """``sharp_edges="error"`` and the function read state from outside its arguments."""


class ReshapeWriteError(UnsupportedOperationError, RequestedError):
    """``reshape_inplace="error"`` and the function writes in place into what ``reshape``
    returned, which eager makes a view or a copy depending on strides."""


class HigherOrderOperatorError(JitError, ValueError):
    """A function handed to ``torch.cond``, ``while_loop``, ``map`` or ``scan`` breaks the
    operator's contract (branches returning different shapes, a loop body changing its carried
    values' metadata); the message names the functions and what each returned."""


@uncatchable
class RunsEagerly(Exception):
    """The program makes a call a trace cannot hold but eager runs (``loss.backward()`` inside
    the jitted function): the whole call runs eagerly, with a warning that names it. Not a
    ``JitError`` (that would be a refusal), and uncatchable by the program's ``except``
    clauses."""


class RunsSplit(RunsEagerly):
    """The program cannot be one compiled program, but torch runs it: the call runs through
    ``torch.compile`` with thunder's backend (``thunder.dynamo``), which splits it there and
    thunder compiles the graphs around the split. ``torch_op``: the qualified name of the torch
    callable torch must run (``torch.Tensor.t_``), where one call is the reason."""

    def __init__(self, message: str, torch_op: str | None = None) -> None:
        super().__init__(message)
        self.torch_op = torch_op


class RunsNatively(RunsSplit):
    """The program calls a function that must run outside any compiler
    (``torch.compiler.disable``, ``thunder.run_natively``): the call runs split there, the
    function natively (see ``RunsSplit``). (Reads of data tracing cannot compute stay eager
    runs: dynamo can take minutes on such programs, e.g. a ``max`` over a long ``tolist()``.)"""


class InternalErrorWarning(UserWarning):
    """Compiling a traced program failed inside thunder (a transform, an executor, code
    generation): a bug of thunder's, not the program's. The call ran eagerly, so its result is
    torch's; the warning names the exception and where thunder raised it, to report. The test
    suite turns it into an error (``pyproject.toml``'s ``filterwarnings``)."""


# The IR's tracing errors: what the program does depends on what tracing cannot know. A program
# that caught one would silently take a path eager does not take.
uncatchable(TracingError)
