"""The events recipe: a world fine-tuned from another's weights on clips where a prompted
event begins, so that the prompt, not chance, brings what it names. `python -m worldlab
train events` and `experiments/default_worlds.yaml` call `finetune`.

    run = wl.train.events.finetune("data/checkpoints/proc64", store, "runs/events/proc64",
                                   steps=400)

A world learns an event from the clips whose last chunk (the one it learns, teacher forced)
starts with the event's prompt: the context holds no sign of it, the prompt alone says it
comes. In the walks the world was trained on, an event prompt falls on a chunk's first frame
one time in `chunk_frames`, and a summon is one event of several, so such clips are rare; a
store recorded with `data record --events summon_monster --event-every <chunk_frames>` is
made of them. Half the clips of a fine-tune start an event (`event_windows`), half are the
store's other clips, drawn once from the seed: the world also keeps seeing walks where
nothing is prompted and nothing comes, so it does not learn to bring characters unasked.

Shape legend: N clips.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import WorldConfig
from ..engines import engine_class
from ..engines.base import match_event
from ..episodes import ClipTensors, EpisodeStore
from ..episodes.datasets import clip_windows
from ..pretrained import load_world, resolve_checkpoint
from .long_horizon import finetune_sections
from .recipes import WorldRun, world

EVENT = "summon_monster"  # the event the fine-tune teaches by default (the events protocol's)
EVENT_SHARE = 0.5  # of the clips, those whose last chunk starts the event


def event_windows(store: EpisodeStore, windows: list[tuple[str, int]], clip_frames: int,
                  chunk_frames: int, event: str = EVENT) -> list[tuple[str, int]]:
    """The clips of `windows` whose last chunk starts with a prompt that fires `event`
    (one of the store's engine's events, `engine.events`): a prompt segment begins on the
    last chunk's first frame. Reads prompts only (`read_track`)."""
    engine = store.describe()["engine"]
    specs = engine_class(engine).events
    if event not in [s.name for s in specs]:
        raise ValueError(f"event {event!r} is not one of {engine}'s events "
                         f"{[s.name for s in specs]}")
    starts = {}
    for episode_id, _ in windows:
        if episode_id not in starts:
            starts[episode_id] = {p.start for p in store.read_track(episode_id).prompts
                                  if p.event and getattr(match_event(p.event, specs), "name",
                                                         None) == event}
    return [(i, s) for i, s in windows if s + clip_frames - chunk_frames in starts[i]]


def mixed_windows(store: EpisodeStore, clip_frames: int, chunk_frames: int,
                  ids: list[str] | None = None, event: str = EVENT,
                  share: float = EVENT_SHARE, seed: int = 0) -> list[tuple[str, int]]:
    """Every clip of `ids` that starts `event` (`event_windows`) and enough of the others,
    drawn with `seed`, for the first to be `share` of the whole; grouped by episode, in
    order (what `ClipTensors` takes)."""
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share!r}")
    every = clip_windows(store, clip_frames, chunk_frames, chunk_frames, ids)
    chosen = event_windows(store, every, clip_frames, chunk_frames, event)
    if not chosen:
        raise ValueError(f"no clip of {store.root} has a last chunk that starts with a "
                         f"{event!r} prompt; record events on chunk starts (data record "
                         f"--events {event} --event-every {chunk_frames})")
    others = sorted(set(every) - set(chosen))
    n = min(len(others), round(len(chosen) * (1 - share) / share))
    picked = {others[k] for k in np.random.default_rng(seed).choice(len(others), n,
                                                                     replace=False)}
    kept = set(chosen) | picked
    return [w for w in every if w in kept]


def event_config(base: WorldConfig, steps: int, batch_size: int, seed: int = 0,
                 checkpoint_every: int = 20) -> WorldConfig:
    """`base` (the start world's config) with a fine-tune's settings and the budget."""
    return WorldConfig.from_dict(finetune_sections(base, {}, steps, batch_size, seed,
                                                   checkpoint_every))


def finetune(start, store, out=None, *, event: str = EVENT, share: float = EVENT_SHARE,
             steps: int = 400, batch_size: int = 16, seed: int = 0, latents=None,
             device: str = "auto", resume: bool = False, callbacks=(),
             on_start=None) -> WorldRun:
    """Fine-tune the world directory `start` (weights, config, captions) on the clips of an
    episode store (`mixed_windows`: `share` of them start `event`), latents of `start`'s
    autoencoder (default `<store>/latents`, encoded where missing). With `out`: resumable
    checkpoints, `ema/` and the rest that `package` assembles with `start`'s
    autoencoder."""
    w = load_world(resolve_checkpoint(start), device="cpu")
    cfg = event_config(w.config, steps, batch_size, seed)
    f = w.model.config.chunk_frames

    clip_frames = f * cfg.data.clip_chunks

    def clips(store, cache, ids, data_device):
        windows = mixed_windows(store, clip_frames, f, ids, event, share, seed)
        return ClipTensors(store, cache, clip_frames, f, ids=ids, device=data_device,
                           windows=windows)

    return world(EpisodeStore.open(store), cfg, out, autoencoder=Path(w.path) / "autoencoder",
                 latents=latents, captions=w.captions,
                 init=None if resume else Path(w.path) / "world", device=device,
                 resume=resume, callbacks=callbacks, on_start=on_start, clips=clips)
