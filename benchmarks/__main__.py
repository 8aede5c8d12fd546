"""Runs the benchmarks: ``python -m benchmarks [name ...] [--option [value] ...]``.

Every module of this folder that defines ``main()`` is a benchmark (``executors``,
``interpreter``, ...); with no names, all of them run but those that set ``RUN_BY_DEFAULT =
False`` (``gpu_check``, which needs a CUDA device). Options are passed on to each one.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

HERE = Path(__file__).parent


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules([str(HERE)]) if not m.name.startswith("_"))


def main() -> None:
    args = sys.argv[1:]
    # Leading names pick benchmarks; everything from the first option on is passed to them.
    first_option = next((i for i, a in enumerate(args) if a.startswith("-")), len(args))
    names, options = args[:first_option], args[first_option:]
    unknown = set(names) - set(available())
    if unknown:
        sys.exit(f"unknown benchmark(s) {sorted(unknown)}; available: {available()}")
    sys.path.insert(0, str(HERE))
    for name in names or available():
        module = importlib.import_module(name)
        if not hasattr(module, "main") or (
            not names and not getattr(module, "RUN_BY_DEFAULT", True)
        ):
            continue
        print(f"== {name} ==")
        sys.argv = [str(HERE / f"{name}.py"), *options]
        module.main()
        print()


if __name__ == "__main__":
    main()
