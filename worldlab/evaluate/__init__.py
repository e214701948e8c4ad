"""Evaluation against the engine's own ground truth: the protocols (`protocols`; a minute of
open loop: `long`; coming back to views seen before: `revisit`), the trivial baselines
(`baselines`), speed benchmarks (`bench`; training: `training_speed`), tables and JSON
(`report`) and the `eval` command (`cli`). The full suite (`full`: every protocol plus
events, camera following and an unseen map, for the world, the peer baseline (`peer`) and
repeat-last, with bootstrap intervals (`stats`) and an HTML report (`full_report`)).
Shipped tables are assembled from evaluation outputs by the `table` command (`tables`).

    world = wl.pretrained.load_world(wl.DATA / "checkpoints" / "doom64")
    episodes = wl.evaluate.heldout_episodes("doom", 8, 40, world.size)
    wl.evaluate.print_quick(wl.evaluate.quick_suite(world, episodes))
"""

from . import (camera_follow, events, full, full_report, geometry_table, loop_table,
               memory_bars, predictors, realism, recall, recall_table, registry, shipped,
               stats, table_io)
from .baselines import repeat_baseline, warp_baseline, warp_to_poses
from .generation import generate
from .long import generate_walk, long_horizon
from .protocols import (HELDOUT_SEED, autoencoder_scores, drift, heldout_episodes,
                        mirror_controls, next_chunk, quick_suite, runtime)
from .report import print_long, print_quick, print_revisit, print_table
from .revisit import return_pairs, revisit
from .strip import reconstruction_strip, rollout_frames, rollout_strip

__all__ = ["HELDOUT_SEED", "autoencoder_scores", "generate", "next_chunk", "drift",
           "runtime", "quick_suite", "heldout_episodes", "mirror_controls", "repeat_baseline",
           "warp_baseline", "warp_to_poses", "print_quick", "print_table", "rollout_frames",
           "rollout_strip", "reconstruction_strip", "long_horizon", "generate_walk",
           "print_long", "revisit", "return_pairs", "print_revisit", "camera_follow", "events",
           "full", "full_report", "memory_bars", "predictors", "realism", "registry", "shipped",
           "stats"]
