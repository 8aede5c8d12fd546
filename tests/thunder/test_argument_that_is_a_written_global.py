"""An argument container that is also a global the program writes: the program compiled for
that call serves it (it guarded the two paths apart where they were one object, and the call
raised "rejects them"), also where the program rebinds the global to a list it made."""

import pytest
import torch

import thunder


def _module(source: str) -> dict:
    ns: dict = {}
    exec(compile(source, "<written_global>", "exec"), ns)
    return ns


POP_APPEND = """
import torch
G_L = [1, 2.0]
def f(x, lst):
    if G_L:
        G_L.pop()
    G_L.append(2)
    return x * len(G_L) + len(lst)
"""
APPEND_REBIND = """
import torch
G_L = [1, 2.0]
def f(x, lst):
    global G_L
    G_L.append(3)
    G_L = G_L + [len(lst)]
    return x * len(G_L)
"""


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
@pytest.mark.parametrize("source", [POP_APPEND, APPEND_REBIND], ids=["pop_append", "rebind"])
def test_argument_that_is_the_written_global(source, cache):
    eager_ns, jit_ns = _module(source), _module(source)
    jf = thunder.jit(jit_ns["f"], cache=cache)
    for which in ("fresh", "fresh", "global", "fresh", "global", "global"):
        x = torch.randn(2)
        args_e = eager_ns["G_L"] if which == "global" else [0, 1.0]
        args_j = jit_ns["G_L"] if which == "global" else [0, 1.0]
        expected = eager_ns["f"](x, args_e)
        got = jf(x, args_j)
        torch.testing.assert_close(got, expected)
        assert jit_ns["G_L"] == eager_ns["G_L"]
        assert args_j == args_e
        assert (args_j is jit_ns["G_L"]) == (args_e is eager_ns["G_L"])
    assert thunder.compile_stats(jf).eager_fallbacks == 0
