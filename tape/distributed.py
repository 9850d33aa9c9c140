"""Data-parallel training over MPI ranks: every rank holds the whole model, computes gradients on its shard of
the global batch, the gradients are all-reduced, and every rank takes the same optimizer step.

    tape.distributed.init()                          # once, in a script launched with `mpiexec -n N python ...`
    tape.distributed.broadcast_parameters(model)     # every rank starts from rank 0's parameters
    for step in range(steps):
        tokens, targets = tape.distributed.shard(global_tokens, global_targets)   # this rank's rows
        optimizer.zero_grad()
        loss, _ = compiled(tokens, targets)          # or loss.backward(): anything that writes p.grad
        tape.distributed.allreduce_gradients(model)  # p.grad = the mean over the ranks, the same bytes on each
        optimizer.step()
    tape.distributed.save_checkpoint(model, "model.npz")   # rank 0 writes, the others wait

Built on mpi4py (``pip install -e '.[mpi]'`` in a clone of this repository: mpi4py and the ``mpich`` wheel, which
brings the MPI library and ``mpiexec``); importing this module does not need it, ``init()`` does. See
docs/distributed.md.

**Equal to one process.** N ranks with shards of B/N rows give the gradients of one process with batch B when
the loss is a mean over rows and every shard counts the same number of terms: the mean of N shard means is then
the global mean. A loss whose count differs between shards (cross-entropy with ignored targets spread unevenly)
needs ``average=False`` and a loss summed over the shard divided by the global count instead.

**Buffers follow rank 0** (torch DDP's rule): ``broadcast_parameters`` gives a Module's buffers with its
parameters, and ``broadcast_buffers(model)`` after each step gives every rank rank 0's BatchNorm statistics --
those of rank 0's shard, not of the global batch (no SyncBatchNorm).

**Bit-identical ranks.** Gradients are packed into buckets in parameter order -- the same order on every rank,
checked by a layout fingerprint each call -- and each bucket is summed so that every rank gets the same bytes
by construction, whatever order the MPI library sums in: on 2 ranks by MPI's all-reduce (each element is x0 + x1
either way round), on more by a reduce-scatter (each element summed once, on one rank) and an all-gather. A
parameter whose ``.grad`` is None on some ranks (unused by their shard) contributes zeros there, as its share of
the one-process gradient; None on every rank stays None.

**No hang when a rank dies.** Every collective is non-blocking and waited on with a deadline (``init(timeout=)``,
default 600 s, or ``MINITAPE_DISTRIBUTED_TIMEOUT``): past it, ``DistributedError`` names the collective and the
rank. ``init()`` also installs an exception hook: an exception that ends any rank's script (that error, or any
other) prints its traceback prefixed with the rank and calls ``MPI_Abort``, which ends every rank of the job --
one rank's failure never leaves the others waiting forever. A rank killed outright (a signal, the OOM killer)
is noticed by MPICH's ``mpiexec``, which ends the job within a second; the deadline covers what no launcher
sees: a rank that hangs, or one that skips a collective.
"""

from __future__ import annotations

import math
import os
import sys
import time
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from .checks import integer
from .tensors import Tensor

__all__ = [
    "init",
    "is_initialized",
    "rank",
    "world_size",
    "barrier",
    "broadcast_parameters",
    "broadcast_buffers",
    "allreduce_gradients",
    "allreduce",
    "shard",
    "DistributedSampler",
    "save_checkpoint",
    "DistributedError",
    "INSTALL",
]

INSTALL = "pip install -e '.[mpi]' in a clone of this repository  (or: pip install mpi4py mpich)"
DEFAULT_TIMEOUT = 600.0
DEFAULT_BUCKET_BYTES = 8 << 20


class DistributedError(RuntimeError):
    """A collective did not complete in time, or the ranks disagree about what they are reducing."""


class _World:
    """The communicator this module uses (a duplicate of COMM_WORLD: the user's own MPI traffic cannot mix with
    ours) and the collectives' deadline."""

    comm: Any = None
    MPI: Any = None
    timeout = DEFAULT_TIMEOUT
    calls = 0  # collectives run so far on this rank (part of each call's signature: the same order on every rank)


