"""Basic-block compilation: a straight-line run of simple instructions becomes one generated function.

The op at the first index of such a run is replaced by a generated Python function that executes
the whole run with the value stack held in Python locals, and returns the next instruction index
like any op. The ops of the other instructions of the run stay in place, so a jump into the middle
of a run still executes correctly (one instruction at a time).

The source of each instruction comes from its opcode's *block template*, registered next to the
opcode's handler in ``ops/`` (``_registry.block_template``); this module finds the runs, gives
the templates a :class:`BlockBuilder` and compiles what they wrote.

Exceptions: every generated line belongs to one instruction (``block_owners``); when a generated
function raises, the dispatch loop maps the traceback line back to the faulting instruction, so
exception-table lookup, ``lasti`` and tracebacks see the instruction that raised. A run never
spans two exception-table entries, and within one entry CPython's stack never drops below the
handler's depth, so values kept in Python locals are never ones a handler needs.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from thunder_interp import _frame as _frame_module
from thunder_interp._bytecode import ExceptionHandler, Instruction
from thunder_interp._callbacks import PROVENANCE
from thunder_interp._frame import NULL, CompiledCode, Frame
from thunder_interp._recursion import COMPILED_ENTRY_FILE, COMPILED_ENTRY_NAME
from thunder_interp._registry import (
    BLOCK_HELPERS,
    BLOCK_TEMPLATES,
    ENDS_BLOCK,
    GOES_ON,
    NOT_COMPILED,
    SKIPPABLE_OPCODES,
    Op,
    next_index,
)
from thunder_interp._runtime import resume_after_exception
from thunder_interp._slots import PLAIN, PLAIN_VALUES
from thunder_interp.ops.control import UNCONDITIONAL_JUMPS

if TYPE_CHECKING:
    from thunder_interp.ops.arith import ComparedValues

__all__ = ["BlockBuilder", "block_fault_index", "compile_blocks"]

_FILENAME = COMPILED_ENTRY_FILE  # "<generated block>" in this directory

# Names the builder itself writes into generated code (stack placeholders, plain-type tests);
# templates declare the others they use when registered (``BLOCK_HELPERS``).
_BUILDER_NAMES: dict[str, Any] = {"NULL": NULL, "P": PLAIN, "PV": PLAIN_VALUES}
# ... and the names compiled entries use (set below, once their functions are defined).
_ENTRY_NAMES = ("Frame", "GF", "RAE", "EFAULT")


class BlockBuilder:
    """Generates the source of one block; the value stack is simulated with Python names.

    Templates write lines with :meth:`emit`, each owned by the instruction being added, and use
    the frame fields of ``_PREAMBLE`` under their short names (``st``, ``lv``, ``rt``...), the
    builder's names (``NULL``, ``P``, ``PV``), the helpers they declared and :meth:`const`."""

    def __init__(
        self,
        instructions: tuple[Instruction, ...],
        local_names: tuple[str, ...],
        always_bound: Callable[[int], bool],
        hooked: bool,
        start: int,
        hooks: frozenset[str],
    ) -> None:
        self.start = start  # names of constants carry it: a superblock holds several blocks
        self.instructions = instructions
        self.local_names = local_names
        self.always_bound = always_bound  # whether a local slot is bound whenever it is read
        self.hooked = hooked  # callbacks or provenance: templates write the hooked variants
        # The hook profile (``_callbacks.hook_profile``): the hooks set, and "provenance". The
        # block serves only interpretations with this profile, so templates leave out what the
        # hooks that are not set would need.
        self.hooks = hooks
        self.provenance = PROVENANCE in self.hooks
        # Opaque calls are made directly: no hook, no provenance of their results.
        self.plain_opaque = "opaque_call" not in self.hooks and not self.provenance
        self.index = start  # the instruction being added
        self.body: list[tuple[str, int]] = []  # (line, owning instruction)
        self.stack: list[str] = []  # the names holding the top of the value stack
        self.consts: dict[str, Any] = {}  # see const
        self.ntemps = 0
        self.count = 0  # instructions compiled
        # Names whose values are known to be of plain types (constants): no type check needed.
        self.plain_names: set[str] = set()
        # The comparison just compiled, for a conditional jump on its result to fuse with.
        self.last_compare: ComparedValues | None = None
        self.last_send = -1  # the index of a SEND in this block (its yield may follow)
        self.finished = False  # see finish

    # -- for templates ---------------------------------------------------------------------------

    def hooked_for(self, *names: str) -> bool:
        """Whether provenance or one of the hooks ``names`` is on (as CompileContext's)."""
        return self.hooked and (self.provenance or any(name in self.hooks for name in names))

    def emit(self, text: str, index: int | None = None) -> None:
        """Add a line, owned by instruction ``index`` (the one being added by default)."""
        self.body.append((text, self.index if index is None else index))

    def temp(self) -> str:
        self.ntemps += 1
        return f"t{self.ntemps}"

    def push_expr(self, expr: str) -> str:
        """Push the value of ``expr``, held in a new temporary (returned)."""
        t = self.temp()
        self.emit(f"{t} = {expr}")
        self.stack.append(t)
        return t

    def pop(self) -> str:
        """The name of the top of the stack, popped (from the frame's stack when the block's
        own part of it is empty)."""
        if self.stack:
            return self.stack.pop()
        t = self.temp()
        self.emit(f"{t} = st.pop()")
        return t

    def pop_values(self, n: int) -> list[str]:
        """The names of the top ``n`` values, popped (the deepest first)."""
        return [self.pop() for _ in range(n)][::-1]

    def const(self, value: Any) -> str:
        """A name bound to ``value`` in the generated code."""
        name = f"c{self.start}_{len(self.consts)}"
        self.consts[name] = value
        if type(value) in PLAIN:
            self.plain_names.add(name)
        return name

    def plain_test(self, *names: str, types: str = "P") -> str:
        """The test that ``names`` hold values of the plain types ``types`` (``P``, or ``PV``
        for comparisons that report identity); "True" when known."""
        tests = [f"type({n}) in {types}" for n in names if n not in self.plain_names]
        return " and ".join(tests) if tests else "True"

    def flush_stack(self, index: int | None = None) -> None:
        """Push the block's part of the stack onto the frame's (before leaving the block)."""
        if self.stack:
            self.emit(f"st.extend(({', '.join(self.stack)},))", index)
            self.stack.clear()

    def leave(self, target: int, index: int | None = None) -> None:
        """Go on at instruction ``target`` (as resolved): a return of the value on top of the
        stack where that is the RETURN_VALUE it returns (the rest of the stack goes with the
        frame), else the block's part of the stack pushed and a jump."""
        if self.stack and self.instructions[target].opname == "RETURN_VALUE":
            self.emit(f"f.retval = {self.stack.pop()}", index)
            self.emit("return 0", index)
            self.stack.clear()
            return
        self.flush_stack(index)
        self.emit(f"return {target}", index)

    def resolve_target(self, index: int) -> int:
        """Where going to instruction ``index`` leads: past no-ops and unconditional jumps."""
        instructions = self.instructions
        last = len(instructions) - 1
        for _ in range(16):
            if not 0 < index <= last:
                break
            opname = instructions[index].opname
            if opname in SKIPPABLE_OPCODES and index < last:
                index += 1
            elif opname in UNCONDITIONAL_JUMPS:
                index = instructions[index].target
            else:
                break
        return index

    next_index = next_index  # as CompileContext's

    # -- for compile_blocks ------------------------------------------------------------------------

    def add(self, ins: Instruction) -> int:
        """Compile ``ins`` with its opcode's template: ``GOES_ON``, ``ENDS_BLOCK`` or
        ``NOT_COMPILED`` (as ``_registry`` describes them)."""
        if ins.opname in SKIPPABLE_OPCODES:
            return GOES_ON
        template = BLOCK_TEMPLATES.get(ins.opname)
        if template is None:
            return NOT_COMPILED
        self.index = ins.index
        result = template(self, ins)
        if result != NOT_COMPILED:
            self.count += 1
        return result

    def finish(self, fallthrough: int, ended: bool) -> None:
        """Close the body: a run that did not end goes on at ``fallthrough`` (once: the body
        serves its block and the superblock)."""
        if self.finished:
            return
        self.finished = True
        if not ended:
            self.leave(self.resolve_target(fallthrough), self.start)

    def build(self, fallthrough: int, ended: bool) -> Op:
        self.finish(fallthrough, ended)
        preamble = [(text, -1, 2) for text in _preamble([text for text, _ in self.body], set())]
        body = preamble + [(text, index, 2) for text, index in self.body]
        block: Any = _generate("block", body, self.consts)
        return cast(Op, block)

    def build_entry(self, fallthrough: int, ended: bool, padded: bool) -> Any:
        """The compiled entry of a function whose entry block this is (see
        :func:`_generate_entry`; None unless the block always returns or raises)."""
        self.finish(fallthrough, ended)
        texts = [text for text, _ in self.body]
        preamble = [(text, -1, 2) for text in _preamble(texts, {"rt"})]
        body = preamble + [(text, index, 2) for text, index in self.body]
        return _generate_entry(body, self.consts, padded)


