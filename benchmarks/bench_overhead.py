"""Per-op engine overhead: a 200-op elementwise chain on a 4x4 tensor, forward + backward.

minitape and torch run side by side in one process; the figure is the median wall time of one
forward+backward divided by the number of ops. At 4x4 the arithmetic is negligible, so this measures
what the engine itself costs per recorded op (creating the node, the output tensor, calling the rule,
accumulating). Run: python benchmarks/bench_overhead.py [--ops 200] [--repeats 200]
"""

import argparse
import statistics
import time

import numpy as np

import ops
import tape


def chain_minitape(x, n_ops):
    y = x
    for _ in range(n_ops // 4):
        y = ops.tanh(ops.add(ops.mul(y, 1.01), 0.1))
        y = ops.mul(y, y)
    return y.sum()


def chain_torch(torch, x, n_ops):
    y = x
    for _ in range(n_ops // 4):
        y = torch.tanh(torch.add(torch.mul(y, 1.01), 0.1))
        y = torch.mul(y, y)
    return y.sum()


def median_time(fn, repeats):
    for _ in range(5):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=200, help="ops in the chain (a multiple of 4)")
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args(argv)
    data = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)

    def run_minitape():
        x = tape.tensor(data, requires_grad=True)
        chain_minitape(x, args.ops).backward()

    ours = median_time(run_minitape, args.repeats)
    print(f"{'engine':<10} {'per op (us)':>12} {'total (ms)':>11}")
    print(f"{'minitape':<10} {ours / args.ops * 1e6:>12.2f} {ours * 1e3:>11.3f}")
    try:
        import torch
    except ImportError:
        print("torch not installed: no side-by-side figure")
        return
    torch.set_num_threads(2)
    tdata = torch.from_numpy(data)

    def run_torch():
        x = tdata.clone().requires_grad_(True)
        chain_torch(torch, x, args.ops).backward()

    theirs = median_time(run_torch, args.repeats)
    print(f"{'torch':<10} {theirs / args.ops * 1e6:>12.2f} {theirs * 1e3:>11.3f}")
    print(f"ratio minitape/torch: {ours / theirs:.2f}")


if __name__ == "__main__":
    main()
