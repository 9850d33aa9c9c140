"""Teach a small causal transformer to reverse a sequence of letters.

Each training example is ``x1 .. xn SEP xn .. x1`` (by default 12 letters drawn from a-z): the model
reads the letters and the separator, and learns to emit the letters in reverse order, one token at a
time. The loss covers only the reversed part. Held-out sequences are then decoded greedily (the
model's own predictions are fed back in), and we report the accuracy of the generated tokens.

    python examples/reverse.py                 # default run: >= 99% held-out token accuracy
    python examples/reverse.py --steps 50 --graph block.svg --save reverse.npz
    python examples/reverse.py --report run.html   # the training report: curves, gradient flow, attention
    mpiexec -n 2 python examples/reverse.py --distributed   # data-parallel on 2 MPI ranks, the same global batch
"""

from __future__ import annotations

import time

import common  # first: it sets up numpy's threads (see common.py)
import numpy as np

import tape
from tape import nn, optim

IGNORE = -100  # cross_entropy's ignore_index: positions that carry no loss


def make_batch(rng, batch: int, length: int, letters: int):
    """Random letter sequences, the model input ``x SEP reversed(x)[:-1]`` and its targets."""
    sep = letters  # the separator is the token after the letters
    x = rng.integers(0, letters, size=(batch, length))
    full = np.concatenate([x, np.full((batch, 1), sep), x[:, ::-1]], axis=1)
    inputs, targets = full[:, :-1], full[:, 1:].copy()
    targets[:, :length] = IGNORE  # no loss on predicting the input letters or the separator
    return x, inputs, targets


def reverse_greedily(model, x, letters: int):
    """Feed ``x SEP`` and let the model write ``len(x)`` tokens, each one fed back in."""
    sequence = np.concatenate([x, np.full((len(x), 1), letters)], axis=1)
    with tape.no_grad():
        for _ in range(x.shape[1]):
            logits = model(sequence)
            next_token = np.argmax(logits.numpy()[:, -1], axis=-1)
            sequence = np.concatenate([sequence, next_token[:, None]], axis=1)
    return sequence[:, x.shape[1] + 1:]


def spell(tokens, letters: int) -> str:
    """Tokens as text: 0 -> a, 1 -> b, ...; the separator as SEP."""
    return " ".join("SEP" if t == letters else chr(ord("a") + t) if t < 26 else f"<{t}>" for t in tokens)


def teacher_forced_accuracy(model, x, letters: int) -> float:
    """Token accuracy of the reversed half when the model is fed the true prefix (one forward pass)."""
    length = x.shape[1]
    full = np.concatenate([x, np.full((len(x), 1), letters), x[:, ::-1]], axis=1)
    with tape.no_grad():
        logits = model(full[:, :-1]).numpy()
    return float(np.mean(np.argmax(logits[:, length:], axis=-1) == full[:, length + 1:]))


