"""Time one training step of the same tiny GPT in minitape and in PyTorch, side by side.

Model: vocab 16, d_model 64, 2 pre-norm layers, 4 heads, MLP 256, causal, float32; batch 16 x 32
tokens; Adam. A step is forward + cross-entropy + backward + optimizer update. The two frameworks run in
alternating rounds in the same process (the machine is shared and noisy: compare the ratio, not the
absolute times); we report medians.

    python benchmarks/bench_train_step.py
    python benchmarks/bench_train_step.py --profile     # cProfile's top entries for minitape's step
"""

from __future__ import annotations

import os
import sys

# examples/common.py (imported first) sets numpy's BLAS to one thread unless OPENBLAS_NUM_THREADS is set
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from common import TinyGPT  # noqa: E402, I001

import argparse  # noqa: E402
import cProfile  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from tape import optim  # noqa: E402

VOCAB, D_MODEL, LAYERS, HEADS, MLP, SEQ, BATCH = 16, 64, 2, 4, 256, 32, 16


def minitape_step_fn(rng):
    model = TinyGPT(VOCAB, SEQ, d_model=D_MODEL, num_heads=HEADS, num_layers=LAYERS, mlp_hidden=MLP,
                    rng=np.random.default_rng(0))
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    tokens = rng.integers(0, VOCAB, size=(BATCH, SEQ + 1))

    def step():
        loss = model.loss(tokens[:, :-1], tokens[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()
    return step


def torch_step_fn(rng):
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
            self.qkv, self.out = nn.Linear(D_MODEL, 3 * D_MODEL), nn.Linear(D_MODEL, D_MODEL)
            self.mlp = nn.Sequential(nn.Linear(D_MODEL, MLP), nn.GELU(), nn.Linear(MLP, D_MODEL))

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, n, 3 * HEADS, -1).transpose(1, 2).split(HEADS, dim=1)
            heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.out(heads.transpose(1, 2).reshape(b, n, D_MODEL))
            return x + self.mlp(self.norm2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(VOCAB, D_MODEL), nn.Embedding(SEQ, D_MODEL)
            self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])
            self.norm, self.head = nn.LayerNorm(D_MODEL), nn.Linear(D_MODEL, VOCAB)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            return self.head(self.norm(self.blocks(x)))

    torch.manual_seed(0)
    model = GPT()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    tokens = torch.tensor(rng.integers(0, VOCAB, size=(BATCH, SEQ + 1)))
    inputs, targets = tokens[:, :-1], tokens[:, 1:].reshape(-1)

    def step():
        loss = F.cross_entropy(model(inputs).reshape(-1, VOCAB), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()
    return step


def time_steps(step, n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds")
    parser.add_argument("--steps", type=int, default=20, help="steps per framework per round")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top entries for minitape")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    ours = minitape_step_fn(rng)
    results = {"minitape": []}
    try:
        import torch

        torch.set_num_threads(args.threads)
        theirs = torch_step_fn(rng)
        results["torch"] = []
    except ImportError:
        theirs = None
        print("torch is not installed: timing minitape only")
    for _ in range(3):  # warm up
        ours()
        if theirs:
            theirs()
    for _ in range(args.rounds):
        results["minitape"] += time_steps(ours, args.steps)
        if theirs:
            results["torch"] += time_steps(theirs, args.steps)

    medians = {name: statistics.median(times) * 1e3 for name, times in results.items()}
    print(f"numpy BLAS threads: OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}; "
          f"torch threads: {args.threads}")
    print(f"tiny GPT train step (vocab {VOCAB}, d_model {D_MODEL}, {LAYERS} layers, {HEADS} heads, MLP {MLP}, "
          f"seq {SEQ}, batch {BATCH}, causal, Adam, float32), median of {args.rounds * args.steps} steps:")
    for name, ms in medians.items():
        print(f"  {name:<9} {ms:7.2f} ms/step")
    if theirs:
        medians["ratio"] = medians["minitape"] / medians["torch"]
        print(f"  ratio minitape / torch: {medians['ratio']:.2f}")

    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(50):
            ours()
        profiler.disable()
        print("\ncProfile of 50 minitape steps (top 25 by internal time):")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    return medians


if __name__ == "__main__":
    main()
