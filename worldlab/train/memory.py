"""The memory ablation's recipe: a world fine-tuned from another's weights with one memory
mechanism switched on (`config.memory`), the same data, steps and start for every variant.
`python -m worldlab train memory`, `experiments/memory.yaml` and notebook 04 call
`finetune`.

    run = wl.train.memory.finetune("data/checkpoints/doom64_teacher", "retrieval", store,
                                   "runs/memory/retrieval", steps=300)

A training sample is a clip of `data.clip_chunks` chunks (the KV window and the chunk to
learn, teacher forced) plus that chunk's memory, chosen from the same episode by the rule
play uses (`memory.retrieval.select_memory`: the sink, the chunks older than the window
whose view overlaps the target's most) and its 3D-cache render (past engine frames fused
with the engine's depth, or the depth head's, rendered into the target's cameras,
encoded). New parameters start at zero effect (`load_base`), so step 0 is the start world.

Shape legend: N clips, b batch, k memory slots, f frames per chunk, c h w latent channels
and size.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from ..config import MemoryConfig, ModelConfig, WorldConfig, memory_model_fields
from ..episodes import ClipTensors, EpisodeStore
from ..episodes.datasets import clip_windows
from ..memory.retrieval import chunk_overlap, memory_slots, select_memory
from ..model.memory_tokens import MemoryChunks
from ..pretrained import load_world, resolve_checkpoint
from .cache_inputs import stored_cache3d_latents
from .checkpoints import read_weights
from .long_horizon import finetune_sections
from .recipes import world

REVISIT_OVERLAP = 0.5  # training clips: the last chunk sees this share of an older view
MEMORY_LR_SCALE = 10.0  # the new memory parameters learn 10x faster (zero at step 0)

# each variant's memory section (on top of none) and model fields; "none" is the baseline:
# the same fine-tune with no memory
VARIANTS: dict[str, dict[str, dict]] = {
    "none": {},
    "sink": {"memory": {"sink": True}},
    "retrieval": {"memory": {"retrieve": 1}},
    "tokens": {"memory": {"retrieve": 1}, "model": {"memory_compress": 8}},
    "cache3d_oracle": {"memory": {"cache3d": "oracle"}},
    "cache3d_own": {"memory": {"cache3d": "own"}},
    "sink+tokens+cache3d_own": {"memory": {"sink": True, "retrieve": 1, "cache3d": "own"},
                                "model": {"memory_compress": 8}},
}


def variant_config(base: WorldConfig, variant: str, steps: int, batch_size: int,
                   tokens_per_frame: int, seed: int = 0, checkpoint_every: int = 20,
                   own_memory: float = 0.0) -> WorldConfig:
    """`base` (the start world's config) with the fine-tune settings of the long-horizon
    comparison (teacher forcing: memory is read by the chunk being learned), the budget, and
    `variant`'s memory with the model fields it needs (`memory_model_fields`, for
    `tokens_per_frame` latent patches per frame); `own_memory`: the share of samples whose
    retrieved chunks are the model's own (`train.memory_own_prob`)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown memory variant {variant!r}; expected one of "
                         f"{tuple(VARIANTS)}")
    no_memory = {"memory": dataclasses.asdict(MemoryConfig()),
                 "model": {"memory_compress": 1},
                 "train": {"memory_lr_scale": MEMORY_LR_SCALE, "memory_own_prob": own_memory}}
    d = finetune_sections(base, no_memory, steps, batch_size, seed, checkpoint_every)
    for section, fields in VARIANTS[variant].items():
        d[section].update(fields)
    d["model"].update(memory_model_fields(MemoryConfig(**d["memory"]),
                                          ModelConfig(**d["model"]), tokens_per_frame))
    return WorldConfig.from_dict(d)


def load_base(model, init: Path) -> None:
    """Start `model` from the weights at `init`, a world model without (or with less)
    memory: every tensor of the same name and shape is copied; the patch embedding of a
    model with a 3D-cache input keeps the init's columns for the latent channels and zero
    for the cache's (so the cache starts with no effect); the memory parameters keep their
    initialisation (their output projections are zero). Any other difference is an error."""
    tensors, where = read_weights(Path(init))
    own = model.state_dict()
    unexpected = sorted(set(tensors) - set(own))
    if unexpected:
        raise ValueError(f"{where} has {unexpected[0]!r}, which this model does not")
    state = {}
    for name, value in own.items():
        if name not in tensors:
            if "memory" not in name:
                raise ValueError(f"{where} has no {name!r} (only memory parameters may be new)")
            state[name] = value
            continue
        old = tensors[name].to(value.dtype)
        if old.shape == value.shape:
            state[name] = old
        elif name == "patch_in.weight" and old.shape[0] == value.shape[0] \
                and old.shape[1] < value.shape[1]:
            state[name] = torch.cat([old, old.new_zeros(old.shape[0],
                                                        value.shape[1] - old.shape[1])], 1)
        else:
            raise ValueError(f"{where}: {name} is {tuple(old.shape)}, this model's "
                             f"{tuple(value.shape)}")
    model.load_state_dict(state, strict=True)