# Frame fields a generated function loads, when its body uses them (this runs on every
# execution, so only the used ones).
_PREAMBLE = (
    ("rt", "f.rt"),
    ("st", "f.stack"),
    ("lv", "f.lv"),
    ("LA", "rt.lookasides"),
    ("LC", "rt.lookaside_codes"),
    ("G", "f.globals"),
    ("RS", "rt.token"),
    ("PT", "rt.prov"),
    ("CH", "rt.cb_load_const"),
    ("GH", "rt.cb_load_global"),
    ("SA", "rt.cb_store_attr"),
    ("AH", "rt.cb_load_attr"),
)
_PREAMBLE_USE = re.compile(r"(?<![.\w])(st|lv|LA|LC|G|rt|RS|PT|CH|GH|SA|AH)\b")
_FROM_RUNTIME = frozenset(short for short, value in _PREAMBLE if value.startswith("rt."))


def _preamble(texts: list[str], loaded: set[str]) -> list[str]:
    """The loads of the frame fields ``texts`` use that are not in ``loaded`` (updated)."""
    used = set(_PREAMBLE_USE.findall("\n".join(texts)))
    if used & _FROM_RUNTIME:
        used.add("rt")
    used -= loaded
    loaded |= used
    return [f"{short} = {value}" for short, value in _PREAMBLE if short in used]


