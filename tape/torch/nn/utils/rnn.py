"""``torch.nn.utils.rnn``: ``pad_sequence`` (ops.pad and ops.stack: gradients reach every sequence) and
``unpad_sequence``. Packed sequences (``pack_padded_sequence`` ...) are not provided: minitape's recurrent layers
take padded batches, and the names raise saying so."""

from __future__ import annotations

import ops


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"):
    """Tensors of shape (L_i, *) padded with ``padding_value`` to the longest L and stacked: (L, B, *), or
    (B, L, *) with ``batch_first``; ``padding_side='left'`` pads before each sequence."""
    sequences = list(sequences)
    if not sequences:
        raise ValueError("pad_sequence: expected a non-empty list of tensors")
    if padding_side not in ("right", "left"):
        raise ValueError(f"pad_sequence: argument 'padding_side' expected 'right' or 'left', got {padding_side!r}")
    tails = {tuple(s.shape[1:]) for s in sequences}
    if len(tails) != 1 or any(s.ndim == 0 for s in sequences):
        shapes = ", ".join(str(tuple(s.shape)) for s in sequences)
        raise ValueError(f"pad_sequence: every sequence must have shape (L_i, *) with one trailing shape, got {shapes}")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        extra = longest - s.shape[0]
        sides = (0, extra) if padding_side == "right" else (extra, 0)
        padded.append(ops.pad(s, (0, 0) * (s.ndim - 1) + sides, value=padding_value) if extra else s)
    return ops.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first: bool = False) -> list:
    """The sequences ``pad_sequence`` padded (right side), cut back to their ``lengths``."""
    batch = padded_sequences if batch_first else ops.transpose(padded_sequences, 0, 1)
    return [batch[k, : int(n)] for k, n in enumerate(lengths)]


def __getattr__(name: str):
    if name in ("pack_padded_sequence", "pad_packed_sequence", "pack_sequence", "unpack_sequence", "PackedSequence"):
        raise AttributeError(
            f"tape.torch.nn.utils.rnn.{name}: packed sequences are not provided; minitape's RNN/LSTM/GRU take padded "
            f"batches (pad_sequence) -- mask or index the outputs by length instead"
        )
    raise AttributeError(f"module 'tape.torch.nn.utils.rnn' has no attribute '{name}'")