def init(timeout: float | None = None) -> None:
    """Join the MPI job (a script launched with ``mpiexec -n N``; a plain ``python`` run is a job of one rank).
    ``timeout``: seconds any collective may wait for the other ranks before raising DistributedError (default
    ``MINITAPE_DISTRIBUTED_TIMEOUT`` or 600). Calling it again only updates the timeout."""
    if timeout is None:
        timeout = float(os.environ.get("MINITAPE_DISTRIBUTED_TIMEOUT", DEFAULT_TIMEOUT))
    if not timeout > 0:
        raise ValueError(f"tape.distributed.init: timeout must be > 0 seconds, got {timeout}")
    _World.timeout = float(timeout)
    if _World.comm is not None:
        return
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(f"tape.distributed.init needs mpi4py and an MPI library: {INSTALL} ({e})") from None
    _World.MPI = MPI
    _World.comm = MPI.COMM_WORLD.Dup()
    _install_abort_hook()


def _install_abort_hook() -> None:
    previous = sys.excepthook

    def abort_on_uncaught(kind, value, traceback):
        sys.stderr.write(f"[minitape rank {rank()} of {world_size()}] uncaught exception; aborting every rank:\n")
        previous(kind, value, traceback)
        sys.stderr.flush()
        sys.stdout.flush()
        time.sleep(1.0)  # let mpiexec's proxy forward the message: Abort kills it, and unread output is lost
        _World.MPI.COMM_WORLD.Abort(1)

    sys.excepthook = abort_on_uncaught


def is_initialized() -> bool:
    return _World.comm is not None


def _comm(where: str):
    if _World.comm is None:
        raise RuntimeError(f"tape.distributed.{where}: call tape.distributed.init() first")
    return _World.comm


def rank() -> int:
    """This process's rank, 0 .. world_size() - 1."""
    return _comm("rank").Get_rank()


_this_rank = rank  # for the functions whose argument is called ``rank``


def world_size() -> int:
    """The number of ranks in the job."""
    return _comm("world_size").Get_size()


# -- waiting with a deadline ---------------------------------------------------------------------------------
def _wait(requests: list, what: str) -> None:
    """Complete non-blocking ``requests``, testing them in a loop (MPI progresses them only while they are tested
    or waited on, and a blocking wait spins the same way); past the deadline raise DistributedError."""
    deadline = time.monotonic() + _World.timeout
    for request in requests:
        while not request.Test():
            if time.monotonic() > deadline:
                raise DistributedError(
                    f"tape.distributed.{what}: rank {rank()} of {world_size()} waited {_World.timeout:g} s for "
                    f"the other ranks: one of them has died, hangs, or is not calling the same collective"
                )


def barrier() -> None:
    """Wait until every rank has reached this call (with the collectives' deadline)."""
    _comm("barrier")
    _agree("barrier", "")
    _wait([_World.comm.Ibarrier()], "barrier")


# -- parameters and buckets ----------------------------------------------------------------------------------
def _params_of(where: str, module_or_params) -> list[Tensor]:
    params = module_or_params.parameters() if callable(getattr(module_or_params, "parameters", None)) else None
    params = list(module_or_params if params is None else params)
    for k, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise TypeError(
                f"tape.distributed.{where}: argument 'module_or_params' expected a Module or Tensors, got "
                f"{type(p).__name__} at position {k}"
            )
    return params


def _buckets(params: list[Tensor], bucket_bytes: int) -> list[list[int]]:
    """Consecutive parameters of one dtype, each list at most ``bucket_bytes`` (or one larger parameter)."""
    buckets: list[list[int]] = []
    size = 0
    for k, p in enumerate(params):
        nbytes = p.numel() * p.dtype.itemsize
        if not buckets or params[buckets[-1][0]].dtype != p.dtype or size + nbytes > bucket_bytes:
            buckets.append([])
            size = 0
        buckets[-1].append(k)
        size += nbytes
    return buckets