def _generate(
    name: str, body: list[tuple[str, int, int]], consts: dict[str, Any], params: str = "f"
) -> Any:
    """Compile a function ``name(params)`` from ``body`` (text, owning instruction, indent
    level), with the constants ``consts`` and the helpers it uses."""
    lines = ["", f"    def {name}({params}):"]
    owners: dict[int, int] = {}
    for text, index, indent in body:
        lines.append("    " * indent + text)
        if index >= 0:
            owners[len(lines)] = index
    lines.append(f"    return {name}")
    # Only the helpers the body uses (each one passed costs compiling and calling ``make``; a
    # name found in the text that is not one of them costs no more than that).
    text = "\n".join(lines)
    env = {name: value for name, value in _BUILDER_NAMES.items() if name in text}
    env.update((name, value) for name, value in BLOCK_HELPERS.items() if name in text)
    env.update(consts)
    lines[0] = f"def make({', '.join(env)}):"
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines) + "\n", _FILENAME, "exec"), namespace)
    fn: Any = namespace["make"](*env.values())
    fn.block_owners = owners
    return fn


_EXIT = re.compile(r"\breturn (\d+)$")


def build_superblock(runs: list[_Run]) -> Op | None:
    """One function running the blocks of ``runs`` that ran (the first is the entry) one after
    another: a jump between two of them is a ``while`` loop step, not a return to the dispatch
    loop and a call of the next block with its own preamble. A jump anywhere else returns.

    The entry block runs first on its own (most calls end there or leave it once); the loop
    after it holds every block, the entry last, for the jumps that follow."""
    built = _superblock_runs(runs)
    if built is None:
        return None
    body, consts = _superblock_body(built, runs[0].start, set())
    superblock: Any = _generate("superblock", body, consts)
    return cast(Op, superblock)


def build_superblock_entry(runs: list[_Run], padded: bool) -> Any:
    """The compiled entry (see :func:`_generate_entry`) of the superblock of ``runs``."""
    built = _superblock_runs(runs)
    if built is None:
        return None
    body, consts = _superblock_body(built, runs[0].start, {"rt"})
    return _generate_entry(body, consts, padded)


