"""Run by tests/test_training.py under `accelerate launch --num_processes 2 --cpu`.

Trains the tiny world model for 2 steps on random latents (each rank draws its own batches)
and writes each rank's flattened parameters to <out>/rank<i>.safetensors.
"""

from __future__ import annotations

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


def main(out: Path) -> None:
    cfg = make_config("tiny", train={"steps": 2, "checkpoint_every": 1})
    torch.manual_seed(1234)
    model = WorldModel.from_config_dataclass(cfg.model, 4, 4)
    acc = make_accelerator(cfg.train, "cpu")
    torch.manual_seed(acc.process_index)  # different start weights: DDP must sync them
    for p in model.parameters():
        p.data.add_(0.01 * torch.randn_like(p))
    data = RandomClips(8, cfg.model.chunk_frames * 2, 4, 4)
    loss_fn = world_model_loss(cfg.train, cfg.model.chunk_frames, captions=None)
    state = fit(model, data, cfg.train, loss_fn, accelerator=acc, out_dir=out / "run")
    print(f"rank {acc.process_index} of {acc.num_processes}: loss {state['loss']:.4f}")
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    save_file({"params": flat, "loss": torch.tensor(state["loss"])},
              str(out / f"rank{acc.process_index}.safetensors"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
