"""Every opcode of the running Python has a handler or is explicitly listed as unsupported."""

from __future__ import annotations

import dis

from thunder_interp import DEFAULT_OPCODE_TABLE, UNSUPPORTED_OPCODES, unsupported_opcodes


def test_every_opcode_has_a_handler_or_is_listed_unsupported() -> None:
    missing = [
        name
        for name in dis.opmap
        if name not in DEFAULT_OPCODE_TABLE and name not in unsupported_opcodes()
    ]
    assert missing == []


def test_unsupported_list_names_only_real_opcodes() -> None:
    assert set(UNSUPPORTED_OPCODES) <= set(dis.opmap)
    assert set(unsupported_opcodes()) <= set(dis.opmap)


def test_handler_table_names_only_real_opcodes() -> None:
    assert set(DEFAULT_OPCODE_TABLE) <= set(dis.opmap)


def test_unsupported_opcodes_say_why() -> None:
    for name, reason in unsupported_opcodes().items():
        assert reason, name


def test_every_intrinsic_has_a_handler() -> None:
    # CALL_INTRINSIC_1/2 (3.12+) select their operation by argument; each needs an implementation.
    from thunder_interp.ops.intrinsics import INTRINSIC_1_HANDLERS, INTRINSIC_2_HANDLERS

    missing = [
        name
        for descs, handlers in (
            (getattr(dis, "_intrinsic_1_descs", []), INTRINSIC_1_HANDLERS),
            (getattr(dis, "_intrinsic_2_descs", []), INTRINSIC_2_HANDLERS),
        )
        for name in descs
        if not name.endswith("_INVALID") and name not in handlers
    ]
    assert missing == []
