"""`use_threads`: --threads reaches torch and numpy's BLAS alike."""

import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from worldlab.threads import use_threads


def test_use_threads_sets_torch_and_blas_then_restores():
    before = torch.get_num_threads()
    with threadpool_limits(None):  # restores every pool on exit
        use_threads(1)
        assert torch.get_num_threads() == 1
        blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
        assert blas and all(p["num_threads"] == 1 for p in blas)
    torch.set_num_threads(before)


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2", None])
def test_use_threads_refuses_a_bad_count_and_changes_nothing(bad):
    before = torch.get_num_threads()
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        use_threads(bad)
    assert torch.get_num_threads() == before


def test_threads_within_a_block_then_as_before():
    from worldlab.threads import threads_within

    before = torch.get_num_threads(), [p["num_threads"] for p in threadpool_info()]
    with threads_within(1):
        assert torch.get_num_threads() == 1
        assert all(p["num_threads"] == 1 for p in threadpool_info() if p["user_api"] == "blas")
    assert (torch.get_num_threads(), [p["num_threads"] for p in threadpool_info()]) == before
