"""The world model: a chunk-causal diffusion transformer over latent patches, with a KV cache.

Reading order: rotary positions -> attention -> block -> the model (full pass, then
streaming). The model predicts the rectified-flow velocity v = noise - x0 of latents
x_t = (1 - t) x0 + t noise (t = 0 clean, t = 1 noise); the sampling loop lives apart, in
`worldlab.sampler`.

Attention is bidirectional inside a chunk and causal across chunks, over a window of
`window_chunks` earlier chunks. The full pass applies exactly that window in its mask, so
generating chunk by chunk with the KV cache (`append_chunk` / `forward_chunk`) gives the same
numbers as one full pass; the tests hold the two to 1e-5.

Memory (`memory_tokens > 0`): the last chunk of a pass also reads memory tokens, made from
k past chunks by `memory_tokens.MemoryEncoder`, through a gated cross-attention
(`MemoryAttention`, zero at initialisation). Only the chunk being generated reads memory:
context chunks never do, so their cached K/V are the same with memory on or off.

Shape legend: b batch, t frames, n chunks, f frames per chunk, c latent channels,
h w latent height/width, l tokens per frame, L tokens in a sequence, m memory tokens,
d width, a action width, k text tokens, e text dim.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from diffusers import ConfigMixin, ModelMixin
from diffusers.configuration_utils import register_to_config
from einops import rearrange

from . import conditioning as cond
from .memory_tokens import MemoryChunks, MemoryEncoder, MemoryRead
from ..config import CONTROLS, ModelConfig
from ..loading import load_module, read_model_config

ROPE_BASE = 10_000.0

# ----------------------------------------------------------------------------------------
# 3D rotary positions: (frame, row, col)
# ----------------------------------------------------------------------------------------


def rope_dims(head_dim: int) -> tuple[int, int, int]:
    """Split a head's channels over (frame, row, col); each part even (rotations act on pairs)."""
    spatial = 2 * (head_dim // 6)
    return head_dim - 2 * spatial, spatial, spatial


def rope_angles(pos: torch.Tensor, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions (L, 3) -> (cos, sin) each (L, head_dim / 2). Position 0 is the identity."""
    parts = []
    for axis, dim in enumerate(rope_dims(head_dim)):
        freqs = ROPE_BASE ** (-torch.arange(0, dim, 2, device=pos.device) / dim)  # (dim/2,)
        parts.append(pos[:, axis, None].float() * freqs)
    angles = torch.cat(parts, dim=-1)  # (L, head_dim/2)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate channel pairs of x (b, heads, L, hd) by the angles of its token positions."""
    x1, x2 = x[..., 0::2], x[..., 1::2]  # (b, heads, L, hd/2)
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


# ----------------------------------------------------------------------------------------
# Attention and the transformer block
# ----------------------------------------------------------------------------------------


class SelfAttention(nn.Module):
    """Multi-head self-attention with RoPE and q/k RMS norm, that can attend to cached K/V."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.q_norm = nn.RMSNorm(d // heads, eps=1e-6)  # keeps logits bounded at any length
        self.k_norm = nn.RMSNorm(d // heads, eps=1e-6)
        self.out = nn.Linear(d, d)

    def forward(self, x, rope, mask, past=None, kv_only=False):
        """x (b, L, d); past = cached (K, V) or None.

        Keys are ordered [past, own tokens]; `mask` (L, keys) matches that order.
        Returns the output (b, L, d) and this call's own (K, V), for the cache; with
        `kv_only`, (None, K/V) without attending (what a cache append needs).
        """
        b, L, d = x.shape
        q, k, v = rearrange(self.qkv(x), "b L (three h hd) -> three b h L hd", three=3,
                            h=self.heads)
        q = None if kv_only else apply_rope(self.q_norm(q), *rope)
        k = apply_rope(self.k_norm(k), *rope)  # (b, h, L, hd)
        own = (k, v)
        if past is not None:
            k = torch.cat([past[0], k], dim=2)  # (b, h, keys, hd)
            v = torch.cat([past[1], v], dim=2)
        if q is None:  # keys and values only: nothing reads this call's output
            return None, own
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (b, h, L, hd)
        return self.out(rearrange(y, "b h L hd -> b L (h hd)")), own


class CrossAttention(nn.Module):
    """Frame tokens of each chunk attend to that chunk's caption tokens only."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """x (b, n, L, d) chunk tokens, text (b, n, k, d) -> (b, n, L, d)."""
        b, n = x.shape[:2]
        q = rearrange(self.q(x), "b n L (h hd) -> (b n) h L hd", h=self.heads)
        k, v = rearrange(self.kv(text), "b n k (two h hd) -> two (b n) h k hd", two=2,
                         h=self.heads)
        y = F.scaled_dot_product_attention(q, k, v)  # (b n, h, L, hd)
        return self.out(rearrange(y, "(b n) h L hd -> b n L (h hd)", b=b))


class MemoryAttention(nn.Module):
    """Tokens of the generated chunk (b, L, d) attend to memory tokens (b, m, d), RoPE on
    both (the memory's positions re-assigned relative to the chunk) and q/k RMS norm. The
    output projection starts at zero, so a fresh one changes nothing; a sample without a
    valid memory slot gets exactly zero."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * d)
        self.q_norm = nn.RMSNorm(d // heads, eps=1e-6)
        self.k_norm = nn.RMSNorm(d // heads, eps=1e-6)
        self.out = nn.Linear(d, d)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def keys_values(self, memory: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """The memory tokens' K (normed, rotated) and V, each (b, heads, m, hd)."""
        k, v = rearrange(self.kv(memory["tokens"]), "b m (two h hd) -> two b h m hd", two=2,
                         h=self.heads)
        return apply_rope(self.k_norm(k), *memory["rope_k"]), v

    def forward(self, x, memory: dict) -> torch.Tensor:
        """x (b, L, d); memory: tokens (b, m, d), mask (b, m) bool, rope_q / rope_k, and
        optionally this block's "kv" already computed (`keys_values`)."""
        q = rearrange(self.q(x), "b L (h hd) -> b h L hd", h=self.heads)
        q = apply_rope(self.q_norm(q), *memory["rope_q"])
        k, v = memory["kv"] if "kv" in memory else self.keys_values(memory)
        mask = memory["mask"]
        any_valid = mask.any(dim=1)  # (b,)
        safe = mask | ~any_valid[:, None]  # attend somewhere; zeroed below
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=safe[:, None, None, :])
        y = self.out(rearrange(y, "b h L hd -> b L (h hd)"))
        return y * any_valid[:, None, None].to(y.dtype)


def modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale) + shift


