"""Per-op engine overhead: a 200-op elementwise chain on a 4x4 float32 tensor, forward + backward.

The chain repeats ``tanh(y * 1.01 + 0.1)`` then ``y * y`` (4 ops) 50 times, sums, and runs the backward
from the scalar; a step also creates the leaf. At 4x4 the arithmetic is negligible, so the time per op
measures what the engine itself costs per recorded op (the node, the output tensor, the rule, the
accumulation). The figure is one step's time divided by 200, in µs per op.

minitape (public API: ``tape.tensor``, ``ops.*``, ``Tensor.backward``) and torch run the same chain, each in
its own child process, alternating rounds, with equal thread settings; benchmarks/_harness.py does the
timing and the statistics (median of all timed steps; spread = lowest-highest per-round median).

The second workload is the floor under any engine: the same chain's forward and its hand-written backward as
straight-line array code with no autodiff (numpy in the minitape child, torch tensors without autograd in the
torch child) -- what a compiled plan that did nothing but call the kernels would cost.

Run: python benchmarks/bench_overhead.py [--rounds 3] [--reps N] [--quick] [--profile]
"""

import _harness
import numpy as np

N_OPS = 200


def chain(lib, x, n_ops=N_OPS):
    """``n_ops`` elementwise ops through ``lib`` (the ``ops`` module or ``torch``: the same names)."""
    y = x
    for _ in range(n_ops // 4):
        y = lib.tanh(lib.add(lib.mul(y, 1.01), 0.1))
        y = lib.mul(y, y)
    return y.sum()


def build(framework, compiled: bool = False, backend: str = "numpy"):
    """The chain's step; ``compiled`` (minitape) records it once with ``tape.compile`` (on ``backend``) and replays
    the plan."""
    data = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    if framework == "minitape":
        import ops
        import tape

        compiled_step = tape.compile(lambda x: chain(ops, x), backend=backend) if compiled else None

        def step():
            if compiled_step is None:
                chain(ops, tape.tensor(data, requires_grad=True)).backward()
            else:
                compiled_step(tape.tensor(data, requires_grad=True))
    else:
        import torch

        source = torch.tensor(data)

        def step():
            chain(torch, source.clone().requires_grad_(True)).backward()
    return step


def floor(lib, x, n_ops=N_OPS):
    """The chain's forward and backward by hand through ``lib`` (numpy or torch): the kernels' calls alone."""
    y, saved = x, []
    for _ in range(n_ops // 4):
        t = lib.tanh(y * 1.01 + 0.1)
        saved.append(t)
        y = t * t
    loss, g = y.sum(), lib.ones_like(y)
    for t in reversed(saved):
        g = g * (t + t) * (1 - t * t) * 1.01  # d(t*t), tanh', the multiply by 1.01
    return loss, g


def build_floor(framework):
    data = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    if framework == "minitape":
        return lambda: floor(np, data.copy())
    import torch

    source = torch.tensor(data)
    return lambda: floor(torch, source.clone())


def workloads(quick=False):
    return [_harness.Workload("overhead-chain200", f"eager {N_OPS}-op elementwise chain on 4x4, fwd+bwd", build,
                              reps=200, warmup=20, per=N_OPS, unit="µs/op"),
            _harness.Workload("floor-chain200", "the same chain's fwd + hand-written bwd, no autodiff", build_floor,
                              reps=200, warmup=20, per=N_OPS, unit="µs/op", minitape_is="numpy")]


if __name__ == "__main__":
    _harness.main(__file__, workloads, __doc__)
