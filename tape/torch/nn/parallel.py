"""``torch.nn.parallel`` on one CPU device: ``DataParallel(module)`` runs ``module`` (torch's does the same without
GPUs) and holds it as ``.module``, so its state dict keys carry torch's ``module.`` prefix;
``DistributedDataParallel`` needs torch.distributed, which is not provided (minitape's is MPI's: tape.distributed)."""

from tape.devices import on_cpu
from tape.train.nn import Module


class DataParallel(Module):
    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        for d in device_ids or ():
            on_cpu("DataParallel", "device_ids", d if not isinstance(d, int) else f"cuda:{d}")
        self.module, self.dim = module, dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


class DistributedDataParallel(Module):
    def __init__(self, module: Module, *args, **kwargs):
        raise NotImplementedError(
            "DistributedDataParallel: torch.distributed is not provided; train data-parallel over MPI with "
            "tape.distributed (broadcast_parameters, allreduce_gradients; docs/distributed.md)"
        )


__all__ = ["DataParallel", "DistributedDataParallel"]
