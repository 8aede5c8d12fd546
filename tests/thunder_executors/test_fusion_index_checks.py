"""Index ops join torch.compile fusion regions, which check their indices first: a bad index
raises eager's error (type and message) where inductor would wrap a negative one or raise its
own, and negatives that eager wraps (advanced indexing, ``take``, ``index_put``) still wrap."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder


def _outcome(f: Any, *args: Any) -> Any:
    try:
        return f(*args)
    except Exception as e:  # the error's type and message must be eager's
        return (type(e), str(e))


def _assert_same(expected: Any, got: Any, *, message: bool = True) -> None:
    if isinstance(expected, tuple) and isinstance(expected[0], type):
        assert got == expected if message else got[0] is expected[0], (got, expected)
        return
    assert not (isinstance(got, tuple) and isinstance(got[0], type)), got
    for e, g in zip(expected, got, strict=True):
        torch.testing.assert_close(g, e)


def _fused_symbols(jf: Any) -> str:
    trace = thunder.last_traces(jf)[-1]
    return "\n".join(str(s) for r in trace.fusion_regions for s in r.subsymbols)


def _strict_ops(w: torch.Tensor, idx: torch.Tensor) -> Any:
    # eager rejects negative indices here
    return (
        w.index_select(0, idx) * 2 + 1,
        torch.gather(w, 0, idx[:, None].expand(-1, w.shape[1])) * 2 - 0.5,
        F.embedding(idx, w).abs() + 1,
        torch.zeros_like(w).scatter_add(0, idx[:, None].expand(-1, w.shape[1]), w[:4]) * 3,
    )


def _wrapping_ops(w: torch.Tensor, idx: torch.Tensor) -> Any:
    # eager wraps negative indices here; ``idx - 1`` is computed in the region before its use
    v = w * 2
    return (
        v[idx] + 1,
        torch.take(v, idx) - 1,
        v.index_put((idx - 1,), torch.ones(()), accumulate=True) * 3,
    )


@pytest.mark.parametrize("cache", [None, "symbolic values"])
def test_index_ops_fuse_and_raise_eagers_errors(cache: str | None) -> None:
    kwargs: dict[str, Any] = {"cache": cache} if cache else {}
    jstrict = thunder.jit(_strict_ops, executors=["torchcompile"], **kwargs)
    jwrap = thunder.jit(_wrapping_ops, executors=["torchcompile"], **kwargs)
    for bad in (None, -1, 6, None, -7, None):
        w = torch.randn(6, 5)
        idx = torch.randint(-6, 6, (4,))
        if bad is not None:
            idx[1] = bad
        # Symbolic sizes keep index ops out of regions; without torch_ops among the executors,
        # ``v[idx]`` then runs as its decomposition, whose index_select words the error its way.
        wrapping = _outcome(_wrapping_ops, w, idx), _outcome(jwrap, w, idx)
        _assert_same(*wrapping, message=cache is None)
        strict_idx = idx.abs() if bad is None else idx
        strict_idx = strict_idx.clamp(max=5) if bad is None else strict_idx
        _assert_same(_outcome(_strict_ops, w, strict_idx), _outcome(jstrict, w, strict_idx))
    if cache is None:  # static sizes: the index ops are in the regions
        strict, wrapping = _fused_symbols(jstrict), _fused_symbols(jwrap)
        for name in ("index_select", "gather", "embedding", "scatter_add"):
            assert name in strict, strict
        for name in ("take", "index_put"):
            assert name in wrapping, wrapping


def _lm_step(tok: torch.Tensor, tgt: torch.Tensor, emb: torch.Tensor, w: torch.Tensor) -> Any:
    h = F.embedding(tok, emb)
    logits = (F.gelu(h) * 0.5 + h) @ w.t()
    return F.cross_entropy(logits.view(-1, 10), tgt.view(-1), ignore_index=-1)


@pytest.mark.parametrize("executors", [["torchcompile"], ["torchcompile", "torch_ops"]])
def test_embedding_and_cross_entropy_fuse_whole_with_gradients(executors: list[str]) -> None:
    jf = thunder.jit(_lm_step, executors=executors)
    for bad in (None, None, 10, None, -2):
        emb = torch.randn(10, 8, requires_grad=True)
        w = torch.randn(10, 8, requires_grad=True)
        tok = torch.randint(0, 10, (2, 6))
        tgt = torch.randint(0, 10, (2, 6))
        tgt[0, 2] = -1  # ignored
        if bad is not None:
            tgt[1, 1] = bad
        emb2, w2 = (t.detach().clone().requires_grad_() for t in (emb, w))
        expected, got = _outcome(_lm_step, tok, tgt, emb, w), _outcome(jf, tok, tgt, emb2, w2)
        if bad is not None:  # nll_loss's "Target 10 is out of bounds.", not its gather's error
            _assert_same(expected, got)
            continue
        torch.testing.assert_close(got, expected)
        expected.backward()
        got.backward()
        torch.testing.assert_close(emb2.grad, emb.grad)
        torch.testing.assert_close(w2.grad, w.grad)
    forward = thunder.last_traces(jf)[-1]
    backward = thunder.last_backward_traces(jf)[-1]
    assert len(forward.fusion_regions) == 1, forward
    assert len(backward.fusion_regions) == 1, backward
