"""The compile thread and the caller's thread never import torch's compile stack at once.

torch._dynamo and torch._inductor import each other; a guard tree built on a program's second
call (the guard manager imports torch._dynamo) while the compile thread imported inductor
deadlocked the imports: every region failed with "partially initialized module" and the process
kept the broken modules, so even a later plain torch.compile failed. Only a fresh process shows it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

_PROGRAM = textwrap.dedent(
    """
    import warnings
    import torch
    import thunder
    from thunder_executors.background_compile import wait_for_background_compiles

    seen = []
    warnings.simplefilter("always")
    warnings.showwarning = lambda m, *a, **k: seen.append(str(m))
    fs = [
        lambda x: (x * 2 + 1).exp(),
        lambda x: (x - 3).tanh() * x,
        lambda x: (x / 3).sin() + x,
        lambda x: x.sigmoid() * 5 - x,
    ]
    jfs = [thunder.compile(f) for f in fs]
    calls = []
    for i in range(5):  # back to back: the second calls build guard trees while regions compile
        for f, jf in zip(fs, jfs):
            x = torch.randn(64)
            calls.append((f, x, jf(x)))
    for f, x, y in calls:
        torch.testing.assert_close(y, f(x))
    assert wait_for_background_compiles(timeout=300)
    for f, jf in zip(fs, jfs):
        x = torch.randn(64)
        torch.testing.assert_close(jf(x), f(x))
    failed = [s for s in seen if "could not compile" in s]
    assert not failed, failed
    y = torch.compile(lambda x: x.sin() + 1)(torch.ones(4))
    torch.testing.assert_close(y, torch.ones(4).sin() + 1)
    print("OK")
    """
)


def test_guard_trees_and_background_compiles_in_a_fresh_process() -> None:
    # The defaults users get: the suite builds guard trees on the first call, before any compile.
    env = {k: v for k, v in os.environ.items() if not k.startswith("THUNDER_")}
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM], capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("OK"), done.stderr[-3000:]
