"""Shared pytest configuration. Must not import torch: the interpreter tests run without it."""

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Test folders hold helper modules (conformance, opinfos, strategies) that their tests import by
# name; tests are collected in importlib mode, so the folders go on the path here. Helper module
# names are unique across folders.
_here = Path(__file__).parent
for _folder in sorted(
    p for p in _here.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
):
    sys.path.insert(0, str(_folder))

# Every call a prologue's guard tree accepts is checked against the Python prologue (which must
# accept it and read the same objects), and the tree is built from the first accepted call, so
# that the suite's guard tests run through it.
os.environ.setdefault("THUNDER_VERIFY_GUARD_TREE", "1")
# Parallel runs (pytest-xdist, one worker per CPU): one torch thread per worker, set before any
# test imports torch, so that workers do not compete for the same cores.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("THUNDER_GUARD_TREE_AFTER", "1")


def pytest_configure(config: pytest.Config) -> None:
    # A failure inside thunder's compiler runs the call eagerly for users (InternalErrorWarning);
    # in the suite it is an error, so that no such bug hides behind eager's result. (The
    # interpreter's environments have no thunder.)
    try:
        import thunder.errors  # noqa: F401
    except ImportError:
        return
    config.addinivalue_line("filterwarnings", "error::thunder.errors.InternalErrorWarning")


settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=60,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(autouse=True)
def _backend_flags_settable_as_in_a_users_process() -> None:
    """torch's OpInfo test utilities freeze the ``torch.backends`` flags when they are imported
    (``disable_global_flags``); a user's process never does, and tests that set a flag as users
    do (``torch.backends.mkldnn.enabled = False``) must not depend on which tests ran first in
    their worker."""
    backends = sys.modules.get("torch.backends")  # (not imported by the interpreter tests)
    if backends is not None and backends.flags_frozen():
        backends.flags_frozen.__globals__["__allow_nonbracketed_mutation_flag"] = True


@pytest.fixture(autouse=True)
def _background_compiles_finish_in_their_test() -> Iterator[None]:
    """A fusion region compiling in the background (thunder.compile) finishes within the test
    that started it: its warnings land there, and the next test gets the machine to itself."""
    yield
    compiles = sys.modules.get("thunder_executors.background_compile")
    if compiles is not None:
        assert compiles.wait_for_background_compiles(timeout=900), "a background compile hung"
