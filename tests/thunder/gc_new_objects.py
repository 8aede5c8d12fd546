"""Garbage collections that walk only the objects a test makes.

Tests of what a program keeps alive call ``gc.collect()`` after their calls; late in a suite run
each of those walks every object of the process (millions: imported modules, earlier tests'
caches), seconds apiece. Frozen for the test (``gc.freeze``), that heap stays out of every
collection; what the test makes (its programs, arguments, cycles) is collected as before, so
what a test finds alive is unchanged. (Only a garbage cycle through an object made before the
test would go uncollected until ``gc.unfreeze``; such an object is no test's subject.)"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def only_new_objects_collected() -> Iterator[None]:
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
