"""Benchmark: minitape's scaled_dot_product_attention against torch's default SDPA, side by side.

Forward + backward (gradients for q, k and v), float32, B x H x L x D in {1x8x1024x64, 1x4x4096x64},
causal and not. Prints per case the median time of each, the ratio minitape / torch (the median of
the per-repetition ratios -- each pair ran back to back, under the same machine load -- and the ratio
of the best times), GFLOP/s
(FLOPs: 4*B*H*L*S*D forward + 10*B*H*L*S*D backward, halved when causal) and the extra peak memory
of one forward+backward above the inputs:

- minitape: tracemalloc's peak (numpy reports its array allocations to tracemalloc), measured in a
  separate untimed run because tracing slows the code down;
- both libraries, the same way: in a fresh subprocess (Linux), after building the inputs, the
  resident-set high-water mark is reset to the current resident set (echo 5 > /proc/self/clear_refs);
  after one forward+backward, VmHWM - VmRSS(before) from /proc/self/status is the extra peak. A small
  warm-up case runs first so that one-time costs (thread pools, lazy initialisation) are not counted. torch's
  CPU allocator reports nothing like tracemalloc, hence the RSS measure for it.

Timing: a warm-up run, then --reps repetitions alternating minitape and torch with a short pause
between them (so neither runs while the other's BLAS / OpenMP threads are still spinning); medians.
These machines are shared and noisy: read the ratios, not the absolute times.
The last lines give minitape's causal / non-causal time (median) per shape.

Run:  python benchmarks/bench_sdpa.py [--quick] [--reps N]
If OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE are set in the environment they can slow numpy's BLAS; run
with them unset:  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_sdpa.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import ops  # noqa: E402
import tape  # noqa: E402

FULL_CASES = [(1, 8, 1024, 64), (1, 4, 4096, 64)]
QUICK_CASES = [(1, 2, 256, 32)]
PAUSE = 0.2  # seconds between switching libraries: lets idle BLAS/OpenMP threads stop spinning
MiB = 2.0**20


def _inputs(shape, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]  # q, k, v, output gradient


def minitape_leaves(arrays):
    """q, k, v leaves and the output gradient, built once (as torch's tensors are) outside the timed steps."""
    return [tape.tensor(a, requires_grad=True) for a in arrays[:3]] + [arrays[3]]


def minitape_step(leaves, causal):
    q, k, v, g = leaves
    for t in (q, k, v):
        t.grad = None
    out = ops.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out.backward(g)
    return q.grad, k.grad, v.grad


def torch_step(torch, tensors, causal):
    q, k, v, g = tensors
    for t in (q, k, v):
        t.grad = None
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out.backward(g)
    return q.grad, k.grad, v.grad


def minitape_peak(leaves, causal) -> float:
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    grads = minitape_step(leaves, causal)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del grads
    return (peak - base) / MiB


def rss_peak(library, shape, causal) -> str:
    """Extra resident-set peak (MiB) of one forward+backward, measured in a fresh subprocess."""
    import subprocess

    args = [sys.executable, os.path.abspath(__file__), "--rss-probe", library, "x".join(map(str, shape)),
            "causal" if causal else "full"]
    result = subprocess.run(args, capture_output=True, text=True, check=True)
    return result.stdout.strip().splitlines()[-1]


def rss_probe(library, shape_text, mode):
    """Run in the subprocess: print the RSS growth of one forward+backward."""
    shape = tuple(int(n) for n in shape_text.split("x"))
    causal = mode == "causal"
    steps = []
    for arrays in (_inputs((1, 1, 64, shape[-1])), _inputs(shape)):  # a small warm-up, then the real case
        if library == "torch":
            import torch

            tensors = [torch.from_numpy(a.copy()).requires_grad_(i < 3) for i, a in enumerate(arrays)]
            steps.append(lambda tensors=tensors: torch_step(torch, tensors, causal))
        else:
            leaves = minitape_leaves(arrays)
            steps.append(lambda leaves=leaves: minitape_step(leaves, causal))
    steps[0]()  # pays the one-time costs (thread pools, lazy initialisation) outside the measurement
    step = steps[1]
    before = _proc_status("VmRSS")
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # reset the high-water mark to the current resident set
    step()
    print(f"{(_proc_status('VmHWM') - before) / MiB:.0f}")


def _proc_status(field) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def flops(B, H, L, D, causal) -> float:
    total = 14 * B * H * L * L * D
    return total / 2 if causal else total


def run(cases, reps):
    import torch

    rows = []
    for shape in cases:
        for causal in (False, True):
            arrays = _inputs(shape)
            tensors = [torch.from_numpy(a.copy()).requires_grad_(i < 3) for i, a in enumerate(arrays)]
            leaves = minitape_leaves(arrays)
            minitape_step(leaves, causal)  # warm-up
            torch_step(torch, tensors, causal)
            ours, theirs = [], []
            for _ in range(reps):
                time.sleep(PAUSE)
                t = time.perf_counter()
                minitape_step(leaves, causal)
                ours.append(time.perf_counter() - t)
                time.sleep(PAUSE)
                t = time.perf_counter()
                torch_step(torch, tensors, causal)
                theirs.append(time.perf_counter() - t)
            ours_t, theirs_t = statistics.median(ours), statistics.median(theirs)
            rows.append(dict(shape=shape, causal=causal, ours=ours_t, theirs=theirs_t,
                             ratio=statistics.median(a / b for a, b in zip(ours, theirs)),
                             best_ratio=min(ours) / min(theirs),
                             ours_gflops=flops(*shape, causal) / ours_t / 1e9,
                             theirs_gflops=flops(*shape, causal) / theirs_t / 1e9,
                             ours_mem=minitape_peak(leaves, causal), ours_rss=rss_peak("minitape", shape, causal),
                             theirs_rss=rss_peak("torch", shape, causal)))
    return rows


def print_table(rows):
    print("| B x H x L x D | causal | minitape ms | torch ms | ratio (paired median) | ratio (best) "
          "| minitape GFLOP/s | torch GFLOP/s "
          "| minitape extra peak MiB (tracemalloc) | minitape extra peak MiB (RSS) | torch extra peak MiB (RSS) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {'x'.join(map(str, r['shape']))} | {'yes' if r['causal'] else 'no'} | {r['ours'] * 1e3:.1f} | "
              f"{r['theirs'] * 1e3:.1f} | {r['ratio']:.2f} | {r['best_ratio']:.2f} | {r['ours_gflops']:.0f} | "
              f"{r['theirs_gflops']:.0f} | {r['ours_mem']:.1f} | {r['ours_rss']} | {r['theirs_rss']} |")
    by_shape = {}
    for r in rows:
        by_shape.setdefault(r["shape"], {})[r["causal"]] = r["ours"]
    for shape, t in by_shape.items():
        if True in t and False in t:
            print(f"minitape causal / non-causal time at {'x'.join(map(str, shape))}: {t[True] / t[False]:.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small case, a smoke run")
    parser.add_argument("--reps", type=int, default=None, help="timed repetitions per case (default 7, quick 3)")
    parser.add_argument("--rss-probe", nargs=3, metavar=("LIBRARY", "BxHxLxD", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_probe:
        rss_probe(*args.rss_probe)
        return
    reps = args.reps or (3 if args.quick else 7)
    for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if name in os.environ:
            print(f"warning: {name}={os.environ[name]} is set and may slow numpy's BLAS; rerun with "
                  f"env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE", file=sys.stderr)
    import torch

    print(f"numpy {np.__version__}, torch {torch.__version__} ({torch.get_num_threads()} threads), float32, "
          f"forward+backward, median of {reps}")
    print_table(run(QUICK_CASES if args.quick else FULL_CASES, reps))


if __name__ == "__main__":
    main()
