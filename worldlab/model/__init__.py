"""The world model: a chunk-causal DiT with a KV cache (dit.py) and its conditioning
(conditioning.py: time, relative camera pose, actions, text). Text embeddings come from
`worldlab.textenc`; the sampling loop lives in `worldlab.sampler`."""

from .conditioning import relative_pose_features
from .dit import KVCache, WorldModel, block_causal_mask

__all__ = ["WorldModel", "KVCache", "block_causal_mask", "relative_pose_features"]