def _superblock_runs(runs: list[_Run]) -> dict[int, _Run] | None:
    """The runs a superblock holds (those that ran), by start; None: too few for one."""
    built = {run.start: run for run in runs if run.block is not None or run.count >= 2}
    if len(built) < 2 or runs[0].start not in built:
        return None
    for run in built.values():
        run.builder.finish(run.fallthrough, run.ended)
    return built


def _superblock_body(
    built: dict[int, _Run], entry: int, loaded: set[str]
) -> tuple[list[tuple[str, int, int]], dict[str, Any]]:
    """The body of the superblock of the runs ``built`` (``loaded``: the fields the function
    has already)."""
    # The entry's fields are loaded once; another block loads the others it uses each time it
    # runs (a call that returns from the entry block pays for no more than that block did).
    body = [(text, -1, 2) for text in _preamble([t for t, _ in built[entry].builder.body], loaded)]
    consts: dict[str, Any] = {}
    for run in built.values():
        consts.update(run.builder.consts)
    body.append(("while True:", -1, 2))  # the first pass: ``break`` enters the loop below
    body += _section(built[entry].builder, built, "break", None, 3)
    body.append(("while True:", -1, 2))
    order = sorted(start for start in built if start != entry)
    if any(_jumps_to(run.builder, entry) for run in built.values()):
        order.append(entry)  # (else the loop needs no section for it: less to compile)
    for k, start in enumerate(order):
        builder = built[start].builder
        following = order[k + 1] if k + 1 < len(order) else None
        body.append((f"if pc == {start}:", -1, 3))
        body += [(text, -1, 4) for text in _preamble([t for t, _ in builder.body], set(loaded))]
        body += _section(builder, built, "continue", following, 4)
    return body, consts


# The compiled entry of a function: ``_runtime.enter_frame`` with the function's entry block (or
# superblock) in place of the call of its op; what a call of a warm function runs (through
# ``cc.enter``). The body's returns return the value; an exception goes on as in enter_frame,
# at the instruction its line tells. Real frames running it are dispatch loops for the frame
# introspection (``_recursion.is_loop_code``: known by name; its line tells the instruction).
_ENTRY_PROLOGUE = (
    "f = Frame()",
    "f.rt = rt",
    "f.cc = cc",
    "f.code = code",
    "args.extend(cc.padding)",
    "f.lv = args",
    "f.stack = []",
    "f.globals = fn.__globals__",
    "f.fn = fn",
    "pc = 1",
    "depth = rt.depth",
    "if depth >= rt.depth_limit: rt.guard.deeper(depth, GF())",
    "rt.depth = depth + 1",
    "try:",
    "    try:",
)
_ENTRY_EPILOGUE = (
    "    except BaseException as e:",
    "        exc = e  # handled below, outside this handler (no implicit exception chaining)",
    "    RAE(f, exc, EFAULT(f, exc))",
    "    return f.retval",
    "finally:",
    "    rt.depth = depth",
    "    if depth < rt.depth_floor: rt._shallower(depth)",
)


def _generate_entry(body: list[tuple[str, int, int]], consts: dict[str, Any], padded: bool) -> Any:
    """The compiled entry running ``body`` (an entry block's or a superblock's, its top level
    at indent 2; ``padded``: the code has local slots beyond its parameters); None unless every
    way out of it returns or raises (``return 0``: the code's return, with ``f.retval`` set)."""
    inner: list[tuple[str, int, int]] = []
    for text, index, indent in body:
        match = _EXIT.search(text)
        if match is not None:
            if match.group(1) != "0":
                return None  # it goes on in a single op: enter_frame's loop runs the frame
            if text == "return 0" and inner:
                previous, owner, level = inner[-1]
                value = _RETVAL.fullmatch(previous)
                if value is not None and level == indent + 2:
                    inner[-1] = (f"return {value.group(1)}", owner, level)
                    continue  # (the caller takes the value: no one reads the frame's)
            text = text[: match.start()] + "return f.retval"
        elif text == "lv = f.lv":
            text = "lv = args"  # (the frame's local slots)
        inner.append((text, index, indent + 2))
    prologue = [text for text in _ENTRY_PROLOGUE if padded or "padding" not in text]
    epilogue = list(_ENTRY_EPILOGUE)
    if not any(text == "st = f.stack" for text, _, _ in inner):
        # The body has no use for the value stack: made where an exception goes on (its
        # handler's ops use it).
        prologue.remove("f.stack = []")
        epilogue.insert(epilogue.index("    RAE(f, exc, EFAULT(f, exc))"), "    f.stack = []")
    lines = [(text, -1, 2) for text in prologue]
    lines += inner
    lines += [(text, -1, 2) for text in epilogue]
    return _generate(COMPILED_ENTRY_NAME, lines, consts, "rt, fn, code, cc, args")


