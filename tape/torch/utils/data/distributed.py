"""``torch.utils.data.distributed``: ``DistributedSampler`` (tape/distributed.py's; MPI ranks)."""

from tape.distributed import DistributedSampler

__all__ = ["DistributedSampler"]