# ----------------------------------------------------------------------------------------
# Training clips with their memory
# ----------------------------------------------------------------------------------------


class MemoryClips(ClipTensors):
    """`ClipTensors` whose clips also carry the last chunk's memory: `gather` adds
    "memory", a `MemoryChunks` (latents (b, k, f, c, h, w), c2w (b, k, f, 4, 4), valid
    (b, k); k = sink + retrieve slots, chosen by `select_memory` from the clip's episode
    and padded by `memory_slots`, as play's stream does) and,
    with `cache3d` latents (N, f, c + 1, h, w) given, cache_latent (b, t, c + 1, h, w):
    zero (no cache) on the context frames, the render on the last chunk's. `windows` (from
    `revisit_windows`) keeps only some clips. With `own`, "memory_before" too: each slot's
    chunk before it (latents (b, k, f, ...), the two chunks' actions and poses, and "ok"
    (b, k): a valid slot past its episode's first chunk), for `anti_drift.own_memory`."""

    def __init__(self, store, latents, clip_frames: int, chunk_frames: int, memory, K,
                 hw: tuple[int, int], window: int, ids=None, device="cpu", cache3d=None,
                 windows=None, own: bool = False):
        store = EpisodeStore.open(store)
        super().__init__(store, latents, clip_frames, chunk_frames, chunk_frames, ids, device,
                         windows)
        self.slots = int(memory.sink) + memory.retrieve
        rows, valid, before = self._memory_rows(store, memory, K, hw, window) if self.slots \
            else ([[]] * len(self), [[]] * len(self), [[]] * len(self))
        self.memory_rows = torch.tensor(rows, device=self.device)  # (N, k) first rows
        self.memory_valid = torch.tensor(valid, device=self.device)  # (N, k)
        self.before_ok = torch.tensor(before, device=self.device) if own else None  # (N, k)
        self.cache3d = None if cache3d is None else cache3d.to(self.device)
        self._chunk = torch.arange(chunk_frames, device=self.device)

    def _memory_rows(self, store, memory, K, hw, window) -> tuple[list, list, list]:
        """Per clip: the first row of each memory slot's chunk (padded by `memory_slots`,
        the rule play uses too), which slots are valid, and which of those have a chunk of
        their episode before them."""
        f, n = self.chunk_frames, self.clip_frames // self.chunk_frames
        rows, valid, before, chunks = [], [], [], {}
        for (episode_id, start), row in zip(self.windows, self.first.tolist()):
            base = row - start  # the episode's frame 0
            if episode_id not in chunks:  # (n_chunks, f, 4, 4) poses of its whole chunks
                t = store.index[episode_id]["frames"] // f * f
                chunks[episode_id] = self.c2w[base:base + t].double().cpu().numpy() \
                    .reshape(-1, f, 4, 4)
            target = start // f + n - 1  # the clip's last chunk
            picked = select_memory(chunks[episode_id], target, window, memory.retrieve,
                                   memory.sink, K, hw)
            slot_chunks, slot_valid = memory_slots(picked, self.slots, target)
            rows.append([base + i * f for i in slot_chunks])
            valid.append(slot_valid)
            before.append([bool(ok) and i >= 1 for i, ok in zip(slot_chunks, slot_valid)])
        return rows, valid, before

    def gather(self, indices: list[int]) -> dict:
        batch = super().gather(indices)
        if self.slots == 0 and self.cache3d is None:
            return batch
        idx = torch.as_tensor(indices, device=self.device)  # (b,)
        if self.slots:
            rows = self.memory_rows[idx][..., None] + self._chunk  # (b, k, f)
            batch["memory"] = MemoryChunks(self.latents[rows].float(), self.c2w[rows].float(),
                                           self.memory_valid[idx])
        if self.before_ok is not None:
            ok = self.before_ok[idx]  # (b, k)
            f = self.chunk_frames  # a slot without a chunk before reads its own (unused)
            pair = torch.where(ok[..., None], rows[..., :1] - f, rows[..., :1]) \
                + torch.arange(2 * f, device=self.device)  # (b, k, 2f)
            batch["memory_before"] = {"latents": self.latents[pair[..., :f]].float(),
                                      "actions": self.actions[pair].float(),
                                      "c2w": self.c2w[pair].float(), "ok": ok}
        if self.cache3d is not None:
            lat = batch["latents"]
            cache = lat.new_zeros(*lat.shape[:2], lat.shape[2] + 1, *lat.shape[3:])
            cache[:, -self.chunk_frames:] = self.cache3d[idx].float()
            batch["cache_latent"] = cache
        return batch


