"""Eager against compiled (``tape.compile``): the tiny GPT train step and the 200-op elementwise chain.

- ``gpt``: vocab 16, d_model 64, 2 pre-norm layers, 4 heads, seq 32, batch 16, Adam (lr 1e-3), float32; one step
  is zero_grad + forward + mean cross-entropy + backward + optimizer update + ``loss.item()``. The model is the
  examples' ``TinyGPT`` (examples/common.py); eager calls ``loss.backward()``, compiled calls the step.
- ``chain``: ``tanh(y * 1.01 + 0.1)`` then ``y * y``, 50 times, summed, forward + backward from a new 4x4 leaf
  each step (benchmarks/bench_overhead.py's chain); reported per op (200 ops).

Each (side, workload, round) runs in its own fresh child process -- eager, compiled (and torch with ``--torch``:
the same model or chain in PyTorch, never in a minitape process) alternating for ``--rounds`` rounds -- with the
same BLAS/OpenMP thread count. A child builds the workload, runs untimed warm-up steps (the compiled step records
and verifies its plan there), then times each step with ``perf_counter`` and ``process_time``. Reported per
side: the median of all timed steps of all rounds, [lowest-highest per-round median], the median CPU time of the
child per step (less sensitive to other processes on a shared machine; with several BLAS threads it adds theirs
up), minor page faults per step, and the ratios of the wall-clock medians.

Run: python benchmarks/bench_compile.py [--rounds 3] [--reps N] [--threads T] [--torch] [--only gpt]
     python benchmarks/bench_compile.py --profile            # cProfile of the compiled steps (one child each)
     python benchmarks/bench_compile.py --tune-malloc        # children keep freed memory (glibc mallopt)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python benchmarks/bench_compile.py` from a checkout: use that checkout's
    sys.path.insert(0, str(ROOT))
MARK = "@@bench-compile@@ "
VOCAB, D_MODEL, LAYERS, HEADS, SEQ, BATCH, N_OPS = 16, 64, 2, 4, 32, 16, 200
WORKLOADS = {
    "gpt": dict(reps=60, warmup=5, per=1, unit="ms"),
    "chain": dict(reps=300, warmup=20, per=N_OPS, unit="µs/op"),
}


# -------------------------------------------------------------------------------------------------------- child
def _tune_malloc() -> None:
    """Keep freed memory in the heap (no mmap per large array, no trimming): fewer page faults per step."""
    import ctypes

    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(-3, 256 << 20)  # M_MMAP_THRESHOLD
    libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD


def _minitape_gpt(compiled: bool):
    sys.path.insert(0, str(ROOT / "examples"))
    import common
    import numpy as np

    import ops
    from tape import nn, optim
    from tape.compile import compile

    nn.manual_seed(0)
    model = common.TinyGPT(VOCAB, SEQ, d_model=D_MODEL, num_heads=HEADS, num_layers=LAYERS)
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    tokens = np.random.default_rng(1).integers(0, VOCAB, size=(BATCH, SEQ + 1))
    inputs, targets = tokens[:, :-1], tokens[:, 1:]

    def loss_fn(inputs, targets):
        return ops.cross_entropy(ops.reshape(model(inputs), (-1, VOCAB)), ops.reshape(targets, (-1,)))

    if compiled:
        compiled_step = compile(loss_fn, model.parameters())

        def step():
            optimizer.zero_grad()
            loss, _ = compiled_step(inputs, targets)
            optimizer.step()
            return loss.item()
    else:

        def step():
            optimizer.zero_grad()
            loss = loss_fn(inputs, targets)
            loss.backward()
            optimizer.step()
            return loss.item()

    return step


def _chain(lib, x):
    y = x
    for _ in range(N_OPS // 4):
        y = lib.tanh(lib.add(lib.mul(y, 1.01), 0.1))
        y = lib.mul(y, y)
    return y.sum()


def _minitape_chain(compiled: bool):
    import numpy as np

    import ops
    import tape
    from tape.compile import compile

    data = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    if compiled:
        compiled_step = compile(lambda x: _chain(ops, x))
        return lambda: compiled_step(tape.tensor(data, requires_grad=True))
    return lambda: _chain(ops, tape.tensor(data, requires_grad=True)).backward()


def _torch_gpt():
    import numpy as np
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
            self.qkv, self.out = nn.Linear(D_MODEL, 3 * D_MODEL), nn.Linear(D_MODEL, D_MODEL)
            self.mlp = nn.Sequential(nn.Linear(D_MODEL, 4 * D_MODEL), nn.GELU(), nn.Linear(4 * D_MODEL, D_MODEL))

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, n, 3 * HEADS, -1).transpose(1, 2).split(HEADS, dim=1)
            heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.out(heads.transpose(1, 2).reshape(b, n, D_MODEL))
            return x + self.mlp(self.norm2(x))

    class TinyGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(VOCAB, D_MODEL), nn.Embedding(SEQ, D_MODEL)
            self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])
            self.norm, self.head = nn.LayerNorm(D_MODEL), nn.Linear(D_MODEL, VOCAB)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            return self.head(self.norm(self.blocks(x)))

    torch.manual_seed(0)
    model = TinyGPT()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    tokens = torch.from_numpy(np.random.default_rng(1).integers(0, VOCAB, size=(BATCH, SEQ + 1)))
    inputs, targets = tokens[:, :-1], tokens[:, 1:].reshape(-1)

    def step():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs).reshape(-1, VOCAB), targets)
        loss.backward()
        optimizer.step()
        return loss.item()

    return step


def _torch_chain():
    import numpy as np
    import torch

    source = torch.from_numpy(np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32))
    return lambda: _chain(torch, source.clone().requires_grad_(True)).backward()


def _build(side: str, workload: str):
    if side == "torch":
        import torch

        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        return _torch_gpt() if workload == "gpt" else _torch_chain()
    compiled = side == "compiled"
    return _minitape_gpt(compiled) if workload == "gpt" else _minitape_chain(compiled)


def child(side: str, workload: str, reps: int, warmup: int, profile: bool) -> None:
    step = _build(side, workload)
    for _ in range(warmup):
        step()
    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(lambda: [step() for _ in range(reps)])
        print(f"cProfile of {reps} {side} steps of {workload} (top 25 by internal time):")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(25)
        return
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    samples, cpu = [], []
    for _ in range(reps):
        start, start_cpu = time.perf_counter(), time.process_time()
        step()
        samples.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / reps
    if side != "torch" and "torch" in sys.modules:
        raise RuntimeError("a minitape child imported torch: its figures would not be isolated")
    print(MARK + json.dumps({"samples": samples, "cpu": cpu, "faults": faults}), flush=True)


# ------------------------------------------------------------------------------------------------------- parent
def run_child(args, side: str, workload: str, reps: int, warmup: int, profile: bool = False) -> dict | None:
    env = dict(
        os.environ,
        **{name: str(args.threads) for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")},
    )
    command = [sys.executable, __file__, "--child", side, workload, "--reps", str(reps), "--warmup", str(warmup)]
    command += ["--tune-malloc"] * args.tune_malloc + ["--profile"] * profile
    for attempt in range(3):  # a failing child is retried after a pause: someone may be editing the engine
        done = subprocess.run(command, capture_output=not profile, text=True, env=env, cwd=ROOT)
        if done.returncode == 0:
            break
        if attempt == 2:
            raise RuntimeError(f"child {side} {workload} failed:\n{done.stdout}\n{done.stderr}")
        print(f"child {side} {workload} failed ({(done.stderr or '').strip().splitlines()[-1:]}); retrying in 60 s",
              file=sys.stderr, flush=True)
        time.sleep(60)
    if profile:
        return None
    (line,) = [line for line in done.stdout.splitlines() if line.startswith(MARK)]
    return json.loads(line[len(MARK) :])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=None, help="timed steps per child (default: per workload)")
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--torch", action="store_true", help="also time PyTorch (in its own child processes)")
    parser.add_argument("--only", default="", help="comma-separated workloads (gpt, chain)")
    parser.add_argument("--profile", action="store_true", help="cProfile the compiled steps instead of timing")
    parser.add_argument("--tune-malloc", action="store_true", help="mallopt in every child before it imports numpy")
    parser.add_argument("--child", nargs=2, metavar=("SIDE", "WORKLOAD"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    selected = [w for w in WORKLOADS if not args.only or w in args.only.split(",")]
    if args.child:
        side, workload = args.child
        spec = WORKLOADS[workload]
        child(
            side,
            workload,
            args.reps or spec["reps"],
            spec["warmup"] if args.warmup is None else args.warmup,
            args.profile,
        )
        return
    if args.profile:
        for workload in selected:
            run_child(
                args,
                "compiled",
                workload,
                args.reps or WORKLOADS[workload]["reps"],
                WORKLOADS[workload]["warmup"],
                profile=True,
            )
        return
    sides = ["eager", "compiled"] + ["torch"] * args.torch
    print(
        f"{sys.executable} {' '.join(sys.argv)}\n{args.threads} BLAS/OpenMP threads per child, {args.rounds} rounds "
        f"alternating {' / '.join(sides)}{', malloc tuned' if args.tune_malloc else ''}; load average "
        f"{os.getloadavg()[0]:.1f} before"
    )
    for workload in selected:
        spec = WORKLOADS[workload]
        reps = args.reps or spec["reps"]
        warmup = spec["warmup"] if args.warmup is None else args.warmup
        rounds: dict = {side: [] for side in sides}
        for _ in range(args.rounds):
            for side in sides:  # A B (C) A B (C) ...
                rounds[side].append(run_child(args, side, workload, reps, warmup))
        scale = (1e6 if spec["unit"] == "µs/op" else 1e3) / spec["per"]
        medians = {}
        print(f"\n{workload}: {reps} timed steps per child after {warmup} warm-up steps")
        for side in sides:
            pooled = [s for r in rounds[side] for s in r["samples"]]
            per_round = [statistics.median(r["samples"]) * scale for r in rounds[side]]
            medians[side] = statistics.median(pooled) * scale
            faults = statistics.median(r["faults"] for r in rounds[side])
            cpu = statistics.median(s for r in rounds[side] for s in r["cpu"]) * scale
            print(
                f"  {side:<9} median {medians[side]:8.3f} {spec['unit']}  [{min(per_round):.3f}-{max(per_round):.3f}]"
                f"  CPU time {cpu:8.3f}  {faults:6.0f} page faults/step"
            )
        print(
            f"  eager / compiled = {medians['eager'] / medians['compiled']:.2f}x"
            + (
                f"; compiled / torch = {medians['compiled'] / medians['torch']:.2f}, eager / torch = "
                f"{medians['eager'] / medians['torch']:.2f}"
                if args.torch
                else ""
            )
        )
    print(f"load average {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    if "--tune-malloc" in sys.argv and "--child" in sys.argv:
        _tune_malloc()  # before numpy is imported
    main()
