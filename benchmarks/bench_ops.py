"""Op library speed: minitape against PyTorch (CPU), forward + backward, float32, at realistic sizes.

Both run in one process and alternate repeat by repeat, so a noisy shared machine slows both alike;
the figures are medians, and the ratio (minitape time / torch time) is what to compare across runs.
Each timed call builds the graph from leaf tensors that require grad and runs the backward with a
fixed upstream gradient (or from the scalar loss).
Run: python benchmarks/bench_ops.py [--repeats 15] [--quick] [--only conv2d,softmax] [--threads N]

``--threads N`` gives both libraries N threads (numpy's BLAS through OPENBLAS_NUM_THREADS, set before
numpy loads). On a shared, oversubscribed machine a 2-thread OpenBLAS GEMM can stall for tens of ms
waiting on a descheduled thread; ``--threads 1`` then gives steadier ratios.
"""

import os
import sys


def _requested_threads(argv) -> str | None:
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return None


if _requested_threads(sys.argv) is not None:  # must happen before numpy (and its BLAS) is imported
    os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = _requested_threads(sys.argv)

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import ops  # noqa: E402
import tape  # noqa: E402


def _case(name, shapes, minitape_fn, torch_fn, extra=None):
    """A benchmark: float32 inputs of ``shapes`` (all requiring grad), constant ``extra`` arrays, and
    the two functions computing the same output from (inputs..., extras...)."""
    return dict(name=name, shapes=shapes, minitape=minitape_fn, torch=torch_fn, extra=extra or [])


def cases(torch):
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    targets = rng.integers(0, 1000, size=4096)
    return [
        _case("matmul 512x512 @ 512x512", [(512, 512), (512, 512)], ops.matmul, torch.matmul),
        _case("matmul 32x128x64 @ 64x128", [(32, 128, 64), (64, 128)], ops.matmul, torch.matmul),
        _case("softmax 64x1024 (dim -1)", [(64, 1024)], lambda x: ops.softmax(x, dim=-1),
              lambda x: torch.softmax(x, dim=-1)),
        _case("layer_norm 4096x512 (affine)", [(4096, 512), (512,), (512,)],
              lambda x, w, b: ops.layer_norm(x, (512,), w, b), lambda x, w, b: F.layer_norm(x, (512,), w, b)),
        _case("conv2d 8x32x32x32 -> 64, 3x3, pad 1", [(8, 32, 32, 32), (64, 32, 3, 3), (64,)],
              lambda x, w, b: ops.conv2d(x, w, b, padding=1), lambda x, w, b: F.conv2d(x, w, b, padding=1)),
        _case("cross_entropy 4096x1000 (mean)", [(4096, 1000)], ops.cross_entropy, F.cross_entropy,
              extra=[targets]),
    ]


def _runner(framework, case, torch):
    """A zero-argument function doing one forward + backward of ``case`` in ``framework``."""
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in case["shapes"]]
    if framework == "minitape":
        leaves = [tape.tensor(a, requires_grad=True) for a in arrays]
        extra = case["extra"]
        fn = case["minitape"]
    else:
        leaves = [torch.tensor(a, requires_grad=True) for a in arrays]
        extra = [torch.from_numpy(e) for e in case["extra"]]
        fn = case["torch"]
    out_shape = tuple(fn(*leaves, *extra).shape)
    upstream = None if out_shape == () else rng.standard_normal(out_shape).astype(np.float32)
    if framework == "torch" and upstream is not None:
        upstream = torch.from_numpy(upstream)

    def run():
        for leaf in leaves:
            leaf.grad = None
        out = fn(*leaves, *extra)
        out.backward(upstream)

    return run


def measure(case, torch, repeats, warmup):
    runs = {name: _runner(name, case, torch) for name in ("minitape", "torch")}
    times = {name: [] for name in runs}
    for _ in range(warmup):
        for run in runs.values():
            run()
    for _ in range(repeats):
        for name, run in runs.items():  # alternate, so load spikes hit both
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 repeats, 1 warm-up")
    parser.add_argument("--only", default="", help="comma-separated substrings of case names to run")
    parser.add_argument("--threads", type=int, default=None, help="threads for numpy's BLAS and for torch")
    args = parser.parse_args(argv)
    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)

    repeats, warmup = (2, 1) if args.quick else (args.repeats, 3)
    wanted = [w for w in args.only.split(",") if w]
    print(f"float32, forward+backward, median of {repeats}; torch {torch.__version__} with "
          f"{torch.get_num_threads()} threads, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    print(f"{'case':<38} {'minitape ms':>12} {'torch ms':>10} {'ratio':>7}")
    for case in cases(torch):
        if wanted and not any(w in case["name"] for w in wanted):
            continue
        t = measure(case, torch, repeats, warmup)
        print(f"{case['name']:<38} {t['minitape'] * 1e3:>12.2f} {t['torch'] * 1e3:>10.2f} "
              f"{t['minitape'] / t['torch']:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
