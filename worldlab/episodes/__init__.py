"""Episodes: the schema of one recorded play-through (`schema`), the atomic store
(`store`), recording from the engines with scripted players (`recording`), importing real
video (`realestate`), and what feeds training (`datasets`: latent cache, clips, frames;
`tensors`: every clip of a store as tensors on the training device).

    store = wl.episodes.EpisodeStore(wl.DATA / "samples" / "doom")
    ep = store.read(store.ids()[0])          # an Episode: rgb, depth, c2w, K, actions, ...
"""

from .datasets import EpisodeClips, LatentCache, collate_clips, load_frames
from .recording import (CHARACTER, SCENES, dataset_stats, format_index, game_fps,
                        level_coverage, record_episode, record_many, record_with,
                        revisit_pairs)
from .schema import (Episode, EpisodeError, PromptSegment, Track, load_episode, load_track,
                     make_meta, prompts_from_steps, save_episode)
from .store import EpisodeStore
from .tensors import ClipTensors

__all__ = ["Episode", "EpisodeError", "PromptSegment", "Track", "EpisodeStore",
           "EpisodeClips", "ClipTensors", "LatentCache", "collate_clips", "load_frames",
           "load_episode", "load_track", "save_episode", "make_meta", "prompts_from_steps",
           "CHARACTER", "SCENES", "game_fps", "record_episode", "record_many", "record_with",
           "revisit_pairs", "dataset_stats", "level_coverage", "format_index"]
