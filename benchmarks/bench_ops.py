"""Op library speed: matmul, softmax, log_softmax, layer_norm, rms_norm, conv2d, cross_entropy and gelu (exact and
tanh), at general shapes and at the tiny GPT's (``-gpt``), forward + backward, float32.

Each step builds the graph from leaf tensors that require grad (made once, outside the timed step; their
gradients are cleared at the start of each step) and runs the backward with a fixed upstream gradient
(or from the scalar loss), so it times one forward and one backward of the op.

minitape (public API: ``tape.tensor``, ``ops.*``, ``Tensor.backward``) and torch (``torch.*`` /
``torch.nn.functional``) each run in their own child process, alternating rounds, with equal thread
settings; benchmarks/_harness.py does the timing and the statistics (median of all timed steps;
spread = lowest-highest per-round median).

Run: python benchmarks/bench_ops.py [--rounds 3] [--reps N] [--quick] [--only conv2d,softmax] [--threads N]
"""

import _harness
import numpy as np

CASES = {  # name: (label, input shapes (all require grad), fn(lib, functional, *inputs, *extra), extra)
    "matmul-512": ("matmul 512x512 @ 512x512", [(512, 512), (512, 512)], lambda T, F, a, b: T.matmul(a, b)),
    "matmul-batched": ("matmul 32x128x64 @ 64x128", [(32, 128, 64), (64, 128)], lambda T, F, a, b: T.matmul(a, b)),
    "softmax": ("softmax 64x1024 (dim -1)", [(64, 1024)], lambda T, F, x: T.softmax(x, dim=-1)),
    "layer_norm": ("layer_norm 4096x512 (affine)", [(4096, 512), (512,), (512,)],
                   lambda T, F, x, w, b: F.layer_norm(x, (512,), w, b)),
    "conv2d": ("conv2d 8x32x32x32 -> 64, 3x3, pad 1", [(8, 32, 32, 32), (64, 32, 3, 3), (64,)],
               lambda T, F, x, w, b: F.conv2d(x, w, b, padding=1)),
    "cross_entropy": ("cross_entropy 4096x1000 (mean)", [(4096, 1000)],
                      lambda T, F, x, targets: F.cross_entropy(x, targets)),
    "log_softmax": ("log_softmax 64x1024 (dim -1)", [(64, 1024)], lambda T, F, x: T.log_softmax(x, dim=-1)),
    "rms_norm": ("rms_norm 4096x512 (weight)", [(4096, 512), (512,)], lambda T, F, x, w: F.rms_norm(x, (512,), w)),
    "gelu": ("gelu 4096x512 (exact)", [(4096, 512)], lambda T, F, x: F.gelu(x)),
    "gelu-tanh": ("gelu 4096x512 (tanh)", [(4096, 512)], lambda T, F, x: F.gelu(x, approximate="tanh")),
    # the tiny GPT's shapes (bench_train_step.py: batch 16, seq 32, d 64, 4 heads, MLP 256, vocab 16)
    "softmax-gpt": ("softmax 16x4x32x32 (dim -1)", [(16, 4, 32, 32)], lambda T, F, x: T.softmax(x, dim=-1)),
    "layer_norm-gpt": ("layer_norm 16x32x64 (affine)", [(16, 32, 64), (64,), (64,)],
                       lambda T, F, x, w, b: F.layer_norm(x, (64,), w, b)),
    "gelu-gpt": ("gelu 16x32x256 (exact)", [(16, 32, 256)], lambda T, F, x: F.gelu(x)),
    "gelu-tanh-gpt": ("gelu 16x32x256 (tanh)", [(16, 32, 256)], lambda T, F, x: F.gelu(x, approximate="tanh")),
    "cross_entropy-gpt": ("cross_entropy 512x16 (mean)", [(512, 16)],
                          lambda T, F, x, targets: F.cross_entropy(x, targets)),
}
TARGETS = {
    "cross_entropy": lambda: [np.random.default_rng(0).integers(0, 1000, size=4096)],
    "cross_entropy-gpt": lambda: [np.random.default_rng(0).integers(0, 16, size=512)],
}


def build(name, framework):
    _, shapes, fn = CASES[name]
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    extra = TARGETS.get(name, list)()
    if framework == "minitape":
        import ops
        import tape

        lib = functional = ops
        leaves = [tape.tensor(a, requires_grad=True) for a in arrays]
    else:
        import torch

        lib, functional = torch, torch.nn.functional
        leaves = [torch.tensor(a, requires_grad=True) for a in arrays]
        extra = [torch.tensor(e) for e in extra]  # copies into torch's own (aligned) memory
    out_shape = tuple(fn(lib, functional, *leaves, *extra).shape)
    upstream = None if out_shape == () else rng.standard_normal(out_shape).astype(np.float32)
    if framework == "torch" and upstream is not None:
        upstream = torch.tensor(upstream)

    def step():
        for leaf in leaves:
            leaf.grad = None
        fn(lib, functional, *leaves, *extra).backward(upstream)
    return step


def workloads(quick=False):
    return [_harness.Workload(f"ops-{name}", label, lambda framework, name=name: build(name, framework), reps=20,
                              warmup=3) for name, (label, _, _) in CASES.items()]


if __name__ == "__main__":
    _harness.main(__file__, workloads, __doc__)
