"""The training stack, built on the op library: modules (``tape.nn``), optimizers (``tape.optim``) and
checkpoints (``tape.checkpoint``). Importing it imports ``ops``; the engine core never imports it."""

# tape.train.nn first, whichever submodule is asked for: the layer modules (rnn, op_modules, mha, transformer) import
# Module from it and it re-exports them at its end, an order only this import makes hold for every entry point.
from . import nn  # noqa: E402, F401
