"""The examples of docs/DESIGN.md run as written: every ``python`` block is a script, run in a
fresh interpreter (the examples register ops, grad rules and executors, which are process-wide,
and a new op must be declared before the first compilation of the process). A block that starts
with ``# continues the example above`` runs appended to the one before it. The blocks assert their
results against eager PyTorch themselves."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "DESIGN.md"
CONTINUES = "# continues the example above"


def example_scripts() -> list[tuple[str, str]]:
    """(title, script) per example: the heading above its first block, and its code."""
    text = DESIGN.read_text()
    scripts: list[tuple[str, str]] = []
    for match in re.finditer(r"^```python\n(.*?)^```$", text, flags=re.M | re.S):
        code = match.group(1)
        if code.startswith(CONTINUES):
            assert scripts, f"{DESIGN}: the first python block cannot continue another"
            title, before = scripts[-1]
            scripts[-1] = (title, before + "\n" + code)
            continue
        headings = re.findall(r"^#+ (.+)$", text[: match.start()], flags=re.M)
        scripts.append((headings[-1] if headings else "top", code))
    return scripts


SCRIPTS = example_scripts()


def test_the_design_document_has_its_examples() -> None:
    titles = [t for t, _ in SCRIPTS]
    for expected in ("A new op", "An executor", "A transform", "A lookaside"):
        assert expected in titles, titles
    assert any(CONTINUES in s for _, s in SCRIPTS)  # the grad rule builds on the new op


@pytest.mark.slow
def test_every_example_runs(tmp_path: Path) -> None:
    # All at once, each in its own interpreter: most of the time is importing torch.
    running = []
    for i, (title, script) in enumerate(SCRIPTS):
        path = tmp_path / f"example_{i}.py"
        path.write_text(script)
        proc = subprocess.Popen(
            [sys.executable, str(path)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        running.append((title, proc))
    failures = []
    for title, proc in running:
        out, _ = proc.communicate(timeout=300)
        if proc.returncode != 0:
            failures.append(f"--- example under {title!r} failed:\n{out[-3000:]}")
    assert not failures, "\n".join(failures)
