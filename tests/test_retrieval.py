"""Retrieved memory (`memory/retrieval.py`): field-of-view overlap of cameras, the selection
rule shared by training and play, and the play-time chunk bank."""

import numpy as np
import pytest
import torch

from worldlab import camera
from worldlab.memory.retrieval import ChunkBank, chunk_overlap, fov_overlap, select_memory

HW = (32, 32)
K = camera.intrinsics_from_fov(32, 32, 90.0)
F = 4  # frames per chunk


def pose(x=0.0, y=0.0, yaw=0.0):
    return camera.pose_from_heading(np.array([x, y, 0.0]), yaw)


def chunked(c2w: np.ndarray) -> np.ndarray:
    """Poses (t, 4, 4), t a multiple of F -> (t / F, F, 4, 4)."""
    return c2w.reshape(-1, F, 4, 4)


def random_chunks(n: int, seed: int) -> np.ndarray:
    """n chunks of F poses, each chunk at a random place facing a random way."""
    rng = np.random.default_rng(seed)
    return np.stack([np.stack([pose(*rng.uniform(-3, 3, 2), rng.uniform(-180, 180))] * F)
                     for _ in range(n)])


# ----------------------------------------------------------------------------------------
# fov_overlap
# ----------------------------------------------------------------------------------------


def test_a_camera_overlaps_itself_fully():
    a = pose(1.0, 2.0, 30.0)
    assert fov_overlap(a, a, K, HW) == 1.0
    depth = np.random.default_rng(0).uniform(0.5, 10.0, HW)
    assert fov_overlap(a, a, K, HW, src_depth=depth) == 1.0


def test_a_camera_turned_around_overlaps_nothing():
    a = pose(yaw=0.0)
    assert fov_overlap(a, pose(yaw=180.0), K, HW) == 0.0
    assert fov_overlap(a, pose(yaw=180.0), K, HW, src_depth=np.full(HW, 2.0)) == 0.0


def test_overlap_shrinks_as_the_camera_moves_sideways():
    a = pose(yaw=0.0)
    shares = [fov_overlap(a, pose(y=-d), K, HW) for d in (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)]
    assert shares[0] == 1.0
    assert all(s > t for s, t in zip(shares, shares[1:])), shares
    assert 0.0 < shares[-1] < 0.5


def test_overlap_shrinks_as_the_camera_turns():
    a = pose(yaw=0.0)
    shares = [fov_overlap(a, pose(yaw=y), K, HW) for y in (0, 20, 40, 60, 80)]
    assert all(s > t for s, t in zip(shares, shares[1:])), shares


def test_depth_shows_what_the_pose_only_frustum_cannot():
    """A wall 1 m ahead; the destination stands 2 m forward, past the wall, facing on."""
    a, past = pose(), pose(x=2.0)
    wall = np.full(HW, 1.0)
    assert fov_overlap(a, past, K, HW, src_depth=wall) == 0.0
    assert 0.0 < fov_overlap(a, past, K, HW) < 1.0  # the frustum reaches beyond 2 m
    # a wall 5 m ahead is still in front of the moved camera: it sees the wall's middle
    assert 0.0 < fov_overlap(a, past, K, HW, src_depth=np.full(HW, 5.0)) < 1.0
    # and the camera behind sees all of the wall the moved one sees 3 m ahead of it
    assert fov_overlap(past, a, K, HW, src_depth=np.full(HW, 3.0)) == 1.0


def test_depth_misses_are_ignored():
    a = pose()
    depth = np.full(HW, np.inf)
    assert fov_overlap(a, a, K, HW, src_depth=depth) == 0.0  # nothing hit: nothing to share
    depth[:, :16] = 3.0  # left half hit; the right half is sky
    assert fov_overlap(a, a, K, HW, src_depth=depth) == 1.0
    depth[:, 16:] = 0.0  # non-positive depth is ignored too
    assert fov_overlap(a, a, K, HW, src_depth=depth) == 1.0


def test_many_sources_at_once_match_one_by_one():
    srcs = np.stack([pose(yaw=y) for y in (0, 30, 60, 180)])
    depth = np.random.default_rng(1).uniform(1.0, 6.0, (4,) + HW)
    dst = pose(0.3, 0.0, 10.0)
    for d in (None, depth):
        many = fov_overlap(srcs, dst, K, HW, src_depth=d)
        one = [fov_overlap(s, dst, K, HW, src_depth=None if d is None else d[i])
               for i, s in enumerate(srcs)]
        assert many.shape == (4,) and np.allclose(many, one)


