"""A tiny character-level language model trained on the first chapter of Alice's Adventures in Wonderland.

The text (public domain, shipped in examples/data/) is split 90% / 10% into training and validation
parts. The model is a small causal transformer predicting each next character from up to 64 previous
ones. We report the validation loss next to the unigram baseline (predicting every character from its
frequency alone, which is what a model that ignores the context could at best do), then print samples.

    python examples/char_lm.py
    python examples/char_lm.py --steps 100 --prompt "Alice " --save char_lm.npz
"""

from __future__ import annotations

import os

import common  # first: it sets up numpy's threads (see common.py)
import numpy as np

import tape
from tape import nn, optim

TEXT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "alice_chapter1.txt")


def unigram_loss(train_ids, valid_ids, vocab_size: int) -> float:
    """Cross-entropy (nats/char) on the validation text of the training text's character frequencies
    (add-one smoothed, so a character unseen in training does not cost infinity)."""
    counts = np.bincount(train_ids, minlength=vocab_size) + 1.0
    return float(-np.mean(np.log(counts / counts.sum())[valid_ids]))


def evaluate(model, ids, context: int) -> float:
    """Mean next-character loss over ``ids``, cut into consecutive windows of the model's context."""
    usable = (len(ids) - 1) // context * context
    inputs = ids[:usable].reshape(-1, context)
    targets = ids[1:usable + 1].reshape(-1, context)
    with tape.no_grad():
        return model.loss(inputs, targets).item()


def generate(model, prompt_ids, length: int, rng, temperature: float = 0.8):
    """Sample ``length`` characters after the prompt, one at a time."""
    ids = list(prompt_ids)
    with tape.no_grad():
        for _ in range(length):
            window = np.array(ids[-model.context:])[None]
            logits = model(window).numpy()[0, -1] / temperature
            probs = np.exp(logits - logits.max())
            ids.append(int(rng.choice(len(probs), p=probs / probs.sum())))
    return ids


def exported(state: dict):
    """``python -m tape export examples/char_lm.py CHECKPOINT``: the model to load ``state`` into, example inputs,
    input and output names."""
    return common.tinygpt_for_export(state)


def main(argv=None) -> dict:
    parser = common.example_parser(__doc__.splitlines()[0], steps=1000)
    parser.add_argument("--context", type=common.count(), default=64,
                        help="characters the model sees (and learns on) at once")
    parser.add_argument("--batch", type=common.count(), default=32, help="sequences per training step")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak AdamW learning rate (warmup, then cosine decay)")
    parser.add_argument("--dropout", type=float, default=0.1, help="dropout on attention weights and residual branches")
    parser.add_argument("--prompt", default="Alice ", help="text the trained model continues")
    parser.add_argument("--samples", type=common.count(0), default=2, help="generated samples to print")
    args = common.parse_args(parser, argv)

    with open(TEXT, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    ids = np.array([index[c] for c in text])
    split = int(0.9 * len(ids))
    train_ids, valid_ids = ids[:split], ids[split:]
    baseline = unigram_loss(train_ids, valid_ids, len(chars))

    rng = np.random.default_rng(args.seed)
    nn.manual_seed(args.seed)
    model = common.TinyGPT(len(chars), args.context, d_model=64, num_heads=4, num_layers=2, dropout=args.dropout)
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05)
    schedule = optim.WarmupCosineLR(optimizer, warmup_steps=min(100, args.steps // 10), total_steps=args.steps)
    print(f"text: {len(text):,} characters, {len(chars)} distinct; model: {model.num_parameters():,} parameters")

    losses = []
    train = common.Trainer(model.loss, model, optimizer, schedule, compiled=args.compile)
    bar = common.ProgressBar(args.steps, unit="char", enabled=not args.quiet)
    for step in range(1, args.steps + 1):
        starts = rng.integers(0, len(train_ids) - args.context - 1, size=args.batch)
        window = starts[:, None] + np.arange(args.context + 1)
        batch = train_ids[window]
        losses.append(train(batch[:, :-1], batch[:, 1:]))
        bar.update(step, losses[-1], batch[:, 1:].size)
    seconds = bar.close()

    model.eval()
    valid_loss = evaluate(model, valid_ids, args.context)
    print(f"validation loss {valid_loss:.3f} nats/char vs unigram baseline {baseline:.3f} "
          f"(final training loss {np.mean(losses[-20:]):.3f}); training took {seconds:.1f} s")
    sample_rng = np.random.default_rng(args.seed)
    samples = []
    for _ in range(args.samples):
        out = generate(model, [index[c] for c in args.prompt if c in index], 200, sample_rng)
        samples.append("".join(chars[i] for i in out))
        print("--- sample ---\n" + samples[-1])

    if args.save:
        common.save_checkpoint(model, args.save)
    if args.plot:
        common.plot_losses(losses, args.plot, "char_lm: training loss")
    if args.graph:
        x = model.token_embedding(train_ids[None, : args.context])
        common.render_block_graph(model.blocks[0], x, args.graph, model=model)
    return {"losses": losses, "valid_loss": valid_loss, "unigram_loss": baseline, "samples": samples,
            "seconds": seconds}


if __name__ == "__main__":
    main()
