"""thunder.distributed.tensor_parallel on gloo CPU ranks: colwise/rowwise Linear and Embedding
layers train equal to one process, jitted (collectives in the traces) and eagerly; composed
with fsdp on a 2 x 2 mesh of 4 ranks; checkpoints are DTensors (on the 2-D mesh with fsdp) that
load back, and resume training through torch.distributed.checkpoint exactly."""

from __future__ import annotations

import functools
from typing import Any

import _workers
import pytest
import torch
import torch.distributed as dist
from _spawn import ok, spawn

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed unavailable")


def _same(state: dict[str, Any], expected: dict[str, Any]) -> None:
    assert state.keys() <= expected.keys()
    for name, value in state.items():
        torch.testing.assert_close(value, expected[name], rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize(
    "target",
    [_workers.tp_rows, _workers.tp_cols, _workers.tp_rows_eager],
    ids=["vocab-split", "dim-split", "eager"],
)
def test_tensor_parallel_training_equals_one_process(target: Any) -> None:
    outs = ok(spawn(target))
    ref = _workers.tp_reference()
    whole = sum(v.numel() for v in ref["state"].values())
    split = ["embed.weight", "fc1.weight", "fc1.bias", "fc2.weight", "head.weight", "head.bias"]
    for out in outs:
        torch.testing.assert_close(out["losses"], ref["losses"], rtol=1e-5, atol=1e-5)
        _same(out["state"], ref["state"])
        _same(out["saved"], ref["state"])  # state_dict(): DTensors with the whole shapes
        _same(out["reloaded"], ref["state"])
        assert out["dtensors"] == sorted(split)
        assert out["local_numel"] < 0.6 * whole
        assert "norm is a LayerNorm" in out["refused"]
        if "not_a_mesh" in out:
            assert "not the two dimensions of a mesh" in out["not_a_mesh"]
        if "forward" in out:
            assert "all_reduce" in out["forward"] or "all_gather" in out["forward"]
            assert "all_reduce" in out["backward"]  # the colwise input's gradient


def test_tensor_parallel_with_fsdp_on_a_2x2_mesh_equals_one_process() -> None:
    outs = ok(spawn(_workers.tp_fsdp_2d, world_size=4, timeout=120.0))
    ref = _workers.tp_reference()
    whole = sum(v.numel() for v in ref["state"].values())
    mesh = ([0, 2], [1, 3])  # [tp rank][dp rank]: tensor parallel first, then fsdp's shards
    split = {"embed.weight": 0, "fc1.weight": 0, "fc1.bias": 0, "fc2.weight": 1}
    split |= {"head.weight": 0, "head.bias": 0}
    for rank, out in enumerate(outs):
        torch.testing.assert_close(out["losses"], ref["losses"], rtol=1e-5, atol=1e-5)
        _same(out["state"], ref["state"])
        assert out["local_numel"] < 0.35 * whole  # a quarter of each split layer
        # state_dict(): every parameter a DTensor on the 2-D mesh, of the whole shape
        assert out["shapes"] == {k: tuple(v.shape) for k, v in ref["state"].items()}
        assert out["placements"] == {
            k: ((f"S({split[k]})" if k in split else "R", "S(0)"), mesh)
            for k in ref["state"]
            if k.endswith(("weight", "bias"))
        }
        _same(out["full"], ref["state"])  # gathered from the 2-D DTensors
        assert out["full"].keys() == ref["state"].keys()
        _same(out["whole_loaded"], out["full"])  # a whole checkpoint of plain tensors loads
        assert "loads each parameter whole" in out["refused"]  # local pieces do not
        if rank == 0:
            assert out["gathered"].keys() == ref["state"].keys()
            _same(out["gathered"], ref["state"])
        else:
            assert out["gathered"] == {}
        _same(out["full_loaded"], out["full"])


def test_tensor_parallel_with_fsdp_dcp_checkpoint_resumes_training_exactly(tmp_path) -> None:
    folder = str(tmp_path / "checkpoint")
    outs = ok(
        spawn(functools.partial(_workers.tp_fsdp_dcp, folder=folder), world_size=4, timeout=120.0)
    )
    ref = _workers.tp_reference(adam=True)
    for out in outs:
        assert out["resumed_losses"] == out["losses"][2:]
        assert out["resumed"].keys() == out["uninterrupted"].keys() == ref["state"].keys()
        for name, value in out["uninterrupted"].items():
            torch.testing.assert_close(out["resumed"][name], value, rtol=0, atol=0, msg=name)
        # and the 2-D training equals one process (up to the order of the sums)
        torch.testing.assert_close(out["losses"], ref["losses"], rtol=1e-5, atol=1e-5)
        _same(out["uninterrupted"], ref["state"])


def test_the_2x2_mesh_under_torchrun(tmp_path) -> None:
    import os
    import shutil
    import socket
    import subprocess
    import sys

    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    assert torchrun is not None, "torchrun comes with torch"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = os.path.join(os.path.dirname(__file__), "torchrun_tp_fsdp.py")
    done = subprocess.run(
        [
            torchrun,
            "--nproc_per_node",
            "4",
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(port),
            script,
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ref = _workers.tp_reference()
    for rank in range(4):
        out = torch.load(tmp_path / f"rank{rank}.pt", weights_only=False)
        torch.testing.assert_close(out["losses"], ref["losses"], rtol=1e-5, atol=1e-5)
        _same(out["state"], ref["state"])
