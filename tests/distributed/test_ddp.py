"""thunder.distributed.ddp on 2 CPU processes (gloo): training equals one process on the global
batch, gradient accumulation with no_sync equals one large batch, a failing rank fails all."""

from __future__ import annotations

from typing import Any

import _workers
import pytest
import torch
import torch.distributed as dist
from _spawn import WORLD_SIZE, spawn
from _spawn import ok as _ok

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed unavailable")


@pytest.mark.parametrize(
    "target", [_workers.ddp_training, _workers.ddp_training_small_buckets], ids=["one", "buckets"]
)
def test_ddp_training_equals_one_process_on_the_global_batch(target: Any) -> None:
    outs = _ok(spawn(target))
    ref_losses, ref_state = _workers.single_process_training()
    for out in outs:
        torch.testing.assert_close(out["losses"], ref_losses, rtol=1e-5, atol=1e-5)
        for name, value in ref_state.items():
            torch.testing.assert_close(out["state"][name], value, rtol=1e-4, atol=1e-5)
    lines = outs[0]["backward"].splitlines()
    starts = [i for i, line in enumerate(lines) if "torch_dist.all_reduce(" in line]
    waits = [i for i, line in enumerate(lines) if "torch_dist.wait(" in line]
    assert starts and len(starts) == len(waits)
    if target is _workers.ddp_training_small_buckets:
        # Several buckets, started while the backward still computes other gradients.
        assert len(starts) > 2
        computing = [
            i for i, line in enumerate(lines) if "torch." in line and "torch_dist" not in line
        ]
        assert any(starts[0] < i < waits[0] for i in computing)


@pytest.mark.parametrize(
    "target", [_workers.ddp_no_sync, _workers.fsdp_no_sync], ids=["ddp", "fsdp"]
)
def test_no_sync_accumulation_equals_one_large_batch(target: Any) -> None:
    outs = _ok(spawn(target))
    model = _workers.make_model(0)
    ((x, y),) = _workers.batches(1, batch=2 * WORLD_SIZE * 2)
    _workers.loss_of(model, x, y).backward()
    for out in outs:
        for name, p in model.named_parameters():
            torch.testing.assert_close(out["grads"][name], p.grad, rtol=1e-4, atol=1e-6)
        # DDP: one program inside no_sync, one outside; FSDP: the same program (it reduce-
        # scatters every micro-step, and the shards accumulate)
        assert out["compiles"] == (2 if target is _workers.ddp_no_sync else 1)


def test_a_failing_rank_fails_every_rank() -> None:
    results = spawn(_workers.raising_rank, timeout=15.0)
    assert results[1][0] == "error" and "rank 1 fails" in results[1][1]
    assert results[0][0] == "error", "rank 0 should fail (a collective times out), not hang"


@pytest.mark.parametrize(
    "target", [_workers.fsdp_training, _workers.fsdp_training_zero2], ids=["zero3", "zero2"]
)
def test_fsdp_training_equals_one_process_on_the_global_batch(target: Any) -> None:
    outs = _ok(spawn(target))
    ref_losses, ref_state = _workers.single_process_training()
    whole = sum(v.numel() for k, v in ref_state.items() if "weight" in k or "bias" in k)
    for rank, out in enumerate(outs):
        torch.testing.assert_close(out["losses"], ref_losses, rtol=1e-5, atol=1e-5)
        assert out["shard_numel"] < 0.6 * whole  # each rank holds about half
        if rank == 0:
            for name, value in ref_state.items():
                torch.testing.assert_close(out["state"][name], value, rtol=1e-4, atol=1e-5)
        else:
            assert out["state"] == {}
    forward, backward = outs[0]["forward"], outs[0]["backward"]
    assert "all_gather" in forward and "reduce_scatter" in backward
    gathers_in_backward = backward.count("all_gather(")
    if target is _workers.fsdp_training:
        assert gathers_in_backward > 0  # ZeRO-3 gathers again instead of keeping parameters
    else:
        assert gathers_in_backward == 0


def test_fsdp_checkpoint_restores_the_same_next_step() -> None:
    outs = _ok(spawn(_workers.fsdp_checkpoint))
    assert outs[0]["expected"].keys() == outs[0]["restored"].keys() != set()
    for name, value in outs[0]["expected"].items():
        torch.testing.assert_close(outs[0]["restored"][name], value, rtol=0, atol=0)


@pytest.mark.parametrize("target", [_workers.llama_ddp, _workers.llama_fsdp], ids=["ddp", "fsdp"])
def test_tiny_llama_through_the_recipe_distributed_option(target: Any) -> None:
    pytest.importorskip("transformers")
    outs = _ok(spawn(target))
    expected = _workers.llama_reference()
    for name, value in expected.items():
        torch.testing.assert_close(outs[0][name], value, rtol=1e-4, atol=1e-5)


def test_collectives_and_their_gradients() -> None:
    # What torch.autograd sees is the sum over ranks of each rank's loss (each rank's backward
    # runs the adjoint collectives with the others).
    outs = _ok(spawn(_workers.collective_gradients))
    for rank, out in enumerate(outs):
        expected = _workers.expected_collective_gradients(rank, WORLD_SIZE)
        for name, (value, grad) in expected.items():
            torch.testing.assert_close(out[name][0], value, msg=f"{name} value on rank {rank}")
            torch.testing.assert_close(out[name][1], grad, msg=f"{name} gradient on rank {rank}")


@pytest.mark.parametrize(
    "target", [_workers.ddp_symbolic, _workers.fsdp_symbolic], ids=["ddp", "fsdp"]
)
def test_symbolic_sizes_train_every_length_with_one_program(target: Any) -> None:
    outs = _ok(spawn(target))
    expected = _workers.symbolic_reference()
    for out in outs:
        torch.testing.assert_close(out["losses"], expected, rtol=1e-5, atol=1e-5)
        assert out["compiles"] == 1
