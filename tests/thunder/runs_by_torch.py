"""For tests of programs thunder cannot compile as one program but torch runs: such a call runs
split (``torch.compile`` with thunder's backend) or, where that could not keep torch's process
state as eager does, eagerly; either way with a warning and the reason in
``thunder.compile_stats``, never refused."""

from __future__ import annotations

import re
import warnings
from typing import Any

import thunder


def call_split(jfn: Any, *args: Any, match: str, **kwargs: Any) -> Any:
    """``jfn(*args, **kwargs)`` (a ``thunder.jit`` function), asserted to run split for a reason
    matching ``match`` (a regular expression) and never eagerly; returns its result."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = jfn(*args, **kwargs)
    stats = thunder.compile_stats(jfn)
    assert stats.split_calls >= 1, f"did not run split: {[str(w.message) for w in caught]}"
    assert stats.eager_fallbacks == 0, stats.last_eager_reason
    assert re.search(match, stats.last_split_reason or ""), stats.last_split_reason
    return out


def call_eagerly(jfn: Any, *args: Any, match: str, **kwargs: Any) -> Any:
    """``jfn(*args, **kwargs)``, asserted to run eagerly (the whole call, with a warning) for a
    reason matching ``match``; returns its result."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = jfn(*args, **kwargs)
    stats = thunder.compile_stats(jfn)
    assert stats.eager_fallbacks >= 1, f"did not run eagerly: {[str(w.message) for w in caught]}"
    assert re.search(match, stats.last_eager_reason or ""), stats.last_eager_reason
    assert any(re.search(match, str(w.message)) for w in caught)
    return out
