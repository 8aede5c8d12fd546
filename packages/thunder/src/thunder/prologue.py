"""Generating the prologue trace (unpack, then check) and the epilogue (replayed writes, the
return value) of a cache entry.

The prologue is a ``Trace`` of prologue prims, printed and run as Python: it receives the call's
``args`` and ``kwargs``, unpacks every value the computation reads (by its access path), checks the
guards the traced program relied on, and returns the computation's inputs. What the cache key
already covers (the arguments' structure, types, tensor metadata and, for constant values, their
values) is not checked again. The epilogue is plain generated Python run after the computation.
"""

from __future__ import annotations

import bisect
import builtins
import keyword
import linecache
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import torch

from thunder.access import (
    ARG,
    ATTR,
    CELL,
    ELEMENT,
    FROM_NUMPY,
    GENERIC,
    GLOBAL,
    ITEM,
    KWARG,
    QUERY,
    REFERENT,
    ROOT,
    SIZE,
    Access,
)
from thunder.binding import ExternalRef, Guard, TracedProgram, Write, iter_proxies
from thunder.binding.state import (
    Rebuilt,
    count_shared,
    rebuild,
    restore,
    template_leaves,
)
from thunder.errors import JitError
from thunder.guards import (
    BuiltinReads,
    GenericAbsence,
    Lookups,
    ModuleAbsence,
    ModulesWithoutHooks,
    NotShadowed,
    TensorsMetadata,
    check_builtins,
    check_contiguity,
    check_has_attribute,
    check_is_not,
    check_lacks_generic_attribute,
    check_lacks_item,
    check_lookups,
    check_members,
    check_module_lacks,
    check_no_hooks,
    check_not_shadowed,
    check_strides,
    check_tensors,
    is_plain_module_member,
    module_store,
    unpack_element,
    unpack_from_numpy,
    unpack_generic_attr,
    unpack_module_attr,
    unpack_query,
    unpack_referent,
    unpack_shape,
)
from thunder.lookasides import SymbolicSize
from thunder_ir import (
    BoundSymbol,
    DataDependentError,
    FloatProxy,
    IntegerProxy,
    NumberProxy,
    Proxy,
    PythonCode,
    TensorProxy,
    Trace,
    prims,
    tracectx,
)
from thunder_ir import constraints as C
from thunder_ir.codegen import Printer, keep_source, value_to_python
from thunder_ir.devices import to_torch_device
from thunder_ir.dtypes import to_torch_dtype
from thunder_ir.prims.data import data_checks_of
from thunder_ir.prims.prologue import PROLOGUE_MISSES, GuardFailure
from thunder_ir.proxies import CollectionProxy

__all__ = [
    "GuardFailure",
    "WritesBeforeError",
    "build_epilogue",
    "build_lock_finder",
    "build_prologue",
    "describe_guard_failure",
    "failed_guard",
    "reporting_misses",
]


def _shadows_prologue_name(name: str) -> bool:
    """Whether a local of that name would hide a name the generated prologue uses (a global
    ``torch`` read by the function is unpacked under another name)."""
    return (
        name in ("args", "kwargs", "fn", "prims", "ltorch", "torch", "thunder_guards")
        or name.startswith(("G_", "_obj"))
        or keyword.iskeyword(name)
        or hasattr(builtins, name)
    )


def item_key(access: Access) -> Any:
    """The subscript of an item access as the prologue and epilogue read it. A number read from
    tensor data (``LUT[int(t)]``) is not the prologue's to read: the item is the one at this
    call's number, and the computation checks the number (the index or hash of the number
    recorded that decision)."""
    key = access.key
    return key.value if isinstance(key, NumberProxy) else key


