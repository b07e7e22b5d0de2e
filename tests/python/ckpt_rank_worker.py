"""One rank of test_checkpoint_ranks.py: argv = rank world port endpoint access secret."""
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

from openlake_client import checkpoint
from torch.distributed._shard.sharded_tensor import Shard, ShardMetadata, init_from_local_shards

ROWS = 300_000  # of each rank's shard of "w"


def sharded(local: torch.Tensor, rank: int, world: int):
    """`local` as this rank's rows of a 1-D ShardedTensor laid out rank after rank."""
    n = local.numel()
    md = ShardMetadata(shard_offsets=[rank * n], shard_sizes=[n], placement=f"rank:{rank}/cpu")
    return init_from_local_shards([Shard(local, md)], world * n)


def main() -> int:
    rank, world, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    endpoint, access, secret = sys.argv[4], sys.argv[5], sys.argv[6]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=60))
    store = checkpoint.Store(endpoint, access, secret, connections=2, part_size=5 << 20)
    # Each rank's shard of a large tensor and of a small one (packed), plus replicated state
    # that torch has the coordinator write.
    w = torch.full((ROWS,), float(rank + 1))
    state = {"w": sharded(w, rank, world),
             "b": sharded(torch.arange(10) + 10 * rank, rank, world),
             "bias": torch.arange(5.0),
             "step": 7}

    # Synchronous: torch's own call, every rank writing through its OpenLakeWriter.
    checkpoint.dcp.save_state_dict(state, storage_writer=checkpoint.OpenLakeWriter(
        "s3://ckpt/ranks/sync", store))

    # Async: the save's collectives run in the background on their own group while this
    # thread goes on with collectives on the default group, as a training step would.
    handle = checkpoint.async_save(state, "s3://ckpt/ranks/async", store)
    t = torch.ones(4)
    for _ in range(50):
        dist.all_reduce(t)
    assert torch.equal(t, torch.full((4,), float(world) ** 50))
    w.add_(100.0)  # training changes its tensors at once
    handle.wait(120)

    # The next async save refills the first one's snapshot.
    again = checkpoint.async_save(state, "s3://ckpt/ranks/async2", store, reuse=handle)
    again.wait(120)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
