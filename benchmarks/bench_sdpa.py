"""Scaled dot-product attention, forward + backward (gradients of q, k and v), float32.

Cases: B x H x L x D = 1x8x1024x64 and 1x4x4096x64 (L = S), causal and not (``--quick``: 1x2x256x32).
A step clears the leaves' gradients, runs ``ops.scaled_dot_product_attention`` (minitape's public API) or
``torch.nn.functional.scaled_dot_product_attention`` (torch's default CPU kernel) and the backward with a
fixed upstream gradient. Inputs are built once per child, outside the timed steps.

Also reported:
- GFLOP/s (FLOPs: forward 4*B*H*L*S*D + backward 10*B*H*L*S*D, halved when causal) and the fraction of the
  same side's GEMM peak (the 2048^3 GEMM of bench_gemm.py, which this script runs too);
- the extra peak memory of one forward+backward, measured in each child before its timed steps: the
  resident-set high-water mark is reset (/proc/self/clear_refs) after a tiny warm-up problem, and
  VmHWM - VmRSS(before) of one step on the real inputs is the extra peak RSS -- the same measure for both
  sides -- plus, for minitape, tracemalloc's peak (numpy's allocations) for a second, fresh step.

Each side runs in its own child process, alternating rounds, with equal thread settings;
benchmarks/_harness.py does the timing and the statistics (median of all timed steps; spread =
lowest-highest per-round median). OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, if set, can slow numpy's BLAS:
the harness warns about them and the report lists them.

Run: python benchmarks/bench_sdpa.py [--rounds 3] [--reps N] [--quick] [--only 4096]
"""

import _harness
import bench_gemm
import numpy as np

FULL_SHAPES = [(1, 8, 1024, 64), (1, 4, 4096, 64)]
QUICK_SHAPES = [(1, 2, 256, 32)]


def build(shape, causal, framework):
    rng = np.random.default_rng(0)
    q, k, v, upstream = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
    if framework == "minitape":
        import ops
        import tape

        sdpa = ops.scaled_dot_product_attention
        leaves = [tape.tensor(a, requires_grad=True) for a in (q, k, v)]
    else:
        import torch

        sdpa = torch.nn.functional.scaled_dot_product_attention
        # torch.tensor copies into torch's own 64-byte aligned memory: torch.from_numpy would hand it numpy's
        # 16-byte aligned buffers, on which its kernels run slower (its 2048^3 GEMM 1.5x slower here)
        leaves = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
        upstream = torch.tensor(upstream)

    def step():
        for leaf in leaves:
            leaf.grad = None
        sdpa(*leaves, is_causal=causal).backward(upstream)
    return step


def sdpa_flops(shape, causal):
    B, H, L, D = shape
    total = (4 + 10) * B * H * L * L * D
    return total / 2 if causal else total


def workloads(quick=False):
    cases = []
    for shape in QUICK_SHAPES if quick else FULL_SHAPES:
        large = shape[2] >= 4096
        for causal in (False, True):
            text = "x".join(map(str, shape))
            cases.append(_harness.Workload(
                f"sdpa-{text}" + ("-causal" if causal else ""),
                f"SDPA fwd+bwd {text}" + (" causal" if causal else ""),
                lambda framework, shape=shape, causal=causal: build(shape, causal, framework),
                reps=5 if large else 15, warmup=1 if large else 2, flops=sdpa_flops(shape, causal),
                peak=bench_gemm.PEAK,
                memory_warmup=lambda framework, d=shape[-1], causal=causal: build((1, 1, 64, d), causal, framework)))
    return [bench_gemm.workload(bench_gemm.PEAK)] + cases


if __name__ == "__main__":
    _harness.main(__file__, workloads, __doc__)
