"""``torch.utils.data.dataloader``: the loader and its collate function."""

from tape.train.data import DataLoader, default_collate  # noqa: F401
