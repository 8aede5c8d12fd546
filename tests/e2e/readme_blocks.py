"""The ``python`` blocks of the README, each a script run as a user runs it: in a fresh
interpreter, from a temporary directory (so ``import thunder`` finds the installed packages, not
the repository's folders), with no ``PYTHONPATH``. Standard library only: ``.ci/install_check``
runs it with the python of a venv that holds nothing but torch and the built wheels::

    python tests/e2e/readme_blocks.py [--python EXE] [README]

exits non-zero when a block fails. A block whose first line is ``# not run: <why>`` is shown in
the README but not run; keep that for what needs several processes."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
NOT_RUN = "# not run:"


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, 1-based
    code: str

    @property
    def not_run_reason(self) -> str | None:
        first = self.code.split("\n", 1)[0]
        return first[len(NOT_RUN) :].strip() if first.startswith(NOT_RUN) else None


def python_blocks(text: str) -> list[Block]:
    return [
        Block(text.count("\n", 0, m.start()) + 1, m.group(1))
        for m in re.finditer(r"^```python\n(.*?)^```$", text, flags=re.M | re.S)
    ]


def run_blocks(blocks: list[Block], python: str, timeout: float = 600) -> list[str]:
    """Runs the blocks at once (most of their time is importing torch), each in its own
    temporary directory; returns a message per failed block."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    with tempfile.TemporaryDirectory(prefix="readme-blocks-") as tmp:
        running = []
        for block in blocks:
            if block.not_run_reason is not None:
                continue
            where = Path(tmp) / f"line{block.line}"
            where.mkdir()
            (where / "block.py").write_text(block.code)
            proc = subprocess.Popen(
                [python, "block.py"],
                cwd=where,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            running.append((block, proc))
        failures = []
        for block, proc in running:
            try:
                out, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
                out += f"\n(killed after {timeout} s)"
            if proc.returncode != 0:
                failures.append(f"--- the block at README line {block.line} failed:\n{out[-4000:]}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("readme", nargs="?", default=str(README))
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    blocks = python_blocks(Path(args.readme).read_text())
    failures = run_blocks(blocks, args.python)
    skipped = sum(b.not_run_reason is not None for b in blocks)
    for failure in failures:
        print(failure)
    print(
        f"README: {len(blocks) - skipped - len(failures)} passed, {len(failures)} failed"
        + (f", {skipped} not run" if skipped else "")
    )
    return 1 if failures or not blocks else 0


if __name__ == "__main__":
    sys.exit(main())
