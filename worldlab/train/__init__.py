"""Training: the loop (`fit`, step-seeded and resumable, through accelerate: DDP or FSDP,
`sharding`), the losses, atomic checkpoints, what a run needs against what the machine has
(`hardware`), and the recipes that the `train` command and the notebooks share:

    run = wl.train.autoencoder(store, cfg.autoencoder, out, callbacks=[plot])
    run = wl.train.world(store, cfg, out, autoencoder=ae_dir, callbacks=[plot])
    wl.train.package(ae_dir, out, "runs/myworld")
    run = wl.train.long_horizon.finetune(world_dir, "error_bank", store, out)  # anti-drift
    run = wl.train.depth_head.train_depth_head(store, out)  # depth for the "own" 3D cache
"""

from . import depth_head, long_horizon, memory
from .checkpoints import (latest_checkpoint, list_checkpoints, load_checkpoint, load_weights,
                          save_checkpoint, save_model_dir)
from .decoder import DecoderRun, decoder_train_config, distill_decoder
from .distill import DistillRun, distill
from .losses import (autoencoder_loss, chunk_times, flow_matching_loss, sample_flow_time,
                     world_model_loss)
from .loop import (StepBatchSampler, ema_update, fit, lr_at, make_accelerator,
                   step_generator, steps_for_budget)
from .recipes import (AutoencoderRun, FrameDataset, WorldRun, autoencoder,
                      autoencoder_train_config, package, split_episodes, world)

__all__ = ["fit", "lr_at", "step_generator", "StepBatchSampler", "make_accelerator",
           "ema_update", "steps_for_budget", "flow_matching_loss", "chunk_times",
           "sample_flow_time", "world_model_loss", "autoencoder_loss", "save_checkpoint",
           "load_checkpoint", "latest_checkpoint", "list_checkpoints", "load_weights",
           "save_model_dir", "autoencoder", "world", "package", "AutoencoderRun", "WorldRun",
           "FrameDataset", "autoencoder_train_config", "split_episodes"]
__all__ += ["distill_decoder", "decoder_train_config", "DecoderRun", "distill", "DistillRun",
            "long_horizon", "memory", "depth_head"]