class _PrologueBuilder:
    def __init__(self, program: TracedProgram, nargs: int) -> None:
        self.program = program
        self.nargs = nargs
        self.trace = Trace("prologue")
        self.ctx: dict[str, Any] = {"fn": program.fn}
        self.values: dict[Access, Any] = {}
        self.input_names = {p.name: p for p, _ in program.inputs}
        self.input_at: dict[Access, Proxy] = {}  # the first input found at each path
        for p, a in program.inputs:
            self.input_at.setdefault(a, p)
        self.arg_slots: list[Any] = [None] * nargs
        self.args_unpacked = False
        # Checked in one call each, after the other guards: modules without hooks; the
        # metadata of tensors that are not arguments (proxy, description, tensor).
        self.hookless: dict[Access, Any] = {}
        # object's access -> (its local, the method names it must not hold itself)
        self.unshadowed: dict[Access, tuple[Any, list[str]]] = {}
        # Objects with a __getattribute__ of their own: the names their generic lookup missed.
        self.absent: dict[Access, tuple[Any, type, list[str]]] = {}
        self.tensors: list[tuple[Any, str, torch.Tensor]] = []
        self.objects = program.objects
        self.shapes_done: set[Access] = set()

    def build(self, constraint: C.Expr) -> tuple[Trace, dict[str, Any]]:
        trace = self.trace
        with tracectx(trace):
            args, kwargs = (
                CollectionProxy("args", collection=()),
                CollectionProxy("kwargs", collection={}),
            )
            trace.args = (args, kwargs)
            self.args_proxy, self.kwargs_proxy = args, kwargs
            # Positional arguments first, in one unpack_sequence.
            arg_inputs = [(p, a) for p, a in self.program.inputs if a.kind == ARG]
            used_args = {a.key for _, a in self.program.inputs if a.root.kind == ARG}
            used_args |= {
                g.access.root.key for g in self.program.guards.values() if g.access.root.kind == ARG
            }
            if used_args:
                for i in range(self.nargs):
                    if i in used_args:
                        direct = next((p for p, a in arg_inputs if a.key == i), None)
                        proxy = self._new_proxy(direct, Access(ARG, i))
                        self.arg_slots[i] = proxy
                        self.values[Access(ARG, i)] = proxy
                bsym = prims.unpack_sequence.bind(args, self.nargs, output=tuple(self.arg_slots))
                trace.record(bsym)
            for _, access in self.program.inputs:
                self._unpack(access)
            for access in self.program.symbolic_shapes:
                self._unpack_shape(access)
            for guard in self.program.guards.values():
                if not self.program.is_inserted(guard.access):
                    self._check(guard)
            self._check_batches()
            if constraint != C.Const(True):
                trace.record(_constraint_check(constraint, "guard"))
            result = tuple(self.values[a] for _, a in self.program.inputs)
            trace.record(prims.python_return.bind(result, output=None))
        trace.docstring = (
            "Unpacks what the computation reads and checks what the trace relied on. The arguments' "
            "structure, types, tensor metadata (and constant values) are the cache key, checked "
            "before this runs."
        )
        return trace, self.ctx

    def _new_proxy(self, like: Proxy | None, access: Access) -> Proxy:
        if isinstance(like, TensorProxy):
            return like.replace(name=like.name)
        if isinstance(like, NumberProxy):
            cls = IntegerProxy if isinstance(like, IntegerProxy) else FloatProxy
            return cls(like.name, value=like.value)  # type: ignore[arg-type]
        base = access.short_name(self.program.param_names)
        name = (
            base
            if base.isidentifier() and base not in self.trace.names and base not in self.input_names
            else None
        )
        if name is not None and not _shadows_prologue_name(name):
            return Proxy(name)
        prefix = (base if base.isidentifier() else "o") + "_"
        i = 0
        while f"{prefix}{i}" in self.trace.names or f"{prefix}{i}" in self.input_names:
            i += 1
        return Proxy(f"{prefix}{i}")

    def _global_dict_name(self, module: str) -> str:
        name = "G_" + re.sub(r"[^0-9a-zA-Z_]", "_", module)
        self.ctx[name] = self.program.globals_dicts[module]
        return name

    def _namespace_name(self, namespace: dict[str, Any]) -> str:
        name = "G_" + re.sub(r"[^0-9a-zA-Z_]", "_", namespace["__name__"])
        self.ctx[name] = namespace
        return name

    def _unpack(self, access: Access) -> Any:
        known = self.values.get(access)
        if known is not None:
            return known
        kind = access.kind
        if kind == ROOT:
            value: Any = PythonCode("fn")
            self.values[access] = value
            return value
        like = self.input_at.get(access)
        if kind == SIZE:
            return self._unpack_sizes(access, like)
        out = self._new_proxy(like, access)
        if kind == ARG:  # not unpacked above: an argument only reached through its items
            bsym = prims.unpack_key.bind(self.args_proxy, access.key, output=out)
        elif kind == KWARG:
            bsym = prims.unpack_key.bind(self.kwargs_proxy, access.key, output=out)
        elif kind == GLOBAL:
            module, name = access.key
            globs = PythonCode(self._global_dict_name(module))
            bsym = prims.unpack_global.bind(globs, name, output=out)
        elif kind == QUERY:
            query, query_args = access.key
            bsym = unpack_query.bind(query, *query_args, output=out)
        else:
            assert access.parent is not None
            parent = self._unpack(access.parent)
            if kind == ATTR and self._reads_module_member(access):
                store = module_store(self.objects[access.parent], access.key)
                # The module's __dict__ read once, for all its members (a descriptor call each)
                own = self._unpack(access.parent.attr("__dict__"))
                bsym = unpack_module_attr.bind(parent, access.key, store, own, output=out)
            elif kind == ATTR:
                bsym = prims.unpack_attr.bind(parent, access.key, output=out)
            elif kind == GENERIC:
                bsym = unpack_generic_attr.bind(parent, access.key, output=out)
            elif kind == ITEM:
                bsym = prims.unpack_key.bind(parent, item_key(access), output=out)
            elif kind == ELEMENT:
                bsym = unpack_element.bind(parent, access.key, output=out)
            elif kind == REFERENT:
                bsym = unpack_referent.bind(parent, output=out)
            elif kind == CELL:
                bsym = prims.unpack_cell.bind(parent, access.key[0], output=out)
            elif kind == FROM_NUMPY:
                bsym = unpack_from_numpy.bind(parent, output=out)
            else:  # pragma: no cover
                raise AssertionError(kind)
        self.trace.record(bsym)
        self.values[access] = out
        return out

    def _unpack_sizes(self, access: Access, like: Proxy | None) -> Any:
        assert access.parent is not None
        self._unpack_shape(access.parent)
        return self.values[access]

    def _unpack_shape(self, tensor_access: Access) -> None:
        """A tensor with symbolic sizes: its sizes unpacked and its constant sizes (0 and 1)
        checked, in one step (the cache key holds only its number of dimensions)."""
        if tensor_access in self.shapes_done:
            return
        self.shapes_done.add(tensor_access)
        tensor = self._unpack(tensor_access)
        assert isinstance(tensor, TensorProxy)
        pattern = tuple(s if isinstance(s, int) else None for s in tensor.shape)
        if not pattern:
            return  # a 0-d tensor: nothing to unpack (its number of dimensions is checked)
        dims = [i for i, s in enumerate(tensor.shape) if not isinstance(s, int)]
        sizes = tuple(
            self._new_proxy(cast(IntegerProxy, tensor.shape[i]), Access(SIZE, i, tensor_access))
            for i in dims
        )
        what = tensor_access.describe(self.program.param_names)
        self.trace.record(
            unpack_shape.bind(tensor, pattern, output=sizes).replace(
                header=f"guard: shape of {what}"
            )
        )
        for i, proxy in zip(dims, sizes):
            self.values[Access(SIZE, i, tensor_access)] = proxy

    def _reads_module_member(self, access: Access) -> bool:
        """A parameter, buffer or submodule of a module whose type is fixed (guarded, or the
        jitted module itself): read from the module's dicts, skipping the failed ordinary
        lookup ``nn.Module.__getattr__`` comes after."""
        parent = access.parent
        assert parent is not None
        module = self.objects.get(parent)
        if module is None or not is_plain_module_member(module, access.key):
            return False
        if parent.kind == ROOT or parent.is_argument_leaf():
            return True
        guard = self.program.guards.get(parent)
        return guard is not None and (
            (guard.kind == "type" and guard.expected is type(module))
            or (guard.kind == "is" and guard.expected is module)
        )

    def _check(self, guard: Guard) -> None:
        x = self._unpack(guard.access)
        what = guard.access.describe(self.program.param_names)
        kind, expected = guard.kind, guard.expected
        if kind == "tensor":
            self.tensors.append((x, what, expected))
            return
        if kind == "no_hooks":
            self.hookless[guard.access] = x
            return
        if kind == "not_shadowed":
            self.unshadowed.setdefault(guard.access, (x, []))[1].append(expected)
            return
        if kind == "value":
            bsym = prims.check_value.bind(x, expected, output=None)
        elif kind == "type":
            bsym = prims.check_type.bind(x, expected, output=None)
        elif kind == "is":
            if type(expected) is dict:  # a module's globals (``f.__globals__``), by its name
                expected = PythonCode(self._namespace_name(expected))
            bsym = prims.check_is.bind(x, expected, output=None)
        elif kind == "same_as":
            bsym = prims.check_is.bind(x, self._unpack(expected), output=None)
            what += f" is {expected.describe(self.program.param_names)}"
        elif kind == "members":
            bsym = check_members.bind(x, expected, output=None)
            what += " holds the same objects"
        elif kind == "distinct_from":
            bsym = check_is_not.bind(x, self._unpack(expected), output=None)
            what += f" is not {expected.describe(self.program.param_names)}"
        elif kind == "is_input":
            bsym = prims.check_is.bind(x, self.input_names[expected], output=None)
        elif kind == "has_attr":
            name, present = expected
            module = self.objects.get(guard.access)
            if not present and ModuleAbsence.applies_to(module):
                bsym = check_module_lacks.bind(ModuleAbsence(type(module), name), x, output=None)
            else:
                bsym = check_has_attribute.bind(x, name, present, output=None)
            what += f" has the attribute {name!r}" if present else f" lacks the attribute {name!r}"
        elif kind == "lacks_generic":  # checked together per object (_check_batches)
            self.absent.setdefault(guard.access, (x, expected[0], []))[2].append(expected[1])
            return
        elif kind == "lacks_item":
            bsym = check_lacks_item.bind(x, expected, output=None)
            what += f" has no item {expected!r}"
        elif kind == "keys":
            bsym = prims.check_keys.bind(x, expected, output=None)
            what += " keys"
        elif kind == "len":
            bsym = prims.check_len.bind(x, expected, output=None)
        elif kind == "strides":
            bsym = check_strides.bind(x, expected, output=None)
            what += f" has the strides {expected}"
        elif kind == "contiguity":
            bsym = check_contiguity.bind(x, *expected, output=None)
            what += f" is_contiguous(memory_format={expected[0]}) is {expected[1]}"
        else:  # pragma: no cover
            raise AssertionError(kind)
        self.trace.record(bsym.replace(header=f"guard: {what}"))

    def _check_batches(self) -> None:
        reads = self.program.builtin_reads
        if reads:
            dicts = [PythonCode(self._global_dict_name(module)) for module in reads]
            self.trace.record(
                check_builtins.bind(BuiltinReads(list(reads.items())), *dicts, output=None).replace(
                    header=f"guard: {sum(map(len, reads.values()))} builtins, from {len(reads)} modules"
                )
            )
        lookups = self.program.lookups
        if lookups:
            self.trace.record(
                check_lookups.bind(Lookups(list(lookups)), output=None).replace(
                    header=f"guard: {len(lookups)} methods, module attributes and codes are what "
                    "the program ran"
                )
            )
        for access, (x, cls, missing) in self.absent.items():
            what = access.describe(self.program.param_names)
            self.trace.record(
                check_lacks_generic_attribute.bind(
                    GenericAbsence(cls, missing), x, output=None
                ).replace(header=f"guard: {what} lacks the attributes {', '.join(missing)}")
            )
        # Modules' methods are checked with their hooks (one read of each module's dict), each
        # module for the methods found on its own class.
        module_methods = [
            sorted(self.unshadowed[a][1]) if a in self.unshadowed else [] for a in self.hookless
        ]
        others = [(x, ns) for a, (x, ns) in self.unshadowed.items() if a not in self.hookless]
        if others:
            objs = [x for x, _ in others]
            shadowing = [ns for _, ns in others]
            self.trace.record(
                check_not_shadowed.bind(NotShadowed(shadowing), *objs, output=None).replace(
                    header=f"guard: {sum(map(len, shadowing))} methods are not shadowed by their "
                    "objects' own attributes"
                )
            )
        if self.hookless:
            checker = ModulesWithoutHooks(module_methods)
            found = sorted({n for ns in module_methods for n in ns})
            own = f", nor their own {', '.join(found)}" if found else ""
            self.trace.record(
                check_no_hooks.bind(checker, *self.hookless.values(), output=None).replace(
                    header=f"guard: no hooks on {len(self.hookless)} modules{own}"
                )
            )
        if self.tensors:
            proxies, names, tensors = zip(*self.tensors)
            shapes = [tuple(s if isinstance(s, int) else None for s in p.shape) for p in proxies]
            metadata = TensorsMetadata(names, tensors, shapes)
            self.trace.record(
                check_tensors.bind(metadata, *proxies, output=None).replace(
                    header=f"guard: metadata of {len(tensors)} tensors"
                )
            )


