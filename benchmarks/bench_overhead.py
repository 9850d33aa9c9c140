"""Per-op engine overhead: a 200-op elementwise chain on a 4x4 float32 tensor, forward + backward.

The chain repeats ``tanh(y * 1.01 + 0.1)`` then ``y * y`` (4 ops) 50 times, sums, and runs the backward
from the scalar; a step also creates the leaf. At 4x4 the arithmetic is negligible, so the time per op
measures what the engine itself costs per recorded op (the node, the output tensor, the rule, the
accumulation). The figure is one step's time divided by 200, in µs per op.

minitape (public API: ``tape.tensor``, ``ops.*``, ``Tensor.backward``) and torch run the same chain, each in
its own child process, alternating rounds, with equal thread settings; benchmarks/_harness.py does the
timing and the statistics (median of all timed steps; spread = lowest-highest per-round median).

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


def build(framework, compiled: bool = False):
    """The chain's step; ``compiled`` (minitape) records it once with ``tape.compile`` and replays the plan."""
    data = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    if framework == "minitape":
        import ops
        import tape

        compiled_step = tape.compile(lambda x: chain(ops, x)) if compiled else None

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


def workloads(quick=False):
    return [_harness.Workload("overhead-chain200", f"eager {N_OPS}-op elementwise chain on 4x4, fwd+bwd", build,
                              reps=200, warmup=20, per=N_OPS, unit="µs/op")]


if __name__ == "__main__":
    _harness.main(__file__, workloads, __doc__)