@pytest.mark.parametrize("kw, match", [
    (dict(src_c2w=np.zeros((4, 4))), "src_c2w"),
    (dict(src_c2w=np.full((4, 4), np.nan)), "src_c2w must be finite"),
    (dict(dst_c2w=np.stack([np.eye(4)] * 2)), "dst_c2w"),
    (dict(K=np.eye(4)), "K must have shape"),
    (dict(hw=(32,)), "hw must be"),
    (dict(hw=(32, 0)), r"hw\[1\]"),
    (dict(near=2.0, far=1.0), "0 < near < far"),
    (dict(near=-1.0), "0 < near < far"),
    (dict(grid=0), "grid must be an integer >= 1"),
    (dict(grid=40), "grid must be at most"),
    (dict(depths=0), "depths"),
    (dict(src_depth=np.ones((16, 16))), "src_depth must be a float array of shape"),
    (dict(src_depth=np.full(HW, np.nan)), "src_depth contains NaN"),
])
def test_fov_overlap_rejects_bad_input(kw, match):
    args = dict(src_c2w=np.eye(4), dst_c2w=np.eye(4), K=K, hw=HW) | kw
    with pytest.raises(ValueError, match=match):
        fov_overlap(**args)


# ----------------------------------------------------------------------------------------
# chunk_overlap
# ----------------------------------------------------------------------------------------


def test_chunk_overlap_scores_each_past_chunk():
    target = np.stack([pose(yaw=y) for y in (0, 5, 10, 15)])
    same, away = target.copy(), np.stack([pose(yaw=180 + y) for y in (0, 5, 10, 15)])
    half = np.stack([pose(yaw=y) for y in (0, 5, 100, 150)])  # two frames face the target
    scores = chunk_overlap(np.stack([same, away, half]), target, K, HW)
    assert scores.shape == (3,)
    assert scores[0] == 1.0 and scores[1] == 0.0 and 0.7 < scores[2] < 1.0
    depth = np.full((3, F) + HW, 2.0)
    assert np.allclose(chunk_overlap(np.stack([same, away, half]), target, K, HW, depth)[:2],
                       [1.0, 0.0])
    with pytest.raises(ValueError, match="chunk_depth"):
        chunk_overlap(np.stack([same]), target, K, HW, depth)
    with pytest.raises(ValueError, match="chunk_c2w"):
        chunk_overlap(target, target, K, HW)


# ----------------------------------------------------------------------------------------
# select_memory
# ----------------------------------------------------------------------------------------


def test_selection_never_returns_the_window_and_puts_the_sink_first():
    chunks = random_chunks(12, seed=3)
    for t in range(12):
        for window in (0, 1, 3):
            for sink in (False, True):
                got = select_memory(chunks, t, window, 3, sink, K, HW)
                assert len(got) == len(set(got)) and len(got) <= sink + 3
                assert all(0 <= i < t - window for i in got), (t, window, got)
                if sink and t - window > 0:
                    assert got[0] == 0 and 0 not in got[1:], (t, window, got)


def test_selection_early_in_an_episode():
    chunks = random_chunks(4, seed=4)
    assert select_memory(chunks, 0, 2, 2, True, K, HW) == []
    assert select_memory(chunks, 2, 2, 2, True, K, HW) == []  # chunk 0 is in the window
    assert select_memory(chunks, 3, 2, 2, True, K, HW) == [0]  # the sink; nothing older
    still = np.stack([np.stack([pose()] * F)] * 4)
    assert select_memory(still, 3, 1, 5, False, K, HW) == [1, 0]  # fewer than asked


def test_ties_go_to_the_more_recent_chunk():
    still = np.stack([np.stack([pose()] * F)] * 6)  # every chunk sees the same view
    assert select_memory(still, 5, 1, 2, False, K, HW) == [3, 2]
    assert select_memory(still, 5, 1, 2, True, K, HW) == [0, 3, 2]


def test_chunks_sharing_nothing_are_not_retrieved():
    chunks = np.stack([np.stack([pose(yaw=180.0)] * F)] * 3 + [np.stack([pose()] * F)])
    assert select_memory(chunks, 3, 0, 2, False, K, HW) == []
    assert select_memory(chunks, 3, 0, 2, True, K, HW) == [0]  # the sink is always shown