def build_prologue(
    program: TracedProgram, nargs: int, constraint: C.Expr
) -> tuple[Trace, dict[str, Any]]:
    """The prologue trace of a cache entry and the context its printed code needs."""
    return _PrologueBuilder(program, nargs).build(constraint)


def check_late_constraints(prologue: Trace, constraint: C.Expr, program: TracedProgram) -> None:
    """Adds to ``prologue`` what the passes after tracing relied on (an executor baking a
    symbolic size, autodiff comparing sizes): checked on every call like the rest."""
    constraint = _without_data_decisions(constraint, program.trace)
    if constraint == C.Const(True):
        return
    known = {p.name for p, _ in program.inputs}
    unknown = constraint.variables() - known
    if unknown:
        raise JitError(
            f"thunder.jit: compiling relied on {constraint.python()}, which names values the "
            f"prologue cannot read ({', '.join(sorted(unknown))}); please report this"
        )
    body = prologue.bound_symbols  # the last one returns
    body.insert(len(body) - 1, _constraint_check(constraint, "guard (compiling relied on it)"))


def _without_data_decisions(constraint: C.Expr, trace: Trace) -> C.Expr:
    """``constraint`` less its terms on values read from tensor data (a grad rule deciding on a
    pad amount read with ``int(t)``). The prologue cannot read those values: a term the
    computation checks already (the same decision made while tracing) is dropped; any other
    cannot be checked, and the call runs split."""
    terms = constraint.terms if isinstance(constraint, C.And) else (constraint,)
    on_data = [t for t in terms if not t.variables().isdisjoint(trace.data_values)]
    if not on_data:
        return constraint
    checked = data_checks_of(trace.bound_symbols)
    unchecked = [t for t in on_data if t.python() not in checked]
    if unchecked:
        names = set().union(*(t.variables() for t in unchecked)) & set(trace.data_values)
        reads, users = _data_value_sites(trace, names)
        ops = f"compiling {', '.join(users)}" if users else "compiling"
        read = f" ({', '.join(reads)})" if reads else ""
        raise DataDependentError(
            f"{ops} relied on a decision on values read from tensor data{read} that the "
            f"computation does not check: {', '.join(t.python() for t in unchecked)}"
        )
    return C.conjunction(t for t in terms if t not in on_data)


