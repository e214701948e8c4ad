"""FSDP through accelerate's FSDP plugin (`fsdp_version: 2`): between a sharded model and
full tensors.

Under FSDP every rank holds one shard of each parameter (a DTensor), of its gradient and
of its optimizer state, and here of its EMA too. Checkpoints and `model/` directories hold
full tensors, the same files that one process or DDP writes, so a run started under one
can be resumed under another. Gathering a full tensor is a collective: every rank calls
`full_state` / `full_optimizer_state` in the same order, then one rank writes.
"""

from __future__ import annotations

import copy

import torch


def uses_fsdp(accelerator) -> bool:
    """Whether `accelerator` shards the model (FSDP2); FSDP1 is refused, naming the fix."""
    from accelerate.utils import DistributedType

    if accelerator.distributed_type != DistributedType.FSDP:
        return False
    if not accelerator.is_fsdp2:
        raise ValueError("the accelerate config asks for FSDP version 1; worldlab trains "
                         "with FSDP2: set fsdp_version: 2 under fsdp_config (see "
                         "configs/accelerate/fsdp.yaml)")
    return True


def _is_sharded(t) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(t, DTensor)


def full(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor of a shard (a collective), or `t` itself when it is not sharded."""
    return t.full_tensor() if _is_sharded(t) else t


def full_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The module's state dict with every shard gathered."""
    return {k: full(v).detach() for k, v in module.state_dict().items()}


def full_optimizer_state(optimizer) -> dict:
    """The optimizer's state dict with every shard gathered (torch's layout)."""
    sd = optimizer.state_dict()
    return {"state": {i: {k: full(v) for k, v in entry.items()}
                      for i, entry in sd["state"].items()},
            "param_groups": sd["param_groups"]}


def shard_like(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`value` (a full tensor) cut as `like` is sharded; `value` if `like` is not a shard.
    Each rank keeps its own slice (no communication): every rank read the same file."""
    if not _is_sharded(like):
        return value
    from torch.distributed.tensor import distribute_tensor

    return distribute_tensor(value.to(like.device), like.device_mesh, like.placements,
                             src_data_rank=None)


def load_full_state(module: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """Load full tensors (checked by the caller) into a module, sharded or not."""
    current = module.state_dict()
    module.load_state_dict({k: shard_like(v, current[k]) for k, v in tensors.items()},
                           strict=True)


def clip_grad_norm(parameters, max_norm: float) -> torch.Tensor:
    """Clip the gradients of sharded parameters to a total norm of `max_norm` (computed over
    all shards); returns that norm, before clipping. (accelerate's own clip looks the
    model up among every model it prepared, which fails once it has prepared two.)"""
    return full(torch.nn.utils.clip_grad_norm_(list(parameters), max_norm))


def broadcast_from_main(module: torch.nn.Module) -> None:
    """Every rank takes the main process's weights (what DDP does when it wraps a model);
    FSDP would otherwise shard each rank's own initialisation."""
    for t in [*module.parameters(), *module.buffers()]:
        torch.distributed.broadcast(t.data, src=0)


def sharded_copy(module: torch.nn.Module, like: torch.nn.Module) -> torch.nn.Module:
    """`module` (an unsharded copy of `like` before it was sharded) sharded as `like` is:
    its parameters hold the same slices, so elementwise updates (the EMA) stay local."""
    from torch.distributed.fsdp import fully_shard

    mesh = next(like.parameters()).device_mesh
    return fully_shard(module, mesh=mesh)


class Unsharded:
    """Unsharded copies of a model (and its EMA), kept on the CPU before FSDP shards them,
    into which the gathered weights are loaded to be saved or returned."""

    def __init__(self, model: torch.nn.Module, ema: bool):
        self.model = copy.deepcopy(model).cpu()
        self.ema = copy.deepcopy(self.model).requires_grad_(False) if ema else None

    def load(self, model: torch.nn.Module, ema: torch.nn.Module | None):
        """(model, ema) holding the full weights of the sharded `model` and `ema`."""
        self.model.load_state_dict(_cpu(full_state(model)))
        if ema is not None:
            self.ema.load_state_dict(_cpu(full_state(ema)))
        return self.model, self.ema


def _cpu(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.cpu() for k, v in state.items()}