class Block(nn.Module):
    """AdaLN-zero DiT block: self-attention, per-chunk text cross-attention, MLP.

    The modulation (shift, scale, gate for attention and MLP) comes per token from the
    conditioning vector; its projection starts at zero, so a fresh block is the identity.
    """

    def __init__(self, d: int, heads: int, mlp_ratio: float, memory: bool = False):
        super().__init__()
        if memory:
            self.norm_memory = nn.LayerNorm(d, eps=1e-6)
            self.memory_attn = MemoryAttention(d, heads)
        self.norm1 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.attn = SelfAttention(d, heads)
        self.norm_text = nn.LayerNorm(d, eps=1e-6)
        self.cross = CrossAttention(d, heads)
        self.norm2 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        hidden = int(d * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(d, hidden), nn.GELU(approximate="tanh"),
                                 nn.Linear(hidden, d))
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(d, 6 * d))
        nn.init.zeros_(self.ada[1].weight)
        nn.init.zeros_(self.ada[1].bias)

    def forward(self, x, c_frames, l, text, rope, mask, past=None, kv_only=False,
                memory=None):
        """x (b, n f l, d); conditioning per frame c_frames (b, t, d), modulating the frame's
        l tokens (computed here, so gradient checkpointing keeps x, not a (b, L, 6 d)
        modulation); text (b, n, k, d); memory (see `MemoryAttention`) is read by the last
        chunk only. Returns x and this call's (K, V); with `kv_only`, (None, K/V): the last
        block of a cache append, whose output nobody reads."""
        mod = per_token(self.ada, c_frames, l)  # (b, n f l, 6 d)
        s1, sc1, g1, s2, sc2, g2 = mod.chunk(6, dim=-1)  # each (b, L, d)
        y, kv = self.attn(modulate(self.norm1(x), s1, sc1), rope, mask, past, kv_only)
        if kv_only:
            return None, kv
        x = x + g1 * y
        n = text.shape[1]
        chunks = rearrange(x, "b (n L) d -> b n L d", n=n)
        chunks = chunks + self.cross(self.norm_text(chunks), text)
        if memory is not None:
            last = chunks[:, -1]  # (b, L, d): the chunk being generated
            last = last + self.memory_attn(self.norm_memory(last), memory)
            chunks = torch.cat([chunks[:, :-1], last[:, None]], dim=1)
        x = rearrange(chunks, "b n L d -> b (n L) d")
        x = x + g2 * self.mlp(modulate(self.norm2(x), s2, sc2))
        return x, kv


