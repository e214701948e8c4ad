"""Memory: what carries the past beyond the KV-cache window (the switches are
`config.MemoryConfig`; see docs/design.md).

    cache3d   unproject frames with depth and poses, warp them into another view, a fused
              point cache with a z-buffered render, reprojection error
    retrieval the one rule that picks a chunk's memory: the sink and the past chunks whose
              view overlaps the next chunk's most (WorldPlay); the chunk bank of a rollout
    stream    one rollout (`Stream`), the one place chunks are made at run time: the KV
              window and, with memory on, the bank and the 3D cache rendered into each new
              chunk's cameras; saved and loaded bit for bit

The network half (memory tokens, their compression, the gated memory attention) lives with
the world model, in `model/memory_tokens.py` and `model/dit.py`.
"""
