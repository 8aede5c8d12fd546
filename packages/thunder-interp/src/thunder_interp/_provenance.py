"""Provenance records: where a value seen by the interpreted program came from.

With ``interpret(fn, provenance=True)`` the interpreter keeps a side table (per call, keyed by
object identity, holding a reference to each recorded value so that identities are not reused)
that maps values to a :class:`Provenance`. Only *sources* are recorded: arguments of the
interpreted function, globals, closure cells, constants, results of opaque calls, and attributes
or items taken from a value that itself has a record. Values computed by the program (``a + b``)
have no record.

Values that CPython shares between unrelated places (small ints, interned strings, ``None``)
keep the first record they were given.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Provenance", "ProvenanceKind"]


class ProvenanceKind(enum.Enum):
    """How a value was obtained."""

    ARGUMENT = "argument"
    ITEM = "item"
    ATTRIBUTE = "attribute"
    GLOBAL = "global"
    CLOSURE_CELL = "closure_cell"
    CONSTANT = "constant"
    OPAQUE_CALL = "opaque_call"


@dataclass(eq=True, slots=True)
class Provenance:
    """One step of an access path; ``parent`` links to the value this one was taken from.

    Records are shared and must be treated as immutable.

    - ``ARGUMENT``: ``index`` is the position (``None`` for a keyword argument), ``name`` the
      parameter or keyword name.
    - ``ITEM``: ``index`` is the key, ``parent`` the container.
    - ``ATTRIBUTE``: ``name`` is the attribute, ``parent`` the object.
    - ``GLOBAL``: ``name`` is the global, ``module`` the ``__name__`` of its module.
    - ``CLOSURE_CELL``: ``name`` is the free variable, ``function`` the qualified name of the
      function whose code reads it.
    - ``CONSTANT``: ``index`` is the constant itself.
    - ``OPAQUE_CALL``: ``function`` is the qualified name of the callable.
    """

    kind: ProvenanceKind
    name: str | None = None
    index: object = None
    parent: Provenance | None = None
    module: str | None = None
    function: str | None = None

    def path(self) -> str:
        """The access path as Python-like text, e.g. ``args[0].weight`` or ``mymod.CONFIG['k']``."""
        kind = self.kind
        if kind is ProvenanceKind.ARGUMENT:
            if self.index is None:
                return f"kwargs[{self.name!r}]"
            return f"args[{self.index}]"
        if kind is ProvenanceKind.ITEM:
            parent = self.parent.path() if self.parent is not None else "<?>"
            return f"{parent}[{self.index!r}]"
        if kind is ProvenanceKind.ATTRIBUTE:
            parent = self.parent.path() if self.parent is not None else "<?>"
            return f"{parent}.{self.name}"
        if kind is ProvenanceKind.GLOBAL:
            return f"{self.module}.{self.name}" if self.module else str(self.name)
        if kind is ProvenanceKind.CLOSURE_CELL:
            return f"{self.function}.<closure>.{self.name}"
        if kind is ProvenanceKind.CONSTANT:
            return repr(self.index)
        return f"{self.function}(...)"

    def root(self) -> Provenance:
        """The first step of the path (an argument, global, cell, constant or opaque call)."""
        node = self
        while node.parent is not None:
            node = node.parent
        return node
