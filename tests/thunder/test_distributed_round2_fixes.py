"""thunder.distributed on 2 CPU processes (gloo), against torch's DDP: a parameter first read
under no_grad (fsdp), calls that cannot be compiled (refused, never run eagerly where eager
is wrong), rank queries compiled, rank-dependent parameter reads (detected), leaving no_sync
with skipped layers and with several dtypes (every rank reduces the same tensors in the same
order)."""

from __future__ import annotations

import _round2_distributed_workers as workers
import pytest
import torch.distributed as dist
from _spawn import ok as _ok
from _spawn import spawn

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed unavailable")


def test_fsdp_parameter_first_read_under_no_grad_gets_no_gradient_there() -> None:
    for failures in _ok(spawn(workers.fsdp_no_grad_first_read)):
        assert failures == []


def test_rank_and_world_size_in_forward_compile() -> None:
    for out in _ok(spawn(workers.ddp_rank_queries_compile)):
        assert out["failures"] == []
        assert out["eager"] == 0


def test_a_distributed_call_that_cannot_compile_raises_instead_of_running_eagerly() -> None:
    for out in _ok(spawn(workers.untraceable_distributed_calls)):
        for key in ("ddp_grad", "ddp_grad_again"):
            assert out[key].startswith("JitError"), out[key]
            assert "thunder.distributed.ddp()" in out[key]
            assert "print" in out[key] and "_round2_distributed_workers.py" in out[key]
            assert "not be averaged" in out[key]
        assert out["ddp_no_grad"] == ""
        assert out["ddp_no_sync"] == ""
        for key in ("fsdp", "fsdp_no_grad"):
            assert out[key].startswith("JitError"), out[key]
            assert "thunder.distributed.fsdp()" in out[key] and "shards" in out[key]


def test_rank_dependent_parameter_reads_are_detected_and_no_sync_averages_every_gradient() -> None:
    for out in _ok(spawn(workers.rank_dependent_parameters)):
        assert "ranks' backward passes average different gradients" in out["ddp"], out["ddp"]
        assert "ranks' programs gather different parameters" in out["fsdp"], out["fsdp"]
        assert out["same_branch"] == []
        for name, check in out["no_sync"].items():
            if name.startswith("unused"):
                assert check == (True, True), name  # no rank has one: None, as torch's DDP
            else:
                assert check == "", (name, check)


def test_leaving_no_sync_with_several_dtypes_reduces_in_the_same_order_on_every_rank() -> None:
    outs = _ok(spawn(workers.no_sync_mixed_dtypes))
    for out in outs:
        assert out["failures"] == []
    assert outs[0]["order"] == outs[1]["order"]
