"""Checkpoints of a model sharded by thunder.distributed.fsdp (gloo CPU ranks): state_dict()
is whole or knows it is sharded (DTensors), never shards passed off as parameters; a sharded
checkpoint through torch.distributed.checkpoint resumes training exactly, also on another
world size."""

from __future__ import annotations

import functools

import _workers
import pytest
import torch
import torch.distributed as dist
from _spawn import ok, spawn

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed unavailable")


def test_state_dict_of_a_sharded_model_is_dtensors_that_load_back() -> None:
    outs = ok(spawn(_workers.fsdp_state_dicts))
    for rank, out in enumerate(outs):
        assert out["keys"] == list(out["eager"])  # the model's own names
        assert out["dtensors"] == sorted(k for k in out["eager"] if k.endswith(("weight", "bias")))
        assert out["shapes"] == out["eager_shapes"]  # global shapes, not a rank's shard
        for name, value in out["eager"].items():
            torch.testing.assert_close(out["full"][name], value, rtol=0, atol=0)
        assert "loads each parameter whole" in out["refused"]
        if rank == 0:
            for name, value in out["eager"].items():
                torch.testing.assert_close(out["loaded"][name], value, rtol=0, atol=0)
                torch.testing.assert_close(out["round_trip"][name], value, rtol=0, atol=0)


@pytest.mark.parametrize("sizes", [(2, 2), (2, 1), (1, 2)], ids=["2-2", "2-1", "1-2"])
def test_dcp_checkpoint_resumes_training_exactly(tmp_path, sizes) -> None:
    saved_on, resumed_on = sizes
    folder = str(tmp_path / "checkpoint")
    (expected, *_) = ok(
        spawn(functools.partial(_workers.fsdp_dcp_save, folder=folder), world_size=saved_on)
    )
    (resumed, *_) = ok(
        spawn(functools.partial(_workers.fsdp_dcp_resume, folder=folder), world_size=resumed_on)
    )
    assert expected["after"].keys() == resumed["after"].keys() != set()
    exact = saved_on == resumed_on
    for name, value in expected["after"].items():
        # Across world sizes the gradients are summed in another order; Adam's step magnifies
        # that float noise on near-zero gradients (a few 1e-6 on weights of ~1e-2).
        tol = {"rtol": 0, "atol": 0} if exact else {"rtol": 1e-4, "atol": 1e-5}
        torch.testing.assert_close(
            resumed["after"][name], value, **tol, msg=lambda m, n=name: f"{n}: {m}"
        )


def test_a_meta_device_model_is_materialized_shard_by_shard() -> None:
    outs = ok(spawn(_workers.fsdp_meta_init))
    reference = _workers.meta_init_reference()
    whole = sum(v.numel() for k, v in reference.items() if k.endswith(("weight", "bias")))
    for rank, out in enumerate(outs):
        assert out["devices"] == {"cpu"} and out["tied"]
        assert out["shard_numel"] < 0.6 * whole
        assert len(out["losses"]) == _workers.STEPS
        if rank == 0:
            assert out["state"].keys() == reference.keys()
            for name, value in reference.items():
                torch.testing.assert_close(out["state"][name], value, rtol=0, atol=0, msg=name)
    torch.testing.assert_close(outs[0]["losses"], outs[1]["losses"])


def test_a_meta_device_module_without_an_initializer_is_an_error() -> None:
    messages = ok(spawn(_workers.fsdp_meta_without_init))
    for message in messages:
        assert "Scaled" in message and "param_init_fn" in message
