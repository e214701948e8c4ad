"""Run by tests/test_training.py (DDP) and tests/test_gpu_path.py (FSDP) under
`torch.distributed.run --nproc_per_node 2`, on the CPU (gloo).

    fit_accelerate_script.py OUT            DDP: 2 steps, each rank's parameters saved
    fit_accelerate_script.py OUT fsdp       FSDP2: 3 steps, then steps 3 again resumed from
                                            the step-2 checkpoint by a fresh model

Trains the tiny world model on random latents (each rank draws its own batches; each rank
starts from its own perturbed weights, which DDP and FSDP must replace by rank 0's) and
writes <out>/rank<i>.safetensors: the flattened parameters (`params`, for FSDP gathered
from the shards) and the last loss; for FSDP also `ema` and `resumed` (the parameters of
the resumed run).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

from worldlab.config import make_config
from worldlab.model.dit import WorldModel
from worldlab.train import fit, make_accelerator, world_model_loss


class RandomClips(torch.utils.data.Dataset):
    """Seeded random latent clips with poses and actions: enough to exercise fit."""

    def __init__(self, n: int, frames: int, channels: int, size: int):
        g = torch.Generator().manual_seed(0)
        self.latents = torch.randn(n, frames, channels, size, size, generator=g)
        self.actions = torch.randn(n, frames, 7, generator=g)
        self.actions[..., 4:] = (self.actions[..., 4:] > 0).float()  # buttons are 0 or 1
        self.c2w = torch.eye(4).expand(n, frames, 4, 4).clone()

    def __len__(self) -> int:
        return len(self.latents)

    def __getitem__(self, i: int) -> dict:
        return {"latents": self.latents[i], "actions": self.actions[i], "c2w": self.c2w[i]}


def start_model(cfg, rank: int) -> WorldModel:
    """The tiny model from seed 1234, perturbed by `rank`'s seed."""
    torch.manual_seed(1234)
    model = WorldModel.from_config_dataclass(cfg.model, 4, 4)
    torch.manual_seed(rank)  # different start weights: DDP / FSDP must sync them
    for p in model.parameters():
        p.data.add_(0.01 * torch.randn_like(p))
    return model


def shard_with_fsdp(acc) -> None:
    """Make `acc` shard with FSDP2, as `accelerate launch` with an FSDP config does on GPUs.
    accelerate picks FSDP only for GPU-type runs, so on the CPU the test sets the state
    its launcher would; everything after (prepare, fully_shard over gloo, fit) is real."""
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    state = AcceleratorState()
    state.fsdp_plugin = FullyShardedDataParallelPlugin(
        fsdp_version=2, auto_wrap_policy="transformer_based_wrap",
        transformer_cls_names_to_wrap=["Block"])
    state.distributed_type = DistributedType.FSDP


def flat(model) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def main(out: Path, mode: str = "ddp") -> None:
    steps = 3 if mode == "fsdp" else 2
    cfg = make_config("tiny", train={"steps": steps, "checkpoint_every": 1})
    acc = make_accelerator(cfg.train, "cpu")
    if mode == "fsdp":
        shard_with_fsdp(acc)
    data = RandomClips(8, cfg.model.chunk_frames * 2, 4, 4)
    loss_fn = world_model_loss(cfg.train, cfg.model.chunk_frames, captions=None)
    model = start_model(cfg, acc.process_index)
    state = fit(model, data, cfg.train, loss_fn, accelerator=acc, out_dir=out / "run")
    print(f"rank {acc.process_index} of {acc.num_processes}: loss {state['loss']:.4f}")
    saved = {"params": flat(state["model"]), "loss": torch.tensor(state["loss"])}
    if mode == "fsdp":
        saved["ema"] = flat(state["ema"])
        if acc.is_main_process:  # a run that stopped after its step-2 checkpoint
            step2 = out / "run" / "checkpoints" / "step_00000002"
            shutil.copytree(step2, out / "resumed" / "checkpoints" / step2.name)
        acc.wait_for_everyone()
        acc = make_accelerator(cfg.train, "cpu")  # a new run: a new accelerator
        resumed = fit(start_model(cfg, 7), data, cfg.train, loss_fn, accelerator=acc,
                      out_dir=out / "resumed", resume=True)
        saved["resumed"] = flat(resumed["model"])
    save_file(saved, str(out / f"rank{acc.process_index}.safetensors"))


if __name__ == "__main__":
    main(Path(sys.argv[1]), *sys.argv[2:])
