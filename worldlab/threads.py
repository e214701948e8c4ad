"""`use_threads` (and `threads_within`, for a block): one CPU thread budget for torch and
the BLAS under numpy together.

`--threads N` on a command means N threads for all of its arithmetic. torch's own setting
does not reach numpy's BLAS (OpenBLAS), which otherwise starts a thread per core for every
matrix product, however small: the 3D cache projects its points with an (n, 3) @ (3, 3)
product per frame, and beside another job on the same two cores each such call waits for
a busy core (PointCache projection of 65,536 points: 25 ms with OpenBLAS's default threads
beside two jobs, 2.8 ms with one thread).
"""

from __future__ import annotations

from contextlib import contextmanager


def use_threads(n: int) -> None:
    """torch and every BLAS/OpenMP pool of the process on `n` threads from now on."""
    import torch
    from threadpoolctl import threadpool_limits

    if not (isinstance(n, int) and n > 0):
        raise ValueError(f"threads must be a positive integer, got {n!r}")
    threadpool_limits(n)
    torch.set_num_threads(n)


@contextmanager
def threads_within(n: int):
    """`use_threads(n)` inside the block; every pool as it was after it."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    try:
        with threadpool_limits(None):  # restores every pool on the way out
            use_threads(n)
            yield
    finally:
        torch.set_num_threads(before)
