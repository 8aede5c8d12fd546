"""Run by ``torchrun --nproc_per_node 4`` (tests/distributed/test_tensor_parallel.py): the 2 x 2
mesh of tensor parallelism and fsdp, each rank's result saved to ``<out>/rank<r>.pt``."""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _workers  # noqa: E402


def main() -> None:
    out = sys.argv[1]
    torch.set_num_threads(1)
    dist.init_process_group("gloo")  # rank, world size and rendezvous from torchrun
    try:
        rank, world_size = dist.get_rank(), dist.get_world_size()
        torch.save(_workers.tp_fsdp_2d(rank, world_size), os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # The rank's result is saved and its group destroyed: leave without the interpreter's exit,
    # where a C++ thread of torch's still joinable at static destruction aborted a rank now and
    # then ("terminate called without an active exception", exit -6) after its work was done.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
