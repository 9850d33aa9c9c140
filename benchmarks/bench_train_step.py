"""One training step of the same tiny GPT in minitape and in PyTorch.

Model: vocab 16, d_model 64, 2 pre-norm layers (LayerNorm, causal 4-head self-attention with one fused qkv
projection, GELU MLP of 256), final LayerNorm and linear head, float32; batch 16 x 32 tokens; Adam (lr 1e-3).
A step is forward + mean cross-entropy of the next-token logits + zero_grad + backward + optimizer update
(+ ``loss.item()``). The minitape model uses only the public API (``tape.nn``, ``tape.optim``, ``ops.*``,
``Tensor.backward``); the torch model is the same architecture in ``torch.nn``. The second workload runs the
same step after ``tape.keep_freed_memory()`` (the documented opt-in that stops the large temporaries' page
faults) in both processes.

Each side runs in its own child process, alternating rounds, with equal thread settings;
benchmarks/_harness.py does the timing and the statistics (median of all timed steps; spread =
lowest-highest per-round median).

Run: python benchmarks/bench_train_step.py [--rounds 3] [--reps N] [--quick]
     python benchmarks/bench_train_step.py --profile     # cProfile's top entries for minitape's step
"""

import _harness
import numpy as np

VOCAB, D_MODEL, LAYERS, HEADS, MLP, SEQ, BATCH = 16, 64, 2, 4, 256, 32, 16


def minitape_parts():
    """(the tiny GPT, its inputs, its targets, loss_fn(inputs, targets)) as minitape builds them."""
    import ops
    from tape import nn

    class TinyGPT(nn.Module):
        def __init__(self, rng):
            super().__init__()
            self.tok, self.pos = nn.Embedding(VOCAB, D_MODEL, rng=rng), nn.Embedding(SEQ, D_MODEL, rng=rng)
            self.blocks = nn.Sequential(*[nn.TransformerBlock(D_MODEL, HEADS, MLP, causal=True, rng=rng)
                                          for _ in range(LAYERS)])
            self.norm, self.head = nn.LayerNorm(D_MODEL), nn.Linear(D_MODEL, VOCAB, rng=rng)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(np.arange(idx.shape[1]))
            return self.head(self.norm(self.blocks(x)))

    model = TinyGPT(np.random.default_rng(0))
    tokens = np.random.default_rng(1).integers(0, VOCAB, size=(BATCH, SEQ + 1))
    inputs, targets = tokens[:, :-1], tokens[:, 1:].reshape(-1)

    def loss_fn(inputs, targets):
        return ops.cross_entropy(ops.reshape(model(inputs), (-1, VOCAB)), targets)

    return model, inputs, targets, loss_fn


def minitape_step(compiled: bool = False, backend: str = "numpy"):
    """The minitape step; ``compiled`` records it once with ``tape.compile`` (on ``backend``) and replays the plan."""
    import tape
    from tape import optim

    model, inputs, targets, loss_fn = minitape_parts()
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    compiled_step = tape.compile(loss_fn, model.parameters(), backend=backend) if compiled else None

    def step():
        optimizer.zero_grad()
        if compiled_step is None:
            loss = loss_fn(inputs, targets)
            loss.backward()
        else:
            loss, _ = compiled_step(inputs, targets)
        optimizer.step()
        return loss.item()
    return step


def torch_step():
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
    tokens = torch.tensor(np.random.default_rng(1).integers(0, VOCAB, size=(BATCH, SEQ + 1)))
    inputs, targets = tokens[:, :-1], tokens[:, 1:].reshape(-1)

    def step():
        loss = F.cross_entropy(model(inputs).reshape(-1, VOCAB), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()
    return step


def workloads(quick=False):
    label = (f"tiny GPT train step (vocab {VOCAB}, d {D_MODEL}, {LAYERS} layers, {HEADS} heads, seq {SEQ}, "
             f"batch {BATCH}, Adam)")
    build = lambda framework: minitape_step() if framework == "minitape" else torch_step()
    return [_harness.Workload("train-step-gpt", label, build, reps=60, warmup=5),
            _harness.Workload("train-step-gpt-kept", "same, both processes after tape.keep_freed_memory()",
                              _kept(build), reps=60, warmup=5)]


def _kept(build):
    """``build`` in a process whose malloc keeps freed memory (the documented opt-in; torch's CPU allocator is
    malloc too, so both sides take it)."""
    def kept_build(framework):
        from tape.memory import keep_freed_memory

        keep_freed_memory()
        return build(framework)
    return kept_build


if __name__ == "__main__":
    _harness.main(__file__, workloads, __doc__)
