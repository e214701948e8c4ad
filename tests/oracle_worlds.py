"""A stand-in for the WorldModel that answers with the truth, for protocol tests whose
right answer is then known exactly (tests/test_evaluate.py, tests/test_long_horizon.py), and
the synthetic walks they score."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from worldlab import camera
from worldlab.episodes import Episode, PromptSegment, make_meta


def straight_walk(rgb: np.ndarray, seed: int, stride: float) -> Episode:
    """An episode of the frames rgb (t, h, w, 3) uint8 walking straight ahead `stride`
    metres a step, flat depth 3 m, one caption."""
    t, h, w = rgb.shape[:3]
    traj = camera.straight(t - 1, stride)
    actions = np.concatenate([np.zeros((1, camera.ACTION_WIDTH), np.float32),
                              camera.actions_to_array(traj.actions)])
    K = camera.intrinsics_from_fov(w, h, 90.0)
    return Episode(rgb=rgb, depth=np.full((t, h, w), 3.0, np.float32), c2w=traj.c2w,
                   K=np.repeat(K[None], t, 0), actions=actions,
                   prompts=[PromptSegment(0, "a grey room", "a player", "")],
                   meta=make_meta("synthetic", 10.0, seed=seed)).validate()


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


def tiny_autoencoder(episodes: list[Episode], size: int):
    """(config, autoencoder, latents per episode): the tiny preset's untrained autoencoder
    (seed 0) at frame side `size` and each episode's latents (t, c, h', w'), as a World
    encodes them."""
    import worldlab as wl
    from worldlab.model.autoencoder import VideoAutoencoder, frames_to_tensor

    torch.manual_seed(0)
    cfg = wl.make_config("tiny", data__engine="procedural", data__size=size)
    ae = VideoAutoencoder.from_config_dataclass(cfg.autoencoder).eval()
    return cfg, ae, [ae.encode(frames_to_tensor(ep.rgb)[None])[0] for ep in episodes]