def leave_and_return() -> np.ndarray:
    """Walk east, turn around, walk back west, turn to face east again, stand: (28, 4, 4)
    poses, 7 chunks; chunk 6 stands at the start facing east."""
    walk, turn = [camera.Action(forward=0.25)] * 7, [camera.Action(yaw=45.0)] * 4
    acts = walk + turn + walk + turn + [camera.Action()] * 5
    return camera.integrate_actions(pose(), acts)


def test_selection_finds_the_view_seen_on_the_way_out():
    chunks = chunked(leave_and_return())
    heading = lambda c: round(camera.heading_from_pose(c[F // 2])[1])  # noqa: E731
    assert [heading(c) for c in chunks] == [0, 0, 135, 180, 180, 0, 0]
    scores = chunk_overlap(chunks[:5], chunks[6], K, HW)
    assert scores[0] == scores[1] == 1.0 > scores[2] and scores[3:].max() < 0.5, scores
    # chunk 5 is in the window; of the older ones the two walked facing east win, the
    # more recent first; the way back (facing west) is more recent but shares little
    assert select_memory(chunks, 6, 1, 2, False, K, HW) == [1, 0]
    assert select_memory(chunks, 6, 1, 1, True, K, HW) == [0, 1]


def test_selection_uses_depth_when_given():
    """Chunk 0 looked at a wall 1 m ahead; the target stands 2 m on, past it."""
    chunks = np.stack([np.stack([pose()] * F), np.stack([pose(x=1.0)] * F),
                       np.stack([pose(x=2.0)] * F)])
    assert select_memory(chunks, 2, 1, 1, False, K, HW) == [0]
    depth = np.full((2, F) + HW, 1.0)
    assert select_memory(chunks, 2, 1, 1, False, K, HW, chunk_depth=depth) == []


@pytest.mark.parametrize("kw, match", [
    (dict(target_index=4), "target_index must be < the number of chunks 4"),
    (dict(target_index=-1), "target_index"),
    (dict(window=-1), "window"),
    (dict(retrieve=1.5), "retrieve"),
    (dict(sink=1), "sink must be a bool"),
    (dict(chunk_c2w=np.stack([np.eye(4)] * 4)), r"chunk_c2w must have shape \(n, f, 4, 4\)"),
    (dict(window=9, K=np.eye(2)), "K must have shape"),  # checked even with nothing to score
    (dict(window=9, hw=(0, 32)), r"hw\[0\]"),
    (dict(chunk_depth=np.ones((1, F) + HW)), "chunk_depth must be"),
    (dict(chunk_depth=np.full((3, F) + HW, np.nan)), "chunk_depth contains NaN"),
])
def test_select_memory_rejects_bad_arguments(kw, match):
    args = dict(chunk_c2w=random_chunks(4, seed=5), target_index=3, window=0, retrieve=2,
                sink=False, K=K, hw=HW) | kw
    with pytest.raises(ValueError, match=match):
        select_memory(**args)


# ----------------------------------------------------------------------------------------
# ChunkBank
# ----------------------------------------------------------------------------------------


def filled_bank(latent_type=np.asarray, depth: bool = True):
    """A bank holding chunks 0..5 of `leave_and_return`; (bank, all 7 chunks' poses, the
    depth (6, F, h, w) it was given or None)."""
    chunks = chunked(leave_and_return())
    rng = np.random.default_rng(6)
    depths = rng.uniform(1.0, 9.0, (6, F) + HW) if depth else None
    bank = ChunkBank()
    for k, c in enumerate(chunks[:6]):
        bank.add(latent_type(rng.standard_normal((F, 2, 4, 4)).astype(np.float32)), c,
                 None if depths is None else depths[k])
    return bank, chunks, depths


def test_bank_stores_and_selects_like_select_memory():
    bank, chunks, _ = filled_bank(depth=False)
    assert len(bank) == 6
    got = bank.select(chunks[6], 1, 2, True, K, HW)
    assert got == select_memory(chunks, 6, 1, 2, True, K, HW)
    assert bank.latents(got).shape == (len(got), F, 2, 4, 4)
    assert np.array_equal(bank.poses(got), chunks[got])
    assert bank.latents([]).shape == (0, F, 2, 4, 4) and bank.poses([]).shape == (0, F, 4, 4)
    assert ChunkBank().select(chunks[0], 1, 2, True, K, HW) == []


def test_bank_keeps_torch_latents_and_depth():
    bank, chunks, depths = filled_bank(torch.from_numpy)
    out = bank.latents([4, 1])
    assert isinstance(out, torch.Tensor) and out.shape == (2, F, 2, 4, 4)
    assert bank.select(chunks[6], 1, 2, False, K, HW) == \
        select_memory(chunks, 6, 1, 2, False, K, HW, chunk_depth=depths)


def test_bank_copies_what_it_is_given():
    bank, latents = ChunkBank(), np.zeros((F, 2, 4, 4), np.float32)
    bank.add(latents, np.stack([pose()] * F))
    latents += 1.0
    assert bank.latents([0]).max() == 0.0


def test_a_chunk_shown_otherwise_replaces_its_latents_and_nothing_else():
    bank, _, _ = filled_bank()
    before = bank.latents(range(6)).copy()
    new = np.full((F, 2, 4, 4), 7.0, np.float32)
    bank.set_latents(3, new)
    new += 1.0  # copied
    after = bank.latents(range(6))
    assert (after[3] == 7.0).all() and np.array_equal(np.delete(after, 3, 0),
                                                       np.delete(before, 3, 0))
    for bad, match in ((np.zeros((F, 3, 4, 4), np.float32), r"chunk 3's latents are a "
                        r"ndarray \(4, 2, 4, 4\), got a ndarray \(4, 3, 4, 4\)"),
                       (torch.zeros(F, 2, 4, 4), "got a Tensor")):
        with pytest.raises(ValueError, match=match):
            bank.set_latents(3, bad)
    with pytest.raises(ValueError, match="chunk index must be an integer in"):
        bank.set_latents(6, new)
    assert (bank.latents([3]) == 7.0).all()


def bad_chunks():
    ok_lat, ok_c2w = np.zeros((F, 2, 4, 4), np.float32), np.stack([pose()] * F)
    nan_c2w = ok_c2w.copy()
    nan_c2w[1, 0, 3] = np.nan
    nan_depth = np.ones((F,) + HW)
    nan_depth[2, 3, 4] = np.nan
    return [
        (dict(latents=np.zeros((F, 3, 4, 4), np.float32)), "latents of chunk 6 must have shape"),
        (dict(latents=np.zeros((2, 4, 4), np.float32)), "latents must be"),
        (dict(latents=torch.zeros(F, 2, 4, 4)), "latents must be a ndarray like chunk 0"),
        (dict(latents=[[0.0]]), "latents must be a numpy array or a torch tensor"),
        (dict(c2w=nan_c2w), "c2w must be finite"),
        (dict(c2w=ok_c2w[:2], latents=ok_lat[:2], depth=np.ones((2,) + HW)),
         "latents of chunk 6 must have shape"),
        (dict(c2w=ok_c2w[:3]), "latents must be .* f = 3"),
        (dict(depth=nan_depth), "depth contains NaN"),
        (dict(depth=np.ones((F, 16, 16))), "depth of chunk 6 must have shape"),
        (dict(depth=None), "depth of chunk 6: chunk 0 had depth"),
    ], ok_lat, ok_c2w


BAD_CHUNKS, OK_LATENTS, OK_C2W = bad_chunks()


@pytest.mark.parametrize("kw, match", BAD_CHUNKS, ids=[m for _, m in BAD_CHUNKS])
def test_bad_chunk_leaves_the_bank_unchanged(kw, match):
    ok_lat, ok_c2w = OK_LATENTS, OK_C2W
    bank, _, _ = filled_bank()
    before = (len(bank), bank.latents(range(6)).copy(), bank.poses(range(6)).copy())
    args = dict(latents=ok_lat, c2w=ok_c2w, depth=np.ones((F,) + HW)) | kw
    with pytest.raises(ValueError, match=match):
        bank.add(**args)
    assert len(bank) == before[0]
    assert np.array_equal(bank.latents(range(6)), before[1])
    assert np.array_equal(bank.poses(range(6)), before[2])
    assert bank.add(ok_lat, ok_c2w, np.ones((F,) + HW)) == 6  # a good chunk still goes in


def test_bank_rejects_bad_indices_and_targets():
    bank, chunks, _ = filled_bank()
    for bad in (6, -1, 1.0, True):
        with pytest.raises(ValueError, match="chunk index must be an integer in"):
            bank.latents([bad])
    with pytest.raises(ValueError, match="target_c2w must have shape"):
        bank.select(chunks[6][:2], 1, 2, True, K, HW)
    with pytest.raises(ValueError, match="bank is empty"):
        ChunkBank().latents([])
