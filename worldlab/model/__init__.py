"""The world model and the pieces it is made of:

    autoencoder   frames <-> latents (a small diffusers AutoencoderKL, per frame)
    discriminator a patch critic that keeps the autoencoder's textures sharp (training only)
    dit           the chunk-causal DiT with a KV cache (`WorldModel`)
    conditioning  flow time, relative camera pose, actions, text -> AdaLN / cross-attention
    textenc       prompts -> embeddings, offline; the structured caption table
    sampler       one chunk from noise, and the chunk-by-chunk rollout loop

Training lives in `worldlab.train`; a packaged world on disk in `worldlab.pretrained`.
"""

from .autoencoder import VideoAutoencoder, frames_to_tensor, tensor_to_frames
from .conditioning import relative_pose_features
from .discriminator import PatchDiscriminator
from . import memory_tokens
from .dit import KVCache, WorldModel, block_causal_mask
from .memory_tokens import MemoryChunks
from .sampler import rollout, sample_chunk
from .textenc import CaptionTable, TextEncoder, check_prompt

__all__ = ["VideoAutoencoder", "frames_to_tensor", "tensor_to_frames", "WorldModel",
           "KVCache", "PatchDiscriminator", "block_causal_mask", "relative_pose_features",
           "rollout", "sample_chunk", "CaptionTable", "TextEncoder", "check_prompt",
           "memory_tokens", "MemoryChunks"]
