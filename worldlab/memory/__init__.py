"""Memory: what carries the past beyond the KV-cache window.

    cache3d   unproject frames with depth and poses, warp them into another view, a fused
              point cache with a z-buffered render, reprojection error
    retrieval past chunks chosen by field-of-view overlap with the next chunk (WorldPlay)

Retrieved frames, compressed memory tokens and the attention sink land here as their
switches are built (see docs/design.md).
"""