def _check_layout(where: str, params: list[Tensor]) -> None:
    """Every rank must pass the same parameters in the same order (a mismatch would otherwise reduce unrelated
    numbers, or hang)."""
    _agree(where, f"{len(params)} parameters " + ";".join(f"{p.dtype.str}{p.shape}" for p in params))


def _agree(where: str, payload: str) -> None:
    """Before a collective's payload: every rank compares a signature -- the collective's name, how many collectives
    this rank has run, and ``payload`` (shapes, dtypes) -- by an all-gather of three int64s, and every rank raises
    DistributedError if any differs (a mismatch would sum unrelated bytes, read past a buffer, or hang)."""
    _World.calls += 1
    mine = np.array([_World.calls, zlib.crc32(where.encode()), zlib.crc32(payload.encode())], dtype=np.int64)
    every = np.empty((world_size(), 3), dtype=np.int64)
    _wait([_World.comm.Iallgather(mine, every)], where)
    differ = [r for r in range(len(every)) if not np.array_equal(every[r], every[0])]
    if differ:
        parts = ("call count", "collective", "shapes/dtypes")
        names = ", ".join(part for k, part in enumerate(parts) if every[differ[0], k] != every[0, k])
        raise DistributedError(
            f"tape.distributed.{where}: the ranks disagree: rank(s) {differ} called another collective, or with other "
            f"arguments, than rank 0 ({names} differ; this rank {rank()}: collective #{_World.calls}, {payload}); "
            f"every rank must make the same collective calls in the same order with the same shapes and dtypes"
        )


