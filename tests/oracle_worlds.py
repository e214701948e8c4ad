"""A stand-in for the WorldModel that answers with the truth, for protocol tests whose
right answer is then known exactly (tests/test_evaluate.py, tests/test_long_horizon.py)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from worldlab import camera


class OracleModel(torch.nn.Module):
    """The WorldModel interface the protocols use, answering with the truth: the velocity
    (x - target) / t, on which every Euler step lands on `target` exactly. `target` is the
    episode's true latents ("truth") or the last context latent repeated ("repeat"); the
    episode and start are recognised from the first chunk appended."""

    def __init__(self, latents: list[torch.Tensor], chunk_frames: int, mode: str):
        super().__init__()
        c, h = latents[0].shape[1], latents[0].shape[-1]
        self.config = SimpleNamespace(chunk_frames=chunk_frames, latent_channels=c,
                                      latent_size=h, action_width=camera.ACTION_WIDTH)
        self.truth, self.mode = latents, mode

    def new_cache(self, b: int):
        return SimpleNamespace(batch_size=b, chunks=0, where=None, last=None)

    def _find(self, chunk: torch.Tensor) -> tuple[int, int]:
        f = self.config.chunk_frames
        dist = {(e, s): float((lat[s:s + f] - chunk).abs().max())
                for e, lat in enumerate(self.truth) for s in range(0, len(lat) - f + 1, f)}
        return min(dist, key=dist.get)

    def append_chunk(self, x, cache, **cond) -> None:
        if cache.chunks == 0:
            cache.where = self._find(x[0])
        cache.last, cache.chunks = x[:, -1:], cache.chunks + 1

    def forward_chunk(self, x, t, cache, **cond) -> torch.Tensor:
        f = self.config.chunk_frames
        episode, start = cache.where
        k = start + cache.chunks * f
        target = self.truth[episode][k:k + f][None] if self.mode == "truth" else \
            cache.last.expand_as(x)
        return (x - target) / t[:, None, None, None, None]
