"""``torch.distributed``: not provided -- ``is_available()`` and ``is_initialized()`` are False, so programs take
their single-process branch. minitape's data-parallel training is MPI's: ``tape.distributed`` (docs/distributed.md).
Any other name raises, naming that module."""


def is_available() -> bool:
    return False


def is_initialized() -> bool:
    return False


def __getattr__(name: str):
    raise AttributeError(
        f"tape.torch.distributed.{name}: torch.distributed is not provided; minitape trains data-parallel over MPI "
        f"with tape.distributed (docs/distributed.md)"
    )