# ----------------------------------------------------------------------------------------
# The KV cache of a streaming session
# ----------------------------------------------------------------------------------------


@dataclass
class KVCache:
    """Per-layer keys/values of the last `window_chunks` clean chunks, plus what a new chunk
    needs to continue the sequence: how many chunks came before (its absolute frame index
    for RoPE) and the last camera pose (its first frame's relative pose).

    A chunk appended with `defer=True` waits in `pending` (its inputs by name) until the next
    `forward_chunk`, which computes its K/V in the same pass as the new chunk's velocity."""

    batch_size: int
    keys: list  # per layer: (b, heads, cached tokens, hd) or None while empty
    values: list
    chunks: int = 0  # chunks appended so far, the pending one and evicted ones included
    last_pose: torch.Tensor | None = None  # (b, 4, 4) float64 of the last chunk with K/V
    pending: dict | None = None  # a clean chunk appended with defer=True, not yet run

    @property
    def committed(self) -> int:
        """Chunks whose K/V have been computed (evicted ones included)."""
        return self.chunks - (self.pending is not None)

    def past(self, layer: int):
        return None if self.keys[layer] is None else (self.keys[layer], self.values[layer])

    def snapshot(self) -> tuple:
        """Everything `restore` needs to put the cache back (tensors are never written to in
        place, so references suffice)."""
        return list(self.keys), list(self.values), self.chunks, self.last_pose, self.pending

    def restore(self, snapshot: tuple) -> None:
        keys, values, self.chunks, self.last_pose, self.pending = snapshot
        self.keys[:], self.values[:] = keys, values


# ----------------------------------------------------------------------------------------
# Masks and per-token conditioning
# ----------------------------------------------------------------------------------------


def block_causal_mask(n: int, chunk_tokens: int, window: int, device=None) -> torch.Tensor:
    """(L, L) bool, True = may attend, for [chunk 0, ..., chunk n-1] tokens: chunk i sees
    chunks i - window .. i (itself bidirectionally)."""
    ids = torch.arange(n, device=device).repeat_interleave(chunk_tokens)
    q, k = ids[:, None], ids[None, :]
    return (k <= q) & (k >= q - window)


def per_token(fn, c_frames: torch.Tensor, l: int):
    """Apply `fn` to per-frame conditioning (b, t, d), then spread the result over each
    frame's l tokens: (b, t l, d'). Cheaper than projecting every token."""
    return fn(c_frames).repeat_interleave(l, dim=1)


# ----------------------------------------------------------------------------------------
# The world model
# ----------------------------------------------------------------------------------------