def _data_value_sites(trace: Trace, names: set[str]) -> tuple[list[str], list[str]]:
    """Where the program read the values ``names`` from tensor data, and the ops on tensors
    that use them (as arguments or in their results' sizes), each with the user's file:line:
    what to name in the reason a call runs split."""

    def uses(x: Any) -> bool:
        expr = getattr(x, "expr", None)
        if isinstance(expr, C.Expr) and not expr.variables().isdisjoint(names):
            return True
        return any(uses(s) for s in getattr(x, "shape", ()) if not isinstance(s, int))

    reads: list[str] = []
    direct: list[str] = []  # ops given the values (or sizes made of them) as arguments
    shaped: list[str] = []  # ops on tensors whose sizes are made of them
    for b in trace.bound_symbols:
        outs = b.flat_proxy_outs
        if any(o.name in names for o in outs):
            read = ", ".join(o.name for o in outs if o.name in names)
            reads.append(f"{read} read{b.where()}")
        elif b.location and any(isinstance(o, TensorProxy) for o in outs):
            site = f"{b.sym.name}{b.where()}"
            args = b.flat_proxy_args
            if any(uses(a) for a in args if not isinstance(a, TensorProxy)):
                direct.append(site)
            elif any(uses(a) for a in args) or any(uses(o) for o in outs):
                shaped.append(site)
    users = list(dict.fromkeys(direct or shaped))
    shown = users[:3] + ([f"{len(users) - 3} more"] if len(users) > 3 else [])
    return reads, shown


