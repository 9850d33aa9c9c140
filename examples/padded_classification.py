"""Classify variable-length sequences batched with padding: is the mean of the digits above 4.5?

Each sequence holds 1 to 32 digits (0-9); a batch zero-pads them at the end to a common length, as
``np.pad`` or torch's ``pad_sequence`` do by default -- so a padded position looks exactly like the
digit 0, and only the lengths say where a sequence ends. A [CLS] token in front collects the answer:
its attention over the sequence can be an average of the digits, but only if the padding is hidden
from it. ``key_padding_lengths`` (the number of valid tokens per row) does exactly that inside
``scaled_dot_product_attention``. With ``--no-padding-mask`` the padding zeros join every average and
the model has to guess the length from the tokens, which costs accuracy.

    python examples/padded_classification.py                    # with the mask
    python examples/padded_classification.py --no-padding-mask  # the same run, attending to padding
"""

from __future__ import annotations

import common  # first: it sets up numpy's threads (see common.py)
import numpy as np

import ops
import tape
from tape import nn, optim

DIGITS = 10
PAD = 0  # zero-padding: the same id as the digit 0
CLS = DIGITS  # the token after the ten digits
VOCAB = DIGITS + 1


def make_batch(rng, batch: int, min_length: int, max_length: int):
    """Padded token rows ``CLS d1 .. dn PAD ..``, their valid lengths (CLS included) and the labels."""
    lengths = rng.integers(min_length, max_length + 1, size=batch)
    digits = rng.integers(0, DIGITS, size=(batch, max_length))
    valid = np.arange(max_length) < lengths[:, None]
    tokens = np.concatenate([np.full((batch, 1), CLS), np.where(valid, digits, PAD)], axis=1)
    labels = (np.sum(digits * valid, axis=1) / lengths > 4.5).astype(np.int64)
    return tokens, lengths + 1, labels


class Encoder(nn.Module):
    """Token + position embeddings, non-causal pre-norm blocks, and a linear classifier on the CLS output."""

    def __init__(self, max_length: int, d_model: int = 64, num_heads: int = 4, num_layers: int = 2, classes: int = 2):
        super().__init__()
        self.token_embedding = nn.Embedding(VOCAB, d_model)
        self.position_embedding = nn.Embedding(max_length + 1, d_model)
        self.blocks = [nn.TransformerBlock(d_model, num_heads) for _ in range(num_layers)]
        self.norm = nn.LayerNorm(d_model)
        self.classifier = nn.Linear(d_model, classes)

    def embed(self, tokens):
        return self.token_embedding(tokens) + self.position_embedding(np.arange(tokens.shape[1]))

    def forward(self, tokens, lengths=None):
        """(batch, length) tokens and valid lengths (None: attend everywhere) -> (batch, classes) logits."""
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, key_padding_lengths=lengths)
        return self.classifier(self.norm(x[:, 0]))


def exported(state: dict):
    """``python -m tape export examples/padded_classification.py CHECKPOINT``: the Encoder ``state`` fits (its
    sizes read from the arrays' shapes), example tokens and lengths, input and output names."""
    max_length = state["position_embedding.weight"].shape[0] - 1
    d_model = state["token_embedding.weight"].shape[1]
    layers = len({name.split(".")[1] for name in state if name.startswith("blocks.")})
    model = Encoder(max_length, d_model=d_model, num_layers=layers, classes=state["classifier.weight"].shape[0])
    tokens, lengths, _ = make_batch(np.random.default_rng(0), 2, 1, max_length)
    return model, (tokens, lengths), ["tokens", "lengths"], ["logits"]


def main(argv=None) -> dict:
    parser = common.example_parser(__doc__.splitlines()[0], steps=600)
    parser.add_argument("--no-padding-mask", action="store_true", help="let attention see the padding")
    parser.add_argument("--min-length", type=common.count(), default=1, help="shortest sequence (before padding)")
    parser.add_argument("--max-length", type=common.count(), default=32,
                        help="longest sequence: every batch is padded to it")
    parser.add_argument("--batch", type=common.count(), default=64, help="sequences per training step")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak AdamW learning rate (warmup, then cosine decay)")
    parser.add_argument("--eval-size", type=common.count(), default=2000, help="held-out sequences")
    args = common.parse_args(parser, argv)
    use_mask = not args.no_padding_mask

    rng = np.random.default_rng(args.seed)
    nn.manual_seed(args.seed)
    model = Encoder(args.max_length)
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = optim.WarmupCosineLR(optimizer, warmup_steps=min(100, args.steps // 10), total_steps=args.steps)
    print(f"model: {model.num_parameters():,} parameters; padding mask: {'on' if use_mask else 'OFF'}")
    test_tokens, test_lengths, test_labels = make_batch(np.random.default_rng(10_000 + args.seed), args.eval_size,
                                                        args.min_length, args.max_length)

    losses = []
    train = common.Trainer(lambda tokens, lengths, labels: ops.cross_entropy(
        model(tokens, lengths if use_mask else None), labels), model, optimizer, schedule, compiled=args.compile)
    bar = common.ProgressBar(args.steps, unit="seq", enabled=not args.quiet)
    for step in range(1, args.steps + 1):
        tokens, lengths, labels = make_batch(rng, args.batch, args.min_length, args.max_length)
        losses.append(train(tokens, lengths, labels))
        bar.update(step, losses[-1], len(tokens))
    seconds = bar.close()

    model.eval()
    with tape.no_grad():
        logits = model(test_tokens, test_lengths if use_mask else None)
    accuracy = float(np.mean(np.argmax(logits.numpy(), axis=1) == test_labels))
    print(f"final training loss {np.mean(losses[-20:]):.4f}; held-out accuracy ({args.eval_size} sequences, "
          f"padding mask {'on' if use_mask else 'off'}): {accuracy:.2%}; training took {seconds:.1f} s")

    if args.save:
        common.save_checkpoint(model, args.save)
    if args.plot:
        mask = "on" if use_mask else "off"
        common.plot_losses(losses, args.plot, f"padded classification (mask {mask}): training loss")
    if args.graph:
        common.render_block_graph(model.blocks[0], model.embed(test_tokens[:2]), args.graph, model=model,
                                  key_padding_lengths=test_lengths[:2] if use_mask else None)
    return {"losses": losses, "accuracy": accuracy, "seconds": seconds}


if __name__ == "__main__":
    main()