class WorldModel(ModelMixin, ConfigMixin):
    """Chunk-causal DiT: noisy latent chunks + time + camera/action + text -> velocity.

    `forward` runs a whole clip (training); `new_cache` / `forward_chunk` / `append_chunk`
    run it chunk by chunk with a KV cache (sampling), with the same numbers.
    `enable_gradient_checkpointing()` (diffusers) recomputes each block in the backward pass.
    """

    config_name = "config.json"
    _supports_gradient_checkpointing = True

    @register_to_config
    def __init__(self, latent_channels: int, latent_size: int, width: int, depth: int,
                 heads: int, patch_size: int = 1, chunk_frames: int = 4,
                 window_chunks: int = 8, control: str = "both", action_width: int = 7,
                 text_dim: int = 384, text_tokens: int = 3, memory_tokens: int = 0,
                 memory_compress: int = 1, cache_latent: bool = False,
                 mlp_ratio: float = 4.0):
        super().__init__()
        self.gradient_checkpointing = False
        _check_architecture(latent_size, width, heads, patch_size, chunk_frames,
                            window_chunks, control, action_width)
        d, p = width, patch_size
        self.grid = latent_size // p  # tokens per side
        in_channels = latent_channels + (latent_channels + 1 if cache_latent else 0)
        self.patch_in = nn.Linear(in_channels * p * p, d)
        self.time_embed = cond.TimestepEmbedder(d)
        self.pose_embed = cond.PoseEmbedder(d) if control in ("pose", "both") else None
        self.action_embed = (cond.ActionEmbedder(d, action_width)
                             if control in ("action", "both") else None)
        self.text_embed = cond.TextEmbedder(d, text_dim, text_tokens)
        self.memory_encoder = None
        if memory_tokens > 0:
            self.memory_encoder = MemoryEncoder(d, chunk_frames, self.grid, memory_compress)
            if memory_tokens < self.memory_encoder.per_chunk:
                raise ValueError(f"memory_tokens={memory_tokens} holds no chunk: a chunk is "
                                 f"{self.memory_encoder.per_chunk} tokens at "
                                 f"memory_compress={memory_compress}")
        self.blocks = nn.ModuleList(Block(d, heads, mlp_ratio, memory_tokens > 0)
                                    for _ in range(depth))
        self.final_norm = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.final_ada = nn.Sequential(nn.SiLU(), nn.Linear(d, 2 * d))
        self.patch_out = nn.Linear(d, p * p * latent_channels)
        for layer in (self.final_ada[1], self.patch_out):  # zero init: v = 0 at the start
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    @classmethod
    def from_config_dataclass(cls, model_cfg: ModelConfig, latent_channels: int,
                              latent_size: int) -> "WorldModel":
        return cls(latent_channels=latent_channels, latent_size=latent_size,
                   **dataclasses.asdict(model_cfg))

    @classmethod
    def from_checkpoint(cls, path, model_cfg: ModelConfig | None = None,
                        latent_channels: int | None = None, latent_size: int | None = None
                        ) -> "WorldModel":
        """Load a save_pretrained directory (safetensors only), checking its config first
        against what the caller expects; a mismatch raises ValueError naming the field."""
        found = read_model_config(Path(path))
        expected = dataclasses.asdict(model_cfg) if model_cfg is not None else {}
        expected.update({k: v for k, v in (("latent_channels", latent_channels),
                                           ("latent_size", latent_size)) if v is not None})
        for key, want in expected.items():
            if found.get(key) != want:
                raise ValueError(f"checkpoint {Path(path)} has {key}={found.get(key)!r}; "
                                 f"expected {key}={want!r}")
        return load_module(cls, path)

    @torch.no_grad()
    def memory_gates(self) -> dict[str, float]:
        """The norms of what lets memory into the stream, zero when a fine-tune starts
        (`train.memory.load_base`): the memory attentions' output projections
        ("memory_gate_norm") and the patch embedding's columns for the 3D-cache input
        ("cache_gate_norm"), each for a model that has it. Logged over training: a gate that
        stays near zero is a memory the model learned to ignore."""
        gates = {}
        outs = [b.memory_attn.out.weight for b in self.blocks if hasattr(b, "memory_attn")]
        if outs:
            gates["memory_gate_norm"] = float(torch.stack([w.float().norm() for w in outs])
                                              .norm())
        if self.config.cache_latent:  # columns (c p q): the latent's c, then the cache's c + 1
            p2 = self.config.patch_size ** 2
            latent = (self.patch_in.in_features // p2 - 1) // 2 * p2
            gates["cache_gate_norm"] = float(self.patch_in.weight[:, latent:].float().norm())
        return gates

    # ---- shared pieces ------------------------------------------------------------------

    def _tokens(self, x: torch.Tensor, cache_latent: torch.Tensor | None) -> torch.Tensor:
        """Latents (b, t, c, h, w) [+ cache latent (b, t, c+1, h, w)] -> (b, t l, d)."""
        if self.config.cache_latent and cache_latent is None:  # no cache: coverage 0
            cache_latent = x.new_zeros(*x.shape[:2], x.shape[2] + 1, *x.shape[3:])
        if cache_latent is not None:
            x = torch.cat([x, cache_latent.to(x.dtype)], dim=2)
        p = self.config.patch_size
        x = rearrange(x, "b t c (gh p) (gw q) -> b (t gh gw) (c p q)", p=p, q=p)
        return self.patch_in(x)

    def _frame_cond(self, t_frames, actions, c2w, previous_pose) -> torch.Tensor:
        """Per-frame AdaLN input (b, t, d): time + the embeddings `control` selects."""
        c = self.time_embed(t_frames)  # (b, t, d)
        if self.pose_embed is not None:
            c = c + self.pose_embed(cond.relative_pose_features(c2w, previous_pose))
        if self.action_embed is not None:
            c = c + self.action_embed(actions)
        return c

    def _memory(self, memory: MemoryChunks | None, reference, rope, origin: int
                ) -> dict | None:
        """What MemoryAttention reads: the chunks' tokens (b, m, d), key mask, and RoPE for
        keys (re-assigned relative to the generated chunk, whose first frame is `origin`)
        and queries (the last chunk's tokens of `rope`); reference (b, 4, 4) is the
        generated chunk's first camera."""
        if memory is None:
            return None
        b, k, f = memory.latents.shape[:3]
        patches = self._tokens(memory.latents.flatten(1, 2), None)  # (b, k f l, d)
        patches = patches.reshape(b, k, f, self.grid, self.grid, -1)
        tokens, mask, pos = self.memory_encoder(patches, memory, reference)
        own = f * self.grid ** 2
        hd = self.config.width // self.config.heads
        pos = pos + torch.tensor([origin, 0.0, 0.0], device=pos.device)
        return {"tokens": tokens, "mask": mask, "rope_k": rope_angles(pos, hd),
                "rope_q": tuple(r[-own:] for r in rope)}

    @torch.no_grad()
    def read_memory(self, memory: MemoryChunks, c2w: torch.Tensor, cache: KVCache
                    ) -> MemoryRead:
        """`memory` encoded for the next chunk on `cache`, whose cameras are c2w (b, f, 4, 4):
        its tokens and every block's memory K/V. Pass it as `memory` to each sampling step's
        `forward_chunk` of that chunk: the same numbers as `memory` itself, encoded once."""
        cfg = self.config
        self._check_memory(memory, cache.batch_size, c2w)
        cond.check_pose_tensor(c2w, cache.batch_size, cfg.chunk_frames)
        origin = cache.chunks * cfg.chunk_frames  # the next chunk's first frame
        rope = rope_angles(_positions(origin, cfg.chunk_frames, self.grid, c2w.device),
                           cfg.width // cfg.heads)
        encoded = self._memory(memory, c2w[:, 0], rope, origin)
        return MemoryRead(origin, c2w[:, 0], encoded,
                          [block.memory_attn.keys_values(encoded) for block in self.blocks])

    def _trunk(self, tokens, c_frames, text, memory, first_frame, mask, past=None,
               kv_only=False, reference=None):
        """Run the blocks. tokens (b, t l, d), c_frames (b, t, d), text (b, n, k, d),
        memory (MemoryChunks, read by the last chunk, whose first camera is `reference`
        (b, 4, 4)) or None, past = cache or None. Returns v (b, t, c, h, w), K/V; with
        `kv_only` (a cache append) v is None and the last block stops at its K/V."""
        l = self.grid ** 2
        frames = tokens.shape[1] // l
        pos = _positions(first_frame, frames, self.grid, tokens.device)
        rope = rope_angles(pos, self.config.width // self.config.heads)
        # memory sits just before the last chunk's first frame, however long ago it was seen
        origin = first_frame + frames - self.config.chunk_frames
        if isinstance(memory, MemoryRead):  # read once for this chunk (`read_memory`)
            memory.check(origin, reference)
            mems = [{**memory.encoded, "kv": kv} for kv in memory.kv]
        else:
            mems = [self._memory(memory, reference, rope, origin)] * len(self.blocks)
        x, kvs = tokens, []
        checkpointed = self.gradient_checkpointing and torch.is_grad_enabled()
        for i, block in enumerate(self.blocks):
            args = (x, c_frames, l, text, rope, mask,
                    None if past is None else past.past(i),
                    kv_only and i == len(self.blocks) - 1, mems[i])
            x, kv = (self._gradient_checkpointing_func(block, *args) if checkpointed
                     else block(*args))
            kvs.append(kv)
        if kv_only:
            return None, kvs
        shift, scale = per_token(self.final_ada, c_frames, l).chunk(2, dim=-1)
        out = self.patch_out(modulate(self.final_norm(x), shift, scale))
        p = self.config.patch_size
        v = rearrange(out, "b (t gh gw) (c p q) -> b t c (gh p) (gw q)", t=frames,
                      gh=self.grid, p=p, q=p)
        return v, kvs

    # ---- full pass (training) -----------------------------------------------------------

    def forward(self, x, t, actions=None, c2w=None, text=None, text_drop=None, memory=None,
                cache_latent=None) -> torch.Tensor:
        """Velocity (b, t, c, h, w) for noisy latents x (b, t, c, h, w) at flow times
        t (b, n), one per chunk; actions (b, t, a), c2w (b, t, 4, 4) absolute poses,
        text (b, n, k, e) captions, text_drop (b, n) bool, memory (MemoryChunks, read by
        the last chunk), cache_latent (b, t, c+1, h, w)."""
        b, frames = self._check_inputs(x, actions, c2w, memory, cache_latent)
        f = self.config.chunk_frames
        n = frames // f
        cond.check_time(t, (b, n))
        cond.check_text(text, text_drop, b, n, self.config.text_tokens, self.config.text_dim)
        c_frames = self._frame_cond(t.repeat_interleave(f, dim=1), actions, c2w, None)
        mask = block_causal_mask(n, f * self.grid ** 2, self.config.window_chunks, x.device)
        v, _ = self._trunk(self._tokens(x, cache_latent), c_frames,
                           self.text_embed(text, text_drop, b, n), memory, 0, mask,
                           reference=None if memory is None else c2w[:, -f])
        return v

    # ---- streaming (sampling) -----------------------------------------------------------

    def new_cache(self, batch_size: int) -> KVCache:
        if not (isinstance(batch_size, int) and batch_size > 0):
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        depth = self.config.depth
        return KVCache(batch_size, [None] * depth, [None] * depth)

    def _check_chunk(self, x, t, cache, actions, c2w, text, text_drop, memory,
                     cache_latent) -> tuple:
        """Check one chunk x (b, f, c, h, w) at time t (b,) and its conditioning against the
        cache; return (b, f) and the text, drop flags as one-chunk (b, 1, ...) tensors."""
        b, frames = self._check_inputs(x, actions, c2w, memory, cache_latent)
        if frames != self.config.chunk_frames or b != cache.batch_size:
            raise ValueError(f"a chunk must have shape (b={cache.batch_size}, "
                             f"f={self.config.chunk_frames}, c, h, w); got {tuple(x.shape)}")
        cond.check_time(t, (b,), "(b,) flow time of the chunk")
        text = None if text is None else text[:, None]  # (b, 1, k, e)
        drop = None if text_drop is None else text_drop[:, None]  # (b, 1)
        cond.check_text(text, drop, b, 1, self.config.text_tokens, self.config.text_dim)
        if self.pose_embed is not None and cache.committed > 0 and cache.last_pose is None:
            raise ValueError("cache has no last pose: append_chunk was called without c2w")
        return b, frames, text, drop

    def _chunk(self, x, t, cache, actions, c2w, text, text_drop, memory, cache_latent,
               kv_only=False):
        """One chunk x (b, f, c, h, w) at time t (b,) against the cache (no pending chunk):
        (v, K/V), v None with `kv_only`."""
        b, frames, text, drop = self._check_chunk(x, t, cache, actions, c2w, text, text_drop,
                                                  memory, cache_latent)
        c_frames = self._frame_cond(t[:, None].expand(b, frames), actions, c2w,
                                    cache.last_pose)
        # no mask: the cache holds only the window, and a chunk sees itself in full
        return self._trunk(self._tokens(x, cache_latent), c_frames,
                           self.text_embed(text, drop, b, 1), memory,
                           cache.committed * frames, None, past=cache, kv_only=kv_only,
                           reference=None if memory is None else c2w[:, 0])

    def _with_pending(self, x, t, cache, actions, c2w, text, text_drop, memory, cache_latent):
        """The pending context chunk (at its time, 0 when clean) and the next chunk
        x (b, f, c, h, w) at time t (b,) in one pass against the cache, as a 2-chunk clip:
        the context chunk sees the cache and itself, the next one the window it will have
        (the cache minus what the append evicts) plus both chunks. Commits the context
        chunk's K/V; returns x's v."""
        p = cache.pending
        b, f, text, drop = self._check_chunk(x, t, cache, actions, c2w, text, text_drop,
                                             memory, cache_latent)
        both = lambda a, c: None if a is None else torch.cat([a, c], dim=1)  # noqa: E731
        t_frames = torch.cat([p["t"][:, None].expand(b, f), t[:, None].expand(b, f)],
                             dim=1)  # (b, 2 f)
        c_frames = self._frame_cond(t_frames, both(p["actions"], actions),
                                    both(p["c2w"], c2w), cache.last_pose)
        p_text = None if p["text"] is None else p["text"][:, None]
        p_drop = None if p["text_drop"] is None else p["text_drop"][:, None]
        text = torch.cat([self.text_embed(p_text, p_drop, b, 1),
                          self.text_embed(text, drop, b, 1)], dim=1)  # (b, 2, k, d)
        own = f * self.grid ** 2
        past = 0 if cache.keys[0] is None else cache.keys[0].shape[2]
        mask = torch.ones(2 * own, past + 2 * own, dtype=torch.bool, device=x.device)
        mask[:own, past + own:] = False  # the clean chunk does not see the next one
        mask[own:, :max(past - (self.config.window_chunks - 1) * own, 0)] = False  # evicted
        v, kvs = self._trunk(self._tokens(both(p["x"], x),
                                          self._cache_pair(p["x"], p["cache_latent"], x,
                                                           cache_latent)),
                             c_frames, text, memory, cache.committed * f, mask, past=cache,
                             reference=None if memory is None else c2w[:, 0])
        self._commit(cache, [(k[:, :, :own], val[:, :, :own]) for k, val in kvs], p["c2w"])
        return v[:, f:]

    @staticmethod
    def _cache_pair(p_x, p_cache, x, cache_latent):
        """The 3D-cache inputs (b, 2 f, c + 1, h, w) of a pending context chunk p_x and the
        next chunk x, a missing one as zeros (coverage 0, as training gives context frames):
        the chunk being generated keeps its render when the context chunk has none. None
        when neither has one."""
        if p_cache is None and cache_latent is None:
            return None

        def filled(c, like):
            if c is not None:
                return c.to(like.dtype)
            return like.new_zeros(*like.shape[:2], like.shape[2] + 1, *like.shape[3:])
        return torch.cat([filled(p_cache, p_x), filled(cache_latent, x)], dim=1)

    def forward_chunk(self, x, t, cache: KVCache, actions=None, c2w=None, text=None,
                      text_drop=None, memory=None, cache_latent=None) -> torch.Tensor:
        """Velocity (b, f, c, h, w) of the next chunk x at time t (b,), attending to the
        cached context; text (b, k, e), text_drop (b,), memory (MemoryChunks, or its
        `read_memory` for this chunk) or None. What the cache holds does not change; a
        pending chunk's K/V are computed in this same pass (apart while gradients are on: a
        pending chunk's K/V never carry gradient)."""
        if cache.pending is not None:
            if not torch.is_grad_enabled():
                return self._with_pending(x, t, cache, actions, c2w, text, text_drop, memory,
                                          cache_latent)
            with torch.no_grad():
                self.flush(cache)
        v, _ = self._chunk(x, t, cache, actions, c2w, text, text_drop, memory, cache_latent)
        return v

    def append_chunk(self, x_clean, cache: KVCache, actions=None, c2w=None, text=None,
                     text_drop=None, cache_latent=None, defer=False, t=None) -> None:
        """Run the context chunk (b, f, c, h, w) at flow time t (b,) (default 0: clean) and
        append its K/V to the cache, evicting chunks beyond `window_chunks` so the cost per
        chunk stays flat. A small t > 0 (with x noised to it) is diffusion forcing's noisy
        context (`sample.context_noise`). A context chunk never reads memory.

        With `defer` (for sampling) the chunk is checked now but run within the next
        `forward_chunk`, in one pass with the next chunk: the same numbers, one pass fewer
        per chunk (a 4-step sampler makes 4 passes, not 5). `flush` runs a pending chunk on
        its own."""
        self.flush(cache)
        if t is None:
            t = torch.zeros(x_clean.shape[0], device=x_clean.device, dtype=x_clean.dtype)
        if defer:
            self._check_chunk(x_clean, t, cache, actions, c2w, text, text_drop, None,
                              cache_latent)
            cache.pending = dict(x=x_clean, t=t, actions=actions, c2w=c2w, text=text,
                                 text_drop=text_drop, cache_latent=cache_latent)
            cache.chunks += 1
            return
        _, kvs = self._chunk(x_clean, t, cache, actions, c2w, text, text_drop, None,
                             cache_latent, kv_only=True)
        self._commit(cache, kvs, c2w)

    def flush(self, cache: KVCache) -> None:
        """Compute the K/V of the pending chunk, if any, on its own (before saving a cache,
        or when the next pass cannot take it along)."""
        p = cache.pending
        if p is None:
            return
        _, kvs = self._chunk(p["x"], p["t"], cache, p["actions"], p["c2w"], p["text"],
                             p["text_drop"], None, p["cache_latent"], kv_only=True)
        self._commit(cache, kvs, p["c2w"])

    def _commit(self, cache: KVCache, kvs: list, c2w) -> None:
        """Append one chunk's per-layer (K, V), each (b, heads, own tokens, hd), to the cache
        (the pending chunk's, if there is one), keeping the last `window_chunks` chunks."""
        keep = self.config.window_chunks * self.config.chunk_frames * self.grid ** 2
        for i, (k, v) in enumerate(kvs):
            # torch.cat makes new tensors: earlier K/V are never written to
            if cache.keys[i] is not None:
                k, v = torch.cat([cache.keys[i], k], dim=2), torch.cat([cache.values[i], v], 2)
            cache.keys[i], cache.values[i] = k[:, :, -keep:], v[:, :, -keep:]
        if cache.pending is None:
            cache.chunks += 1
        cache.pending = None
        if c2w is not None:
            cache.last_pose = c2w[:, -1].double()

    # ---- validation -----------------------------------------------------------------------

    def _check_memory(self, memory: MemoryChunks, b: int, c2w) -> None:
        cfg = self.config
        if self.memory_encoder is None:
            raise ValueError("memory was given but the model has memory_tokens=0 (no "
                             "memory attention)")
        if c2w is None:
            raise ValueError("memory needs the chunk's cameras c2w: memory tokens carry "
                             "their pose relative to it")
        memory.check(b, cfg.chunk_frames, cfg.latent_channels, cfg.latent_size,
                     cfg.memory_tokens // self.memory_encoder.per_chunk)

    def _check_inputs(self, x, actions, c2w, memory, cache_latent) -> tuple[int, int]:
        """Check latents and the conditioning `control` needs; return (b, frames)."""
        cfg = self.config
        b, frames = _check_latents("x", x, cfg.latent_channels, cfg.latent_size,
                                   cfg.chunk_frames)
        if self.action_embed is not None:
            if actions is None:
                raise ValueError(f"actions (b, t, a) are required with control={cfg.control!r}")
            cond.check_actions(actions, b, frames, cfg.action_width)
        if self.pose_embed is not None:
            if c2w is None:
                raise ValueError(f"c2w (b, t, 4, 4) is required with control={cfg.control!r}")
            cond.check_pose_tensor(c2w, b, frames)
        if memory is not None and not isinstance(memory, MemoryRead):  # a read was checked
            self._check_memory(memory, b, c2w)
        if cache_latent is not None and not cfg.cache_latent:
            raise ValueError("cache_latent was given but the model has cache_latent=False")
        if cache_latent is not None:
            cond.check_tensor("cache_latent", cache_latent,
                              (b, frames, cfg.latent_channels + 1, cfg.latent_size,
                               cfg.latent_size), "(b, t, c+1, h, w) cache latent + coverage")
        return b, frames


def _positions(first_frame: int, frames: int, grid: int, device):
    """(t l, 3) RoPE positions (frame, row, col), frames counted from the clip's absolute
    first frame."""
    f, r, c = torch.meshgrid(torch.arange(first_frame, first_frame + frames, device=device),
                             torch.arange(grid, device=device),
                             torch.arange(grid, device=device), indexing="ij")
    return torch.stack([f, r, c], dim=-1).reshape(-1, 3)


def _check_latents(name, x, channels, size, chunk_frames) -> tuple[int, int]:
    if not isinstance(x, torch.Tensor) or x.ndim != 5:
        raise ValueError(f"{name} must be a (b, t, c, h, w) tensor, got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    b, frames, c, h, w = x.shape
    if c != channels:
        raise ValueError(f"{name} has {c} channels; expected latent_channels={channels}")
    if (h, w) != (size, size):
        raise ValueError(f"{name} has latent size {h}x{w}; expected latent_size={size} "
                         f"({size}x{size})")
    if frames == 0 or frames % chunk_frames:
        raise ValueError(f"{name} has {frames} frames; expected a positive multiple of "
                         f"chunk_frames={chunk_frames}")
    if cond.checking_values() and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite")
    return b, frames


def _check_architecture(latent_size, width, heads, patch_size, chunk_frames, window_chunks,
                        control, action_width):
    if control not in CONTROLS:
        raise ValueError(f"control must be one of {CONTROLS}, got {control!r}")
    if latent_size % patch_size:
        raise ValueError(f"latent_size={latent_size} must be a multiple of "
                         f"patch_size={patch_size}")
    if width % heads or (width // heads) % 2 or width // heads < 6:
        raise ValueError(f"width={width} / heads={heads} must give an even head dim >= 6 "
                         f"(3D RoPE rotates pairs on 3 axes)")
    if chunk_frames < 1 or window_chunks < 1:
        raise ValueError(f"chunk_frames and window_chunks must be >= 1, got {chunk_frames}, "
                         f"{window_chunks}")
    if action_width < cond.N_CONTINUOUS:
        raise ValueError(f"action_width must be >= {cond.N_CONTINUOUS} (forward, right, yaw, "
                         f"pitch), got {action_width}")