def _constraint_check(constraint: C.Expr, header: str) -> BoundSymbol:
    """One check of the whole constraint (one evaluation per call); where it fails, its message
    names the conjuncts that do not hold, with the sizes' values."""
    text = constraint.python()
    terms = constraint.terms if isinstance(constraint, C.And) else (constraint,)
    parts = tuple(t.python() for t in terms)
    check = prims.check_constraint.bind(PythonCode(text, C.PYTHON_NAMES), text, parts, output=None)
    shown = text if len(parts) <= 3 else f"{len(parts)} constraints on symbolic values"
    return check.replace(header=f"{header}: {shown}")


def reporting_misses(prologue: Callable[..., Any]) -> Callable[..., Any]:
    """``prologue`` raising GuardFailure where an inlined read finds its path gone
    (``fn.config`` deleted, a key missing: AttributeError, KeyError...)."""

    def run(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return prologue(args, kwargs)
        except PROLOGUE_MISSES as e:
            raise GuardFailure(f"{type(e).__name__}: {e}") from e

    run.__thunder_source__ = getattr(prologue, "__thunder_source__", None)  # type: ignore[attr-defined]
    return run


def describe_guard_failure(exc: GuardFailure) -> str:
    """``exc``'s message with the guard that failed (read from the prologue's source)."""
    header = failed_guard(exc)
    return f"{header}: {exc}" if header else str(exc)


def failed_guard(exc: GuardFailure) -> str:
    """The header of the prologue's guard that raised ``exc`` (what it checks), or ""."""
    tb = exc.__traceback__ if exc.__cause__ is None else exc.__cause__.__traceback__
    header = ""
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename.startswith("<thunder trace prologue"):
            lines = linecache.getlines(code.co_filename)
            i = tb.tb_lineno - 2
            while 0 <= i < len(lines):
                line = lines[i].strip()
                if line.startswith("# guard: "):
                    header = line.removeprefix("# guard: ")
                    break
                if not line.startswith("#"):
                    break
                i -= 1
        tb = tb.tb_next
    return header


# -- epilogue -------------------------------------------------------------------------------------


class _EpilogueWriter:
    def __init__(self, program: TracedProgram, ctx: dict[str, Any]) -> None:
        self.program = program
        self.ctx = ctx
        self.printer = Printer()
        # Objects the writes use, bound to locals at the point of the replay where the program
        # took their path: before write ``i`` (``pending[i]``), then read from the local.
        self.locals: dict[Access, str] = {}
        self.pending: dict[int, list[Access]] = {}
        # Template objects that one statement holds more than once, and their locals.
        self.shared: set[int] = set()
        self.built: dict[int, str] = {}
        self.prelude: list[str] = []
        self.n_built = 0

    def plan_bindings(self, result: Any) -> None:
        """Which object paths get a local, and before which write each is resolved."""
        used: list[Access] = []
        for w in self.program.writes:
            if w.kind in ("attr", "call", "call_kw", "del_attr", "log"):
                used.append(w.target)
            used.extend(_external_refs(w.value))
        used.extend(_external_refs(result))
        for access in dict.fromkeys(used):
            point = self.program.bound_at.get(access)
            if point is not None:
                self.pending.setdefault(point, []).append(access)

    def bindings_before(self, index: int) -> list[str]:
        lines = []
        for access in self.pending.pop(index, ()):
            path = self.path(access)
            name = f"_o{len(self.locals)}"
            self.locals[access] = name
            lines.append(f"{name} = {path}")
        return lines

    def access(self, access: Access) -> str:
        """An object's expression: its local when it has one, else its path."""
        local = self.locals.get(access)
        if local is not None:
            return local
        return self.path(access)

    def path(self, access: Access) -> str:
        """The expression that reads ``access`` now (and, for a global or cell, stores it)."""
        kind = access.kind
        if kind == ROOT:
            return "fn"
        if kind == ARG:
            return f"args[{access.key}]"
        if kind == KWARG:
            return f"kwargs[{access.key!r}]"
        if kind == GLOBAL:
            module, name = access.key
            gname = "G_" + re.sub(r"[^0-9a-zA-Z_]", "_", module)
            self.ctx[gname] = self.program.globals_dicts[module]
            return f"{gname}[{name!r}]"
        if kind == QUERY:
            query, query_args = access.key
            qname = f"_query_{query.__name__}"
            self.ctx[qname] = query
            return f"{qname}({', '.join(value_to_python(a, self.printer) for a in query_args)})"
        assert access.parent is not None
        parent = self.access(access.parent)
        if kind == ATTR:
            return (
                f"{parent}.{access.key}"
                if str(access.key).isidentifier()
                else f"getattr({parent}, {access.key!r})"
            )
        if kind == GENERIC:
            return f"object.__getattribute__({parent}, {access.key!r})"
        if kind == ITEM:
            return f"{parent}[{value_to_python(item_key(access), self.printer)}]"
        if kind == ELEMENT:
            return f"tuple({parent})[{access.key}]"
        if kind == REFERENT:
            return f"{parent}()"
        if kind == CELL:
            return f"{parent}.__closure__[{access.key[0]}].cell_contents"
        if kind == FROM_NUMPY:
            self.ctx["torch"] = torch
            return f"torch.from_numpy({parent})"
        raise AssertionError(kind)  # pragma: no cover

    def statement(self, template: Any) -> tuple[list[str], str]:
        """``template``'s expression, and the lines before it that build each list, dict or
        object it holds more than once (one object, as the program had it)."""
        counts: dict[int, int] = {}
        count_shared(template, counts)
        self.shared = {i for i, n in counts.items() if n > 1}
        self.built = {}
        self.prelude = []
        return self.prelude, self.value(template)

    def value(self, template: Any) -> str:
        if id(template) in self.shared:
            name = self.built.get(id(template))
            if name is None:
                expr = self.build(template)
                name = self.built[id(template)] = f"_v{self.n_built}"
                self.n_built += 1
                self.prelude.append(f"{name} = {expr}")
            return name
        return self.build(template)

    def build(self, template: Any) -> str:
        if isinstance(template, ExternalRef):
            return self.access(template.access)
        if isinstance(template, Proxy):
            return template.name
        if isinstance(template, Rebuilt) and template.restores:
            self.ctx["_restore"] = restore
            cls, base = (self.printer.opaque(c) for c in template.constants)
            state, items = (self.value(p) for p in template.parts)
            return f"_restore({cls}, {base}, {state}, {items})"
        if isinstance(template, Rebuilt):
            self.ctx["_rebuild"] = rebuild
            func = self.printer.opaque(template.func)
            constants = "".join(self.printer.opaque(c) + ", " for c in template.constants)
            parts = ", ".join(self.value(p) for p in template.parts)
            return f"_rebuild({func}, ({constants}), {parts})"
        t = type(template)
        if t is SymbolicSize:
            self.ctx["torch"] = torch
            return f"torch.Size(({''.join(self.value(v) + ', ' for v in template)}))"
        if t is tuple:
            inner = ", ".join(self.value(v) for v in template)
            return f"({inner},)" if len(template) == 1 else f"({inner})"
        if isinstance(template, tuple) and hasattr(t, "n_fields"):  # torch.return_types
            inner = "".join(self.value(v) + ", " for v in template)
            return f"{self.printer.opaque(t)}(({inner}))"
        if t is list:
            return "[" + ", ".join(self.value(v) for v in template) + "]"
        if t is dict:
            return (
                "{"
                + ", ".join(
                    f"{value_to_python(k, self.printer)}: {self.value(v)}"
                    for k, v in template.items()
                )
                + "}"
            )
        return value_to_python(template, self.printer)

    def write(self, w: Write) -> list[str]:
        if w.kind in ("del_global", "del_cell"):
            return [f"del {self.path(w.target)}"]
        if w.kind == "del_attr":
            return [f"delattr({self.access(w.target)}, {w.name!r})"]
        lines, value = self.statement(w.value)
        if w.kind in ("global", "cell"):
            return [*lines, f"{self.path(w.target)} = {value}"]
        if w.kind == "attr":
            obj = self.access(w.target)
            return [*lines, f"setattr({obj}, {w.name!r}, {value})"]
        if w.kind == "warn":  # (WarningReplay, message, source)
            return [*lines, f"_w = {value}", "_w[0](_w[1], _w[2])"]
        if w.kind == "log":  # ((args, kwargs), LogReplay): logged from the user's line
            obj = self.access(w.target)
            return [*lines, f"_log = {value}", f"_log[1]({obj}, *_log[0])"]
        if w.kind == "call_kw":
            obj = self.access(w.target)
            return [*lines, f"_log = {value}", f"{obj}.{w.name}(*_log[0], **_log[1])"]
        return [*lines, f"{self.access(w.target)}.{w.name}(*{value})"]


def build_epilogue(program: TracedProgram) -> tuple[str, Callable[..., Any]]:
    """Python that replays the program's writes and builds its return value from the
    computation's outputs (``program.epilogue_outputs``, in that order); returns its source and
    the compiled function."""
    result, outputs = program.template, program.epilogue_outputs or ()
    ctx: dict[str, Any] = {"fn": program.fn}
    writer = _EpilogueWriter(program, ctx)
    lines = ["def epilogue(args, kwargs, outs):"]
    if outputs:
        names = ", ".join(p.name for p in outputs)
        lines.append(f"  ({names},) = outs")
    writer.plan_bindings(result)
    for i, w in enumerate(program.writes):
        lines.extend("  " + line for line in writer.bindings_before(i))
        lines.extend("  " + line for line in writer.write(w))
    for index in sorted(writer.pending):
        lines.extend("  " + line for line in writer.bindings_before(index))
    prelude, value = writer.statement(result)
    lines.extend("  " + line for line in prelude)
    lines.append(f"  return {value}")
    source, fn = _compiled(lines, ctx, writer, f"<thunder epilogue {id(program):x}>")
    return source, fn


def build_lock_finder(program: TracedProgram) -> Callable[..., tuple[Any, ...]]:
    """Python that reads, as a call starts, the objects at the paths of the locks the program
    takes (``program.locks``, in that order)."""
    ctx: dict[str, Any] = {"fn": program.fn}
    writer = _EpilogueWriter(program, ctx)
    found = "".join(f"{writer.path(lock.access)}, " for lock in program.locks)
    lines = ["def find_locks(args, kwargs):", f"  return ({found})"]
    _, find = _compiled(lines, ctx, writer, f"<thunder locks {id(program):x}>")
    return cast(Callable[..., tuple[Any, ...]], find)


def _compiled(
    lines: list[str], ctx: dict[str, Any], writer: _EpilogueWriter, filename: str
) -> tuple[str, Callable[..., Any]]:
    """The function ``lines`` define (one ``def``), compiled under ``filename`` (kept in
    linecache: tracebacks show its lines), and its source."""
    source = "\n".join(lines) + "\n"
    ctx.update(writer.printer.ctx)
    globs: dict[str, Any] = {"__builtins__": __builtins__, **ctx}
    exec(compile(source, filename, "exec"), globs)
    name = lines[0][len("def ") : lines[0].index("(")]
    keep_source(globs[name], filename, source)
    return source, globs[name]


@dataclass(frozen=True)
class WritesBeforeError:
    """The epilogue's writes a call made before an op that raised at run time, where the
    computation wrote inputs in place before it (eager's state after its error holds them;
    the call cannot run again eagerly). ``positions``: how many recorded bound symbols came
    before each write; ``recorded``: those bound symbols, in the order recorded;
    ``outputs``: the epilogue's inputs by name; ``needs``: the names each write reads;
    ``replay(args, kwargs, outs, count)`` makes the first ``count`` writes."""

    positions: tuple[int, ...]
    recorded: tuple[BoundSymbol, ...]
    outputs: tuple[str, ...]
    needs: tuple[frozenset[str], ...]
    replay: Callable[..., None]

    def apply(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        defined: Iterable[str],
        read: Iterable[str],
        values: Mapping[str, Any],
    ) -> None:
        """The writes before the failing op, which defines the names ``defined`` (reads
        ``read``), with the values the computation had (``values``, by name); none where one
        they need is not there."""
        recorded_at = _recorded_at(self.recorded)
        at = [recorded_at[n] for n in defined if n in recorded_at]
        if at:
            failed_at = min(at)
        else:  # (a check of values defines nothing: it comes after what it reads)
            at = [recorded_at[n] for n in read if n in recorded_at]
            if not at:
                return
            failed_at = max(at)
        count = bisect.bisect_right(self.positions, failed_at)
        if any(n not in values for need in self.needs[:count] for n in need):
            return
        if count:
            self.replay(args, kwargs, tuple(values.get(n) for n in self.outputs), count)


def _recorded_at(recorded: tuple[BoundSymbol, ...]) -> dict[str, int]:
    """For each name the bound symbols define (in their decompositions too), the index of the
    top-level one that defines it."""
    at: dict[str, int] = {}

    def note(b: BoundSymbol, i: int) -> None:
        for p in b.flat_proxy_outs:
            at.setdefault(p.name, i)
        for sub in b.subsymbols:
            note(sub, i)

    for i, b in enumerate(recorded):
        note(b, i)
    return at


def build_writes_before_error(program: TracedProgram) -> WritesBeforeError | None:
    """The error path's replay of ``program``'s writes (``WritesBeforeError``); None where it
    writes nothing outside."""
    if not program.writes or len(program.write_positions) != len(program.writes):
        return None
    outputs = program.epilogue_outputs or ()
    ctx: dict[str, Any] = {"fn": program.fn}
    writer = _EpilogueWriter(program, ctx)
    lines = ["def writes_before_error(args, kwargs, outs, count):"]
    if outputs:
        lines.append(f"  ({', '.join(p.name for p in outputs)},) = outs")
    writer.plan_bindings(None)
    for i, w in enumerate(program.writes):
        lines.append(f"  if count <= {i}:")
        lines.append("    return")
        lines.extend("  " + line for line in writer.bindings_before(i))
        lines.extend("  " + line for line in writer.write(w))
    _, replay = _compiled(lines, ctx, writer, f"<thunder epilogue before an error {id(program):x}>")
    return WritesBeforeError(
        program.write_positions,
        program.recorded,
        tuple(p.name for p in outputs),
        tuple(frozenset(p.name for p in iter_proxies(w.value)) for w in program.writes),
        replay,
    )


def _external_refs(template: Any) -> list[Access]:
    return [x.access for x in template_leaves(template) if isinstance(x, ExternalRef)]


_ = (to_torch_device, to_torch_dtype)