def revisit_windows(store: EpisodeStore, windows: list[tuple[str, int]], clip_frames: int,
                    chunk_frames: int, window: int, K, hw: tuple[int, int],
                    min_overlap: float = REVISIT_OVERLAP,
                    max_window_overlap: float = 1.0) -> list[tuple[str, int]]:
    """The clips whose last chunk comes back to a view older than the KV window: its best
    `chunk_overlap` with a chunk older than the window is at least `min_overlap`, and (below
    1) its best overlap with a chunk in the window is under `max_window_overlap`, so only
    memory can show it (the recall protocol's rule; on a retraced walk the window often shows
    most of the view already). The rule reads poses only and no variant's switches, so every
    variant (none too) trains on the same clips; a clip the memory cannot help teaches it to
    be ignored."""
    if not 0 < max_window_overlap <= 1:
        raise ValueError(f"max_window_overlap must be a share in (0, 1], got "
                         f"{max_window_overlap!r}")
    f, kept, poses = chunk_frames, [], {}
    for episode_id, start in windows:
        if episode_id not in poses:
            c2w = store.read_track(episode_id).c2w
            poses[episode_id] = c2w[:len(c2w) // f * f].reshape(-1, f, 4, 4)
        chunks, j = poses[episode_id], (start + clip_frames) // f - 1  # the last chunk
        older = j - window
        if older <= 0 or chunk_overlap(chunks[:older], chunks[j], K, hw).max() < min_overlap:
            continue
        if max_window_overlap < 1 and \
                chunk_overlap(chunks[older:j], chunks[j], K, hw).max() >= max_window_overlap:
            continue
        kept.append((episode_id, start))
    if not kept:
        raise ValueError(f"no clip of {store.root} comes back to a view older than the "
                         f"{window}-chunk window (overlap >= {min_overlap}, in the window < "
                         f"{max_window_overlap}); record revisit walks or pass min_overlap=0")
    return kept


def finetune(start, variant: str, store, out=None, *, steps: int = 300, batch_size: int = 16,
             seed: int = 0, ids: list[str] | None = None, depth_head=None,
             min_overlap: float = REVISIT_OVERLAP, max_window_overlap: float = 1.0,
             latents=None, own_memory: float = 0.0,
             device: str = "auto", resume: bool = False, callbacks=(), on_start=None,
             progress=None):
    """Fine-tune the world directory `start` with the memory `variant` on clips of episodes
    `ids` (default all) of a store (latents of its autoencoder, `<store>/latents`, encoded
    where missing), only those whose last chunk comes back to a view older than the window
    (`revisit_windows` at `min_overlap` and `max_window_overlap`; min_overlap 0: every clip):
    the same clips for every variant.
    `depth_head` (see `train.depth_head`) is needed by the "own" 3D cache; `own_memory`
    is the share of samples whose retrieved chunks are the model's own generations.
    With `out`: resumable checkpoints, `ema/` and the rest that `package` assembles with
    `start`'s autoencoder. Returns the `WorldRun`."""
    w = load_world(resolve_checkpoint(start), device="cpu")
    m = w.model.config
    cfg = variant_config(w.config, variant, steps, batch_size,
                         (m.latent_size // m.patch_size) ** 2, seed, own_memory=own_memory)
    if cfg.memory.cache3d == "own" and depth_head is None:
        raise ValueError(f"memory variant {variant!r} fuses the depth head's depth: pass "
                         f"depth_head (python -m worldlab train depth-head)")
    store = EpisodeStore.open(store)
    f, size = m.chunk_frames, w.size

    def clips(store, cache, ids, data_device):
        K, clip_frames = store.read(ids[0]).K[0], f * cfg.data.clip_chunks
        windows = clip_windows(store, clip_frames, f, f, ids)
        if min_overlap > 0:
            windows = revisit_windows(store, windows, clip_frames, f,
                                      cfg.model.window_chunks, K, (size, size), min_overlap,
                                      max_window_overlap)
        c3d = None
        if cfg.memory.cache3d != "off":
            c3d = stored_cache3d_latents(store, windows, clip_frames, f, w.ae,
                                         cfg.memory.cache3d, cfg.memory.cache_stride,
                                         depth_head, progress, cfg.memory.cache_points)
        return MemoryClips(store, cache, clip_frames, f, cfg.memory, K, (size, size),
                           cfg.model.window_chunks, ids, data_device, c3d, windows,
                           own=cfg.train.memory_own_prob > 0)

    return world(store, cfg, out, autoencoder=Path(w.path) / "autoencoder", latents=latents,
                 captions=w.captions, ids=ids, init=None if resume else Path(w.path) / "world",
                 device=device, resume=resume, callbacks=callbacks, on_start=on_start,
                 clips=clips, load_init=load_base)
