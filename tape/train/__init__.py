"""The training stack, built on the op library: modules (``tape.nn``), optimizers (``tape.optim``) and
checkpoints (``tape.checkpoint``). Importing it imports ``ops``; the engine core never imports it."""