_RETVAL = re.compile(r"f\.retval = (\w+)")


def _entry_fault(f: Frame, exc: BaseException) -> int:
    """The instruction of the compiled entry of ``f``'s code that raised ``exc``."""
    entry: Any = f.cc.enter
    return block_fault_index(exc, entry, entry.block_owners, 1)


def _jumps_to(builder: BlockBuilder, target: int) -> bool:
    """Whether the block of ``builder`` may go on at instruction ``target``."""
    for text, _ in builder.body:
        match = _EXIT.search(text)
        if match is not None and int(match.group(1)) == target:
            return True
    return False


def _section(
    builder: BlockBuilder, built: dict[int, _Run], step: str, following: int | None, indent: int
) -> list[tuple[str, int, int]]:
    """A block's body in a superblock: a jump to a block of it sets ``pc`` and does ``step``
    (none when it falls through to ``following``, the next section)."""
    lines = []
    last = len(builder.body) - 1
    for n, (text, index) in enumerate(builder.body):
        match = _EXIT.search(text)
        target = int(match.group(1)) if match else 0
        if match is not None and target in built:
            jump = (
                f"pc = {target}" if n == last and target == following else f"pc = {target}; {step}"
            )
            text = text[: match.start()] + jump
        lines.append((text, index, indent))
    return lines


def compile_blocks(
    instructions: tuple[Instruction, ...],
    handlers: tuple[ExceptionHandler | None, ...],
    ops: list[Op],
    local_names: tuple[str, ...],
    hooked: bool,
    always_bound: Callable[[int], bool],
    hooks: frozenset[str],
    cc: CompiledCode,
) -> None:
    """Replace the op at the start of every eligible run of instructions by a block op; the
    entry's op, when a run starts there, later becomes a superblock of the hot runs (and
    ``cc``'s compiled entry, ``cc.enter``, is built from it)."""
    targets = {ins.target for ins in instructions if ins.target >= 0}
    targets.update(h.target for h in handlers if h is not None)
    n = len(instructions)
    # Where a call starts: the run at 1, or past the no-ops (a ``try`` at the start of a
    # function is a NOP outside the try's handler, then its body, a run of its own).
    entry = 1
    while entry < n - 1 and instructions[entry].opname in SKIPPABLE_OPCODES:
        entry += 1
    runs: list[_Run] = []
    i = 1
    while i < n:
        # A generator resumes after a ``yield`` past its RESUME: the run starts there.
        if instructions[i - 1].opname == "YIELD_VALUE":
            while i < n - 1 and instructions[i].opname in SKIPPABLE_OPCODES:
                i += 1
        builder = BlockBuilder(instructions, local_names, always_bound, hooked, i, hooks)
        j = i
        ended = False
        while j < n:
            ins = instructions[j]
            if j != i and handlers[j] != handlers[i]:
                break
            if j != i and j in targets and ins.opname not in UNCONDITIONAL_JUMPS:
                break  # a jump here finds a block (a jump's own op stays for those to it)
            result = builder.add(ins)
            if result == NOT_COMPILED:
                break
            j += 1
            if result == ENDS_BLOCK:
                ended = True
                break
        if builder.count >= 2:
            run = _Run(i, builder, j, ended, ops[i])
            runs.append(run)
            ops[i] = _lazy_block(ops, run, cc if i in (1, entry) else None)
        i = max(j, i + 1)
    if runs and runs[0].start in (1, entry) and len(runs) > 1:
        ops[runs[0].start] = _lazy_superblock(ops, runs, cc)


