"""Access paths: how the prologue finds, on every call, a value the traced program read.

An :class:`Access` is one step (an argument, the jitted callable itself, a global, a closure cell,
an attribute, an item) with a link to the step it was taken from. Paths are hashable, so a value
read twice is unpacked and guarded once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from thunder_ir import NumberProxy

__all__ = [
    "ARG",
    "ATTR",
    "CELL",
    "ELEMENT",
    "GENERIC",
    "GLOBAL",
    "ITEM",
    "KWARG",
    "QUERY",
    "REFERENT",
    "ROOT",
    "SIZE",
    "Access",
    "query_name",
]

ARG = "arg"  # key: position in *args
KWARG = "kwarg"  # key: keyword name
ROOT = "root"  # the jitted callable itself
GLOBAL = "global"  # key: (module name, global name)
CELL = "cell"  # key: (index in __closure__, free variable name); parent: the function
ATTR = "attr"  # key: attribute name
GENERIC = "generic"  # key: attribute name, read by object.__getattribute__ (see binding.reads)
ITEM = "item"  # key: the subscript
ELEMENT = "element"  # key: a position in the iteration order of a set (``tuple(s)[key]``)
REFERENT = "referent"  # key: None; the object the weakref.ref ``parent`` refers to (``parent()``)
FROM_NUMPY = "from_numpy"  # key: None; the tensor torch.from_numpy(parent) makes (shares memory)
SIZE = "size"  # key: a dimension; parent: a tensor with symbolic sizes (cache="symbolic values")
# key: (torch query, its arguments); what ``query(*args)`` answers about the ambient state of the
# call (``torch._C._len_torch_dispatch_stack()``), asked again by the prologue on every call
QUERY = "query"


def query_name(query: Any) -> str:
    """``torch._C._len_torch_dispatch_stack``: a query's dotted name."""
    module = getattr(query, "__module__", None) or ""
    return f"{module}.{query.__name__}" if module else str(query.__name__)


_NOT_IDENT = re.compile(r"[^0-9a-zA-Z_]+")


def _concrete_key(key: Any) -> Any:
    """A symbolic number used as a key (``cache[x.shape[1]]``) as its value: paths are compared
    and hashed by their keys (a proxy's ``==`` records an op), and the lookup held for that
    value only (a proxy's hash fixes it: the prologue checks the size is that value)."""
    if isinstance(key, NumberProxy):
        return key.fixed_value()
    if type(key) is tuple and any(isinstance(k, NumberProxy) for k in key):
        return tuple(_concrete_key(k) for k in key)
    return key


@dataclass(frozen=True, slots=True)
class Access:
    """One step of an access path."""

    kind: str
    key: Any
    parent: Access | None = None
    # Tells apart the objects one path holds at different times of a call (a global rebound to
    # a container the program made): the epilogue binds each at its own point.
    version: int = 0

    def attr(self, name: str) -> Access:
        return Access(ATTR, name, self)

    def generic(self, name: str) -> Access:
        return Access(GENERIC, name, self)

    def item(self, key: Any) -> Access:
        return Access(ITEM, _concrete_key(key), self)

    @property
    def root(self) -> Access:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def is_argument_leaf(self) -> bool:
        """Whether the value is an argument or an item of argument containers (the cache key
        covers those)."""
        node: Access | None = self
        while node is not None and node.kind == ITEM:
            node = node.parent
        return node is not None and node.kind in (ARG, KWARG)

    def describe(self, param_names: tuple[str, ...] = ()) -> str:
        """Python-like text: ``args[0].weight``, ``mymodule.CONFIG['k']``, ``fn.<closure>.x``."""
        k = self.kind
        if k == ARG:
            i = self.key
            return param_names[i] if i < len(param_names) else f"args[{i}]"
        if k == KWARG:
            return str(self.key)
        if k == ROOT:
            return "fn"
        if k == GLOBAL:
            module, name = self.key
            return f"{module}.{name}" if module else str(name)
        if k == QUERY:
            query, args = self.key
            return f"{query_name(query)}({', '.join(map(repr, args))})"
        parent = self.parent.describe(param_names) if self.parent is not None else "?"
        if k == CELL:
            return f"{parent}.<closure>.{self.key[1]}"
        if k in (ATTR, GENERIC):
            return f"{parent}.{self.key}"
        if k == FROM_NUMPY:
            return f"torch.from_numpy({parent})"
        if k == SIZE:
            return f"{parent}.shape[{self.key}]"
        if k == ELEMENT:
            return f"tuple({parent})[{self.key}]"
        if k == REFERENT:
            return f"{parent}()"
        return f"{parent}[{self.key!r}]"

    def short_name(self, param_names: tuple[str, ...] = ()) -> str:
        """A readable identifier for the value (``transformer_h_0_attn_weight``)."""
        parts: list[str] = []
        node: Access | None = self
        while node is not None:
            k = node.kind
            if k == ARG:
                i = node.key
                parts.append(param_names[i] if i < len(param_names) else f"arg{i}")
            elif k == KWARG:
                parts.append(str(node.key))
            elif k in (GLOBAL, CELL):
                parts.append(str(node.key[1]))
            elif k in (ATTR, GENERIC, ITEM, ELEMENT):
                parts.append(str(node.key))
            elif k == FROM_NUMPY:
                parts.append("tensor")
            elif k == SIZE:
                parts.append(f"size{node.key}")
            elif k == QUERY:
                parts.append("_".join((node.key[0].__name__, *map(str, node.key[1]))))
            node = node.parent
        parts.reverse()
        if len(parts) > 1 and self.root.kind == ARG and parts[0] in ("self", "module", "model"):
            parts = parts[1:]
        name = _NOT_IDENT.sub("_", "_".join(p for p in parts if p)).strip("_").lower()
        if not name or name[0].isdigit():
            name = "v_" + name
        return name[:60]