class Report:
    """``--report``: a ``tape.report.Recorder`` with this task's fixed inputs and accuracy, and its cost."""

    def __init__(self, model, held_out, args):
        self.model, self.letters, self.accuracy_every = model, args.letters, max(1, args.steps // 20)
        self.probe = held_out[:32]  # the teacher-forced accuracy of these, every accuracy_every steps
        fixed = held_out[:2]
        attention_inputs = np.concatenate([fixed, np.full((2, 1), args.letters), fixed[:, ::-1]], axis=1)[:, :-1]
        steps = sorted({0, args.steps // 20, args.steps // 5, args.steps // 2, args.steps})
        self.recorder = tape.report.Recorder(
            model, title=f"reverse {args.length} letters: training report", graph_step=1,
            attention_inputs=attention_inputs, attention_steps=steps,
            accuracy_label=f"probe: token accuracy of {len(self.probe)} held-out sequences, teacher-forced")
        self.seconds = 0.0  # the accuracy probes' share of the cost (the recorder times its own)

    def step(self, step: int, loss: float) -> None:
        accuracy = None
        if step % self.accuracy_every == 0 or step == 1:
            start = time.perf_counter()
            accuracy = teacher_forced_accuracy(self.model, self.probe, self.letters)
            self.seconds += time.perf_counter() - start
        self.recorder.step(step, loss, accuracy)

    def write(self, path: str, training_seconds: float) -> None:
        self.recorder.write(path)
        cost = self.seconds + self.recorder.seconds
        train_only = training_seconds - (cost - self.recorder.write_seconds)
        print(f"training report written to {path}: it cost {cost:.2f} s, {cost / train_only:.1%} of the "
              f"{train_only:.1f} s of training without it")


def exported(state: dict):
    """``python -m tape export examples/reverse.py CHECKPOINT``: the model to load ``state`` into, example inputs,
    input and output names."""
    return common.tinygpt_for_export(state)


def main(argv=None) -> dict:
    parser = common.example_parser(__doc__.splitlines()[0], steps=400)
    parser.add_argument("--length", type=common.count(), default=12, help="letters per sequence")
    parser.add_argument("--letters", type=common.count(2), default=26, help="alphabet size (a, b, c, ...)")
    parser.add_argument("--batch", type=common.count(), default=64, help="sequences per training step")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak AdamW learning rate (warmup, then cosine decay)")
    parser.add_argument("--eval-size", type=common.count(), default=1000, help="held-out sequences")
    parser.add_argument("--report", metavar="HTML", help="write a training report (one self-contained HTML file): "
                        "loss/accuracy, gradient norms, the gradient-flow DAG, attention maps, op coverage")
    parser.add_argument("--distributed", action="store_true", help="data-parallel over the MPI ranks of `mpiexec -n N` "
                        "(tape.distributed): each rank trains on its 1/N of every batch; rank 0 prints and saves")
    args = common.parse_args(parser, argv)
    if args.distributed and args.report:
        parser.error("--report records one process's training; it cannot be combined with --distributed")
    rank0 = True
    if args.distributed:
        tape.distributed.init()
        rank0 = tape.distributed.rank() == 0
        args.quiet = args.quiet or not rank0

    rng = np.random.default_rng(args.seed)
    nn.manual_seed(args.seed)
    model = common.TinyGPT(vocab_size=args.letters + 1, context=2 * args.length, d_model=64, num_heads=4, num_layers=2)
    if args.distributed:
        tape.distributed.broadcast_parameters(model)
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = optim.WarmupCosineLR(optimizer, warmup_steps=min(100, args.steps // 10), total_steps=args.steps)
    if rank0:
        ranks = f" on {tape.distributed.world_size()} MPI ranks" if args.distributed else ""
        print(f"model: {model.num_parameters():,} parameters; task: reverse {args.length} letters out of "
              f"{args.letters}{ranks}")

    held_out = rng.integers(0, args.letters, size=(args.eval_size, args.length))
    held_out_set = {row.tobytes() for row in held_out}

    losses = []
    bar = common.ProgressBar(args.steps, enabled=not args.quiet)
    report = Report(model, held_out, args) if args.report else None
    train = common.Trainer(model.loss, model, optimizer, schedule, compiled=args.compile,
                           on_gradients=report.recorder.gradients if report else None, distributed=args.distributed)
    for step in range(1, args.steps + 1):
        x, inputs, targets = make_batch(rng, args.batch + 8, args.length, args.letters)
        seen = np.array([row.tobytes() not in held_out_set for row in x])  # never train on a held-out sequence
        keep = np.flatnonzero(seen)[:args.batch]  # a fixed batch size: the compiled step replays one plan
        if report:
            report.recorder.graph(step, model.loss, inputs[keep], targets[keep])
        batch = inputs[keep], targets[keep]  # every rank draws the same global batch and trains on its shard
        losses.append(train(*tape.distributed.shard(*batch) if args.distributed else batch))
        if report:
            report.step(step, losses[-1])
        bar.update(step, losses[-1], batch[0].size)  # the sequences trained on, not the 8 spare ones drawn
    seconds = bar.close()
    if args.save:
        common.save_checkpoint(model, args.save, distributed=args.distributed)
    if not rank0:  # the ranks hold the same parameters: rank 0 evaluates
        return {"losses": losses, "seconds": seconds}

    model.eval()
    predicted = reverse_greedily(model, held_out, args.letters)
    expected = held_out[:, ::-1]
    token_accuracy = float(np.mean(predicted == expected))
    sequence_accuracy = float(np.mean(np.all(predicted == expected, axis=1)))
    for row, out in zip(held_out[:3], predicted[:3]):
        print(f"  {spell(row, args.letters)} SEP -> {spell(out, args.letters)}")
    print(f"final training loss {np.mean(losses[-20:]):.4f}; held-out ({args.eval_size} sequences, greedy decoding): "
          f"token accuracy {token_accuracy:.2%}, sequence accuracy {sequence_accuracy:.2%}; "
          f"training took {seconds:.1f} s")

    if report:
        report.write(args.report, seconds)
    if args.plot:
        common.plot_losses(losses, args.plot, "reverse: training loss")
    if args.graph:
        x = model.token_embedding(held_out[:1])
        common.render_block_graph(model.blocks[0], x, args.graph, model=model)
    return {"losses": losses, "token_accuracy": token_accuracy, "sequence_accuracy": sequence_accuracy,
            "seconds": seconds}


if __name__ == "__main__":
    main()
