"""GEMM reference: float32 matrix-multiply GFLOP/s of numpy (minitape's BLAS) and of torch.

Shapes: 2048x2048 @ 2048x2048 (the machine's GEMM peak), one attention tile (256x64) @ (64x1024), and the
batched attention product (8,1024,64) @ (8,64,1024). A step is one product written into a preallocated
output (``np.matmul(a, b, out=c)`` / ``torch.matmul(a, b, out=c)``): no autograd and no allocation, so
this is the BLAS alone. FLOPs: 2*M*N*K per product. The ``gemm-matmul-*`` rows are the three products of
bench_ops.py's matmul rows' forward+backward (``a @ b``, ``g @ b^T``, ``a^T @ g`` over the batch), the reference
for "matmul within the numpy-vs-torch GEMM ratio". bench_sdpa.py divides SDPA's GFLOP/s by the 2048^3
figure of the same side ("fraction of GEMM peak").

Each side runs in its own child process, alternating rounds, with equal thread settings;
benchmarks/_harness.py does the timing and the statistics (median of all timed steps; spread =
lowest-highest per-round median).

Run: python benchmarks/bench_gemm.py [--rounds 3] [--reps N] [--quick] [--only gemm-2048]
"""

import _harness
import numpy as np

SHAPES = {  # name: (label, shape of a, shape of b, timed steps per child)
    "gemm-2048": ("GEMM 2048x2048 @ 2048x2048", (2048, 2048), (2048, 2048), 10),
    "gemm-tile": ("GEMM tile 256x64 @ 64x1024", (256, 64), (64, 1024), 200),
    "gemm-batched": ("GEMM batched (8,1024,64) @ (8,64,1024)", (8, 1024, 64), (8, 64, 1024), 30),
    "gemm-matmul-512": ("GEMM 512x512 @ 512x512, fwd+bwd's three products", (512, 512), (512, 512), 20),
    "gemm-matmul-batched": ("GEMM 32x128x64 @ 64x128, fwd+bwd's three products", (32, 128, 64), (64, 128), 20),
}
PEAK = "gemm-2048"


def build(name, framework):
    _, a_shape, b_shape, _ = SHAPES[name]
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in (a_shape, b_shape))
    out_shape = a.shape[:-1] + b.shape[-1:]
    g = rng.standard_normal(out_shape).astype(np.float32)
    if framework == "torch":
        import torch as lib

        # torch's own (64-byte aligned) memory: on numpy's 16-byte aligned buffers (torch.from_numpy) torch's
        # GEMM ran 1.5x slower here
        a, b, g, c, ga, gb = (lib.tensor(x) for x in (a, b, g, np.empty(out_shape, np.float32), a, b))
        transposed = lambda x: x.transpose(-1, -2)  # noqa: E731
    else:
        lib, c, ga, gb = np, np.empty(out_shape, np.float32), np.empty_like(a), np.empty_like(b)
        transposed = lambda x: x.swapaxes(-1, -2)  # noqa: E731
    if not name.startswith("gemm-matmul"):
        return lambda: lib.matmul(a, b, out=c)
    rows_a, rows_g = a.reshape(-1, a.shape[-1]), g.reshape(-1, g.shape[-1])

    def three_products():
        lib.matmul(a, b, out=c)
        lib.matmul(g, transposed(b), out=ga)
        lib.matmul(transposed(rows_a), rows_g, out=gb)
    return three_products


def gemm_flops(a_shape, b_shape, products=1):
    return 2.0 * np.prod(a_shape) * b_shape[-1] * products


def workload(name):
    label, a_shape, b_shape, reps = SHAPES[name]
    products = 3 if name.startswith("gemm-matmul") else 1
    return _harness.Workload(name, label, lambda framework: build(name, framework), reps=reps,
                             warmup=max(2, reps // 10), flops=gemm_flops(a_shape, b_shape, products), peak=PEAK,
                             minitape_is="numpy")


def workloads(quick=False):
    return [workload(name) for name in SHAPES]


if __name__ == "__main__":
    _harness.main(__file__, workloads, __doc__)