def _pack(arrays: list[np.ndarray | None], like: list[Tensor]) -> np.ndarray:
    """One flat writable buffer holding ``arrays`` in order (zeros where an entry is None), its length padded
    with zeros to a multiple of the number of ranks (for ``_reduce_in_place``)."""
    size = sum(p.numel() for p in like)
    flat = np.empty(-(-size // world_size()) * world_size(), dtype=like[0].dtype)
    flat[size:] = 0
    offset = 0
    for a, p in zip(arrays, like):
        flat[offset : offset + p.numel()] = 0 if a is None else a.reshape(-1)
        offset += p.numel()
    return flat


def _views(flat: np.ndarray, like: list[Tensor]) -> Iterator[np.ndarray]:
    offsets = np.cumsum([0] + [p.numel() for p in like])
    for k, p in enumerate(like):
        yield flat[offsets[k] : offsets[k + 1]].reshape(p.shape)


def broadcast_parameters(module_or_params, root: int = 0, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> None:
    """Give every rank ``root``'s parameter values -- and, given a Module, its buffers too (as torch's DDP does
    when it wraps a model): call after building the model, before training."""
    _comm("broadcast_parameters")
    tensors = _params_of("broadcast_parameters", module_or_params)
    if callable(getattr(module_or_params, "buffers", None)):
        tensors += list(module_or_params.buffers())
    _broadcast("broadcast_parameters", tensors, root, bucket_bytes)


def broadcast_buffers(module, root: int = 0, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> None:
    """Give every rank ``root``'s buffers (BatchNorm's running statistics and counts), the rule of torch's DDP
    (``broadcast_buffers=True``): each rank's BatchNorm updates its statistics from its own shard, so without this
    the ranks' models drift apart in eval mode. Call once per step, after the optimizer's. What the ranks then hold
    is rank 0's statistics -- those of its shard, not of the global batch one process would see."""
    _comm("broadcast_buffers")
    if not callable(getattr(module, "buffers", None)):
        raise TypeError(
            f"tape.distributed.broadcast_buffers: argument 'module' expected a Module, got {type(module).__name__}"
        )
    _broadcast("broadcast_buffers", list(module.buffers()), root, bucket_bytes)


def _broadcast(where: str, tensors: list[Tensor], root: int, bucket_bytes: int) -> None:
    _check_root(where, root)
    _check_layout(where, tensors)
    flats, requests = [], []
    for bucket in _buckets(tensors, bucket_bytes):
        like = [tensors[k] for k in bucket]
        flat = _pack([t._data for t in like], like)
        requests.append(_World.comm.Ibcast(flat, root=root))
        flats.append((flat, like))
    _wait(requests, where)
    for flat, like in flats:
        for t, value in zip(like, _views(flat, like)):
            t.data = value


def _check_root(where: str, root: int) -> None:
    if not (isinstance(root, int) and 0 <= root < world_size()):
        raise ValueError(f"tape.distributed.{where}: root must be a rank in 0..{world_size() - 1}, got {root!r}")


def allreduce_gradients(module_or_params, average: bool = True, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> None:
    """Replace every parameter's ``.grad`` by the sum over the ranks (``average``: divided by the number of ranks),
    bucket by bucket, identical bytes on every rank (see the module docstring). Call it between the backward
    (or a ``tape.compile``d step) and the optimizer step, on every rank, with the same parameters."""
    _comm("allreduce_gradients")
    params = _params_of("allreduce_gradients", module_or_params)
    _check_layout("allreduce_gradients", params)
    present = np.array([p.grad is not None for p in params], dtype=np.uint8)
    if params:
        _wait([_World.comm.Iallreduce(_World.MPI.IN_PLACE, present, op=_World.MPI.MAX)], "allreduce_gradients")
    used = [p for p, flag in zip(params, present) if flag]
    for bucket in _buckets(used, bucket_bytes):
        like = [used[k] for k in bucket]
        flat = _pack([None if p.grad is None else p.grad._data for p in like], like)
        _reduce_in_place(flat, "allreduce_gradients")
        if average:
            flat /= world_size()
        for p, value in zip(like, _views(flat, like)):
            p.grad = Tensor._wrap(value)


def _reduce_in_place(flat: np.ndarray, what: str) -> None:
    """Sum ``flat`` (its length a multiple of the number of ranks) over the ranks, into ``flat`` on every rank,
    the same bytes on each. Two ranks: MPI's all-reduce, where each element can only be x0 + x1, and IEEE
    addition is commutative. More: a reduce-scatter sums each element on exactly one rank and an all-gather
    copies those bytes to all (an all-reduce may associate the sum differently on different ranks)."""
    MPI, comm = _World.MPI, _World.comm
    if comm.Get_size() == 2:
        _wait([comm.Iallreduce(MPI.IN_PLACE, flat, op=MPI.SUM)], what)
        return
    part = np.empty(len(flat) // comm.Get_size(), dtype=flat.dtype)
    _wait([comm.Ireduce_scatter_block(flat, part, op=MPI.SUM)], what)
    _wait([comm.Iallgather(part, flat)], what)


def allreduce(value, average: bool = False) -> np.ndarray:
    """The sum (``average``: the mean) over the ranks of a number or numeric array, as a new array (float64 for
    a Python number), the same bytes on every rank. For logging, e.g. the global batch's loss."""
    _comm("allreduce")
    array = np.array(value._data if isinstance(value, Tensor) else value, copy=True)
    if array.dtype.kind not in "fiu":
        raise TypeError(f"tape.distributed.allreduce: expected a number or numeric array, got dtype {array.dtype}")
    _agree("allreduce", f"{array.dtype.str}{array.shape}")
    n = world_size()
    flat = np.zeros(-(-array.size // n) * n, dtype=array.dtype)
    flat[: array.size] = array.reshape(-1)
    _reduce_in_place(flat, "allreduce")
    total = flat[: array.size].reshape(array.shape)
    return total / n if average else total


# -- sharding ------------------------------------------------------------------------------------------------
def shard(*arrays, num_replicas: int | None = None, rank: int | None = None):
    """This rank's equal block of rows of each array (the same leading length, divisible by the number of ranks:
    unequal shards would weight rows unequally in the averaged gradient). One array in, one out."""
    n, r = _replicas("shard", num_replicas, rank)
    lengths = {len(a) for a in arrays}
    if len(lengths) != 1:
        raise ValueError(f"tape.distributed.shard: the arrays must have the same number of rows, got {sorted(lengths)}")
    (length,) = lengths
    if length % n:
        raise ValueError(
            f"tape.distributed.shard: {length} rows do not split into {n} equal shards; use a global batch "
            f"divisible by the number of ranks"
        )
    size = length // n
    out = tuple(a[r * size : (r + 1) * size] for a in arrays)
    return out[0] if len(out) == 1 else out


def _replicas(where: str, num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    n = world_size() if num_replicas is None else num_replicas
    r = _this_rank() if rank is None else rank
    n, r = (int(v) if isinstance(v, np.integer) else v for v in (n, r))
    if not (isinstance(n, int) and n >= 1 and isinstance(r, int) and 0 <= r < n):
        raise ValueError(
            f"tape.distributed.{where}: expected num_replicas >= 1 and 0 <= rank < num_replicas, "
            f"got num_replicas={n!r}, rank={r!r}"
        )
    return n, r


class DistributedSampler:
    """This rank's indices into ``dataset`` (a sized dataset, or its size as an int), as torch's
    ``DistributedSampler``: a shuffle
    seeded by ``seed + epoch`` (the same permutation on every rank; numpy's generator, so not torch's indices),
    equal shards -- padded by repeating the first indices, or with ``drop_last`` the tail dropped -- and this
    rank's every ``num_replicas``-th index from ``rank``. Call ``set_epoch(e)`` before each epoch."""

    def __init__(
        self,
        dataset,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ):
        sized = hasattr(dataset, "__len__") and not isinstance(dataset, np.ndarray | str)
        dataset_size = len(dataset) if sized else integer("DistributedSampler", "dataset", dataset)
        if dataset_size < 0:
            raise ValueError(f"DistributedSampler: dataset's size must be an int >= 0, got {dataset_size!r}")
        num_replicas = None if num_replicas is None else integer("DistributedSampler", "num_replicas", num_replicas)
        rank = None if rank is None else integer("DistributedSampler", "rank", rank)
        self.num_replicas, self.rank = _replicas("DistributedSampler", num_replicas, rank)
        self.dataset_size, self.shuffle, self.drop_last = dataset_size, shuffle, drop_last
        self.seed = integer("DistributedSampler", "seed", seed)  # negative too: torch's generator takes any int64
        self.epoch = 0
        if drop_last and dataset_size % self.num_replicas:
            self.num_samples = math.ceil((dataset_size - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(dataset_size / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        self.epoch = integer("DistributedSampler.set_epoch", "epoch", epoch)

    def indices(self) -> np.ndarray:
        """This rank's indices for the current epoch (an int64 array of ``len(self)``)."""
        n = self.dataset_size
        seed = (self.seed + self.epoch) % 2**64  # numpy's generator takes seeds >= 0; a negative one wraps, as torch's
        order = np.random.default_rng(seed).permutation(n) if self.shuffle else np.arange(n)
        if self.drop_last:
            order = order[: self.total_size]
        elif self.total_size > n:
            order = np.resize(order, self.total_size)  # repeats from the start, as torch pads
        return order[self.rank : self.total_size : self.num_replicas].astype(np.int64)

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return self.num_samples


# -- checkpoints ---------------------------------------------------------------------------------------------
def save_checkpoint(model, path, optimizer=None, schedule=None, **extra) -> str:
    """``tape.checkpoint.save`` on rank 0 only; every rank returns when the file is written, and raises if rank 0
    could not write it (call it on every rank)."""
    from .train import checkpoint

    comm = _comm("save_checkpoint")
    _agree("save_checkpoint", "")
    status = np.zeros(1, dtype=np.int64)
    failure = None
    if comm.Get_rank() == 0:
        try:
            path = checkpoint.save(model, path, optimizer, schedule, **extra)
        except Exception as e:  # every rank learns of it, rank 0 re-raises it
            failure, status[0] = e, 1
    _wait([comm.Ibcast(status, root=0)], "save_checkpoint")
    if failure is not None:
        raise failure
    if status[0]:
        raise DistributedError(f"tape.distributed.save_checkpoint: rank 0 failed to write {os.fspath(path)!r}")
    return os.fspath(path)
