"""All-reduce latency and the flagship's data-parallel step, on MPI ranks (tape.distributed; docs/distributed.md).

    mpiexec -n 2 python benchmarks/bench_allreduce.py                 # all-reduce of 1 MB and 100 MB float32
    mpiexec -n 1 python benchmarks/bench_allreduce.py --flagship 60   # examples/reverse.py's step, 1 rank
    mpiexec -n 2 python benchmarks/bench_allreduce.py --flagship 60   # ... on 2 ranks, global batch 64 each time

Latency: per size, three ways of summing a float32 buffer over the ranks, each the median (and min-max) of
``--reps`` calls after a barrier and 3 warm-up calls: MPI's own ``Allreduce`` (in place, blocking), what
``tape.distributed`` does (a reduce-scatter then an all-gather, non-blocking, waited on with the deadline: each
element is summed on one rank and its bytes copied to all), and ``allreduce_gradients`` on one parameter of that
size (adds the layout check and packing the gradient). Also the agreement check every collective makes first
(an all-gather of three int64s: call count, collective, shapes/dtypes) alone, and ``allreduce`` (check, copy, sum).

Flagship: the TinyGPT of examples/reverse.py (float32), the compiled step on this rank's shard of a global batch
of 64 sequences, then ``allreduce_gradients``, clipping and AdamW. Per step: the whole step, its all-reduce part
and the gradient bytes each rank sends; rank 0 prints medians over the steps after the first 10 (recording).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from functools import partial

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import numpy as np  # noqa: E402

import tape  # noqa: E402
from tape import distributed as dist  # noqa: E402


def _timed(fn, reps: int) -> list[float]:
    for _ in range(3):
        fn()
    dist.barrier()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def _summary(samples: list[float]) -> str:
    ms = np.array(samples) * 1e3
    return f"median {np.median(ms):8.3f} ms  (min {ms.min():.3f}, max {ms.max():.3f}, n={len(ms)})"


def latency(sizes_mb: list[float], reps: int) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    for mb in sizes_mb:
        n = int(mb * (1 << 20)) // 4 // dist.world_size() * dist.world_size()  # whole shards (see _reduce_in_place)
        buffer = np.ones(n, dtype=np.float32)
        param = tape.tensor(np.zeros(n, dtype=np.float32), requires_grad=True)
        grad = tape.tensor(np.ones(n, dtype=np.float32))
        count = max(5, reps if mb <= 1 else reps // 20)
        rows = {
            "MPI Allreduce (in place)": _timed(partial(comm.Allreduce, MPI.IN_PLACE, buffer, op=MPI.SUM), count),
            "tape.distributed's sum": _timed(partial(dist._reduce_in_place, buffer, "bench"), count),
            "agreement check alone": _timed(partial(dist._agree, "bench", f"{buffer.dtype.str}{buffer.shape}"), count),
            "allreduce (check + sum)": _timed(partial(dist.allreduce, buffer), count),
            "allreduce_gradients": _timed(partial(_gradients, param, grad), count),
        }
        if dist.rank() == 0:
            for name, samples in rows.items():
                print(f"{mb:6g} MB  {name:<26} {_summary(samples)}", flush=True)


def _gradients(param, grad) -> None:
    param.grad = grad
    dist.allreduce_gradients([param])


def flagship(steps: int) -> None:
    import common

    import ops  # noqa: F401
    from tape import nn, optim

    nn.manual_seed(0)
    model = common.TinyGPT(vocab_size=27, context=24, d_model=64, num_heads=4, num_layers=2)
    dist.broadcast_parameters(model)
    optimizer = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    compiled = tape.compile(model.loss, model.parameters())
    rng = np.random.default_rng(0)
    whole, reduce = [], []
    for _ in range(steps):
        x = rng.integers(0, 26, size=(64, 12))
        full = np.concatenate([x, np.full((64, 1), 26), x[:, ::-1]], axis=1)
        inputs, targets = full[:, :-1], full[:, 1:].copy()
        targets[:, :12] = -100
        inputs, targets = dist.shard(inputs, targets)
        start = time.perf_counter()
        optimizer.zero_grad()
        compiled(inputs, targets)
        middle = time.perf_counter()
        dist.allreduce_gradients(model)
        reduced = time.perf_counter()
        optim.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        whole.append(time.perf_counter() - start)
        reduce.append(reduced - middle)
    if dist.rank() == 0:
        nbytes = sum(p.numel() * p.dtype.itemsize for p in model.parameters())
        w, r = np.median(whole[10:]) * 1e3, np.median(reduce[10:]) * 1e3
        print(f"ranks {dist.world_size()}: step {w:.2f} ms (min {np.min(whole[10:]) * 1e3:.2f}), all-reduce "
              f"{r:.3f} ms ({r / w:.1%} of the step); gradient bytes per step per rank {nbytes:,} "
              f"({model.num_parameters():,} float32 parameters); steps {steps} (first 10 not counted)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1.0, 100.0], help="buffer sizes in MB")
    parser.add_argument("--reps", type=int, default=200, help="calls per size (1 MB; larger sizes: reps / 20)")
    parser.add_argument("--flagship", type=int, metavar="STEPS", help="time the flagship's step instead")
    args = parser.parse_args()
    dist.init()
    if args.flagship:
        flagship(args.flagship)
    else:
        latency(args.sizes, args.reps)


if __name__ == "__main__":
    main()