# A block is compiled once it has run this many times: compiling one costs 0.1 to 1 ms, what
# running its instructions one by one costs more than the block in some 50 to 500 runs. Code
# run a few times (library code traced once per compilation) stays uncompiled.
HOT_THRESHOLD = 32
# The entry's superblock is compiled once the entry has run this many times; it holds the
# blocks that have run twice by then (the code that runs, not every cold path), which then need
# no block of their own where the superblock reaches them (one compilation, not several).
SUPERBLOCK_THRESHOLD = 32


class _Run:
    """One run of instructions that compiles to a block: its builder and, once hot, its op."""

    __slots__ = ("block", "builder", "count", "ended", "fallthrough", "original", "start")

    def __init__(
        self, start: int, builder: BlockBuilder, fallthrough: int, ended: bool, original: Op
    ):
        self.start = start
        self.builder = builder
        self.fallthrough = fallthrough
        self.ended = ended
        self.original = original
        self.block: Op | None = None
        self.count = 0  # runs before it was compiled

    def compiled(self) -> Op:
        if self.block is None:
            self.block = self.builder.build(self.fallthrough, self.ended)
        return self.block


def _lazy_block(ops: list[Op], run: _Run, cc: CompiledCode | None) -> Op:
    """An op that runs the run's instructions one by one and, once hot, replaces itself by the
    compiled block (``cc``: the run is the entry's, see :func:`_entry_first`)."""
    start = run.start
    original = run.original

    def lazy(f: Frame) -> int:
        run.count += 1
        if run.count >= HOT_THRESHOLD:
            if ops[start] is lazy and _entry_first(
                cc, lambda padded: run.builder.build_entry(run.fallthrough, run.ended, padded)
            ):
                run.count = 0
                return original(f)
            block = run.compiled()
            if ops[start] is lazy:
                ops[start] = block
            return block(f)
        return original(f)

    return lazy


def _entry_first(cc: CompiledCode | None, build: Callable[[bool], Any]) -> bool:
    """For a function whose calls take the fast path (``cc``), when its entry's op is hot:
    build its compiled entry (``build(padded)``: whether the code has local slots beyond its
    parameters), which those calls run from now on, in place of the
    entry's block (or superblock), which other calls (with keywords, say) run: that is built if
    they run it often (the op is left to count them). False where there is no entry to build."""
    if cc is None or cc.fast_argcount < 0 or cc.enter is not _frame_module.DEFAULT_ENTER:
        return False
    entry = build(bool(cc.padding))
    if entry is None:
        return False
    cc.enter = entry
    return True


def _lazy_superblock(ops: list[Op], runs: list[_Run], cc: CompiledCode | None) -> Op:
    """The entry's op: runs the entry block until warm, then replaces itself by the superblock
    (or, when too few blocks ran, by the entry block); first, for calls that take the fast path,
    the code's compiled entry is built from it, where it can be (see :func:`_entry_first`)."""
    entries = 0
    start = runs[0].start
    first = ops[start]

    def lazy(f: Frame) -> int:
        nonlocal entries
        entries += 1
        if entries >= SUPERBLOCK_THRESHOLD and ops[start] is lazy:
            if _entry_first(cc, lambda padded: _build_entry(runs, padded)):
                # The entry's block, hot by now too, is left to the other calls as well: not
                # compiled unless they run it often (a compilation costs about 1 ms).
                entries = runs[0].count = 0
                return first(f)
            op = ops[start] = build_superblock(runs) or runs[0].compiled()
            return op(f)
        return first(f)

    return lazy


def _build_entry(runs: list[_Run], padded: bool) -> Any:
    """The compiled entry of the superblock of ``runs``, or of the entry's block."""
    if _superblock_runs(runs) is not None:
        return build_superblock_entry(runs, padded)
    run = runs[0]
    return run.builder.build_entry(run.fallthrough, run.ended, padded)


def block_fault_index(exc: BaseException, op: Any, owners: dict[int, int], default: int) -> int:
    """The index of the instruction of a block op that raised ``exc``."""
    code = op.__code__
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code:
            return owners.get(tb.tb_lineno, default)
        tb = tb.tb_next
    return default


_BUILDER_NAMES.update(
    zip(_ENTRY_NAMES, (Frame, sys._getframe, resume_after_exception, _entry_fault), strict=True)
)
