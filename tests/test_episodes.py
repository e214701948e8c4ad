"""Episode schema, atomic store, index, clips dataset, latent cache, RealEstate10K import."""

import json
import os

import numpy as np
import pytest
import torch

from worldlab import camera
from worldlab.engines.base import Event
from worldlab.episodes import (Episode, EpisodeClips, EpisodeError, EpisodeStore, LatentCache,
                               PromptSegment, collate_clips, load_episode, make_meta,
                               prompts_from_steps, save_episode)
from worldlab.episodes.realestate import RE10K_TO_WORLD, import_realestate10k


def make_episode(t=8, size=8, seed=0, depth=True) -> Episode:
    rng = np.random.default_rng(seed)
    traj = camera.straight(t - 1, 0.25)
    actions = np.concatenate([np.zeros((1, camera.ACTION_WIDTH), np.float32),
                              camera.actions_to_array(traj.actions)])
    K = camera.intrinsics_from_fov(size, size, 90.0)
    return Episode(
        rgb=rng.integers(0, 256, (t, size, size, 3), dtype=np.uint8),
        depth=rng.uniform(0.5, 5.0, (t, size, size)).astype(np.float32) if depth else None,
        c2w=traj.c2w, K=np.repeat(K[None], t, 0), actions=actions,
        instance=rng.integers(0, 3, (t, size, size)).astype(np.int32),
        prompts=[PromptSegment(0, "a room", "a player", ""),
                 PromptSegment(5, "a room", "a player", "a monster appears")],
        events=[Event("summon_monster", "a monster appears", 5)],
        meta=make_meta("synthetic", 10.0, seed=seed, policy="straight", size=size,
                       created="2026-01-01T00:00:00+00:00"))  # fixed: episodes compare equal


def test_validate_accepts_and_caption_at():
    ep = make_episode().validate()
    assert ep.caption_at(0).event == "" and ep.caption_at(4).event == ""
    assert ep.caption_at(5).event == ep.caption_at(7).event == "a monster appears"
    with pytest.raises(ValueError, match="frame must be in"):
        ep.caption_at(8)


@pytest.mark.parametrize("field, value, match", [
    ("rgb", np.zeros((8, 8, 8, 3), np.float32), "rgb must be uint8"),
    ("depth", np.ones((8, 8, 7), np.float32), r"depth must be float32 \(8, 8, 8\)"),
    ("depth", np.full((8, 8, 8), np.nan, np.float32), "NaN"),
    ("depth", np.concatenate([np.ones((3, 8, 8)), np.zeros((5, 8, 8))]).astype(np.float32),
     "320 NaN or values <= 0 in 5 of 8 frames, the first at frame 3"),
    ("c2w", np.eye(4)[None].repeat(7, 0), r"c2w must be float64 \(8, 4, 4\)"),
    ("c2w", np.eye(4)[None].repeat(8, 0) * 2, "not orthonormal"),
    ("K", np.zeros((8, 3, 3)), "focal lengths"),
    ("actions", np.ones((8, camera.ACTION_WIDTH), np.float32), r"actions\[0\] must be zeros"),
    ("actions", np.zeros((8, 3), np.float32), "actions must be float32"),
    ("instance", np.zeros((8, 8, 8), np.int64), "instance must be int32"),
    ("prompts", [PromptSegment(1)], "strictly increasing from 0"),
    ("prompts", [PromptSegment(0), PromptSegment(0)], "strictly increasing"),
    ("prompts", [PromptSegment(0), PromptSegment(8)], "< t=8"),
    ("events", [Event("x", "y", 8)], "step < 8"),
    ("meta", {"engine": "x"}, "missing"),
])
def test_validate_names_the_bad_field(field, value, match):
    ep = make_episode()
    setattr(ep, field, value)
    with pytest.raises(ValueError, match=match):
        ep.validate()


def test_prompts_from_steps_starts_a_segment_per_change():
    segs = prompts_from_steps([None, None, "rain", None, "rain", "fire", None], "s", "c")
    assert [(p.start, p.event) for p in segs] == [(0, ""), (2, "rain"), (5, "fire")]
    assert all(p.scene == "s" and p.character == "c" for p in segs)


def _same(a: Episode, b: Episode):
    for k in ("rgb", "depth", "c2w", "K", "actions", "instance"):
        x, y = getattr(a, k), getattr(b, k)
        assert (x is None and y is None) or (x.dtype == y.dtype and np.array_equal(x, y)), k
    assert a.prompts == b.prompts and a.events == b.events and a.meta == b.meta


def test_save_load_round_trip_without_pickles(tmp_path):
    ep = make_episode()
    save_episode(ep, tmp_path / "a.npz")
    _same(ep, load_episode(tmp_path / "a.npz"))
    ep2 = make_episode(depth=False)
    ep2.instance = None
    save_episode(ep2, tmp_path / "b.npz")
    _same(ep2, load_episode(tmp_path / "b.npz"))
    with np.load(tmp_path / "a.npz", allow_pickle=False) as z:
        assert all(z[k].dtype != object for k in z.files)


def test_store_write_read_index(tmp_path):
    store = EpisodeStore(tmp_path)
    ids = [store.write(make_episode(seed=s)) for s in range(3)]
    assert ids == ["000000", "000001", "000002"] == store.ids()
    assert store.index["000001"] == {"id": "000001", "frames": 8, "size": [8, 8],
                                     "engine": "synthetic", "map": None, "policy": "straight",
                                     "seed": 1, "event_rate": None, "start": None,
                                     "monsters": None, "events": ["summon_monster"],
                                     "has_depth": True}
    _same(store.read("000002"), make_episode(seed=2))


def test_a_store_is_made_by_its_first_write_and_opened_only_if_it_exists(tmp_path):
    root = tmp_path / "new" / "store"
    with pytest.raises(FileNotFoundError, match=f"no episode store at {root}"):
        EpisodeStore.open(root)  # reading a misspelt path names it ...
    store = EpisodeStore(root)
    assert not root.exists() and store.ids() == [] and len(store) == 0  # ... and makes nothing
    store.write(make_episode(seed=0))
    assert EpisodeStore.open(root).ids() == ["000000"]
    assert EpisodeStore.open(store) is store


def test_store_describe_is_what_a_world_was_trained_on(tmp_path):
    store = EpisodeStore(tmp_path)
    for s in range(3):
        store.write(make_episode(t=8 + 4 * s, seed=s))
    assert store.describe() == {"engine": "synthetic", "map": "None", "size": 8,
                                "episodes": 3, "frames": 16, "policy": "straight",
                                "event_rate": None, "start": None, "monsters": None,
                                "walls": None}
    assert store.describe(["000000"])["frames"] == 8
    with pytest.raises(ValueError, match="'nope' is not indexed"):
        store.describe(["nope"])
    store.write(make_episode(size=16, seed=9))
    with pytest.raises(ValueError, match="one square frame size"):
        store.describe()
    assert store.validate_all() == {}
    with pytest.raises(ValueError, match="already exists"):
        store.write(make_episode(), "000001")
    with pytest.raises(ValueError, match="episode id must match"):
        store.write(make_episode(), "../escape")
    with pytest.raises(ValueError, match="no episode 'nope'"):
        store.read("nope")


def test_invalid_episode_leaves_store_untouched(tmp_path):
    store = EpisodeStore(tmp_path)
    store.write(make_episode(), "a")
    before = sorted(os.listdir(tmp_path)), (tmp_path / "index.json").read_bytes()
    bad = make_episode()
    bad.actions[0, 0] = 1.0
    with pytest.raises(ValueError, match=r"actions\[0\]"):
        store.write(bad, "b")
    assert (sorted(os.listdir(tmp_path)), (tmp_path / "index.json").read_bytes()) == before


def test_crash_mid_write_leaves_no_half_episode(tmp_path, monkeypatch):
    store = EpisodeStore(tmp_path)
    store.write(make_episode(seed=0), "a")
    index_before = (tmp_path / "index.json").read_bytes()

    def crash(file, **arrays):  # writes part of the archive, then the process "dies"
        file.write(b"PK\x03\x04 half an archive")
        raise KeyboardInterrupt("simulated crash")

    monkeypatch.setattr(np, "savez_compressed", crash)
    with pytest.raises(KeyboardInterrupt):
        store.write(make_episode(seed=1), "b")
    with pytest.raises(KeyboardInterrupt):
        store.write(make_episode(seed=1), "a", overwrite=True)
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["a.npz", "index.json"]  # no temp files left
    assert (tmp_path / "index.json").read_bytes() == index_before
    _same(store.read("a"), make_episode(seed=0))  # the old episode survived the overwrite


@pytest.mark.parametrize("damage", ["truncate", "garbage", "bad_header"])
def test_corrupt_file_names_itself_and_spares_the_rest(tmp_path, damage):
    store = EpisodeStore(tmp_path)
    for s in range(3):
        store.write(make_episode(seed=s))
    index_before = (tmp_path / "index.json").read_bytes()
    path = tmp_path / "000001.npz"
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "garbage":
        path.write_bytes(b"not an npz at all")
    else:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        arrays["header"] = np.frombuffer(json.dumps({"format": 99}).encode(), np.uint8)
        np.savez(path, **arrays)
    with pytest.raises(EpisodeError, match="000001.npz"):
        store.read("000001")
    _same(store.read("000000"), make_episode(seed=0))
    _same(store.read("000002"), make_episode(seed=2))
    problems = store.validate_all()
    assert list(problems) == ["000001"] and "000001.npz" in problems["000001"]
    assert (tmp_path / "index.json").read_bytes() == index_before
    with pytest.warns(UserWarning, match=r"left out 1 damaged: .*000001\.npz"):
        rebuilt = store.rebuild_index()  # from the whole files, naming the one left out
    assert sorted(rebuilt) == store.ids() == ["000000", "000002"]
    assert (tmp_path / "000001.npz").exists()  # the damaged file stays, for a human to see


def test_clips_windows_tensors_and_captions(tmp_path):
    store = EpisodeStore(tmp_path)
    store.write(make_episode(t=12, seed=0), "a")
    store.write(make_episode(t=8, seed=1), "b")
    clips = EpisodeClips(store, clip_frames=8, chunk_frames=4, stride=4)
    assert clips.windows == [("a", 0), ("a", 4), ("b", 0)]
    item = clips[1]
    ep = store.read("a")
    assert item["rgb"].shape == (8, 3, 8, 8) and item["rgb"].dtype == torch.float32
    assert float(item["rgb"].min()) >= -1 and float(item["rgb"].max()) <= 1
    expect = torch.from_numpy(ep.rgb[4:12]).permute(0, 3, 1, 2).float() / 127.5 - 1
    assert torch.equal(item["rgb"], expect)
    assert item["depth"].shape == (8, 1, 8, 8) and item["c2w"].shape == (8, 4, 4)
    assert item["K"].shape == (8, 3, 3) and item["actions"].shape == (8, 7)
    assert torch.allclose(item["c2w"], torch.from_numpy(ep.c2w[4:12]).float())
    # chunk starts at frames 4 and 8: the event segment begins at frame 5
    assert item["captions"] == [("a room", "a player", ""),
                                ("a room", "a player", "a monster appears")]
    batch = collate_clips([clips[0], clips[2]])
    assert batch["rgb"].shape == (2, 8, 3, 8, 8) and batch["episode"] == ["a", "b"]
    assert batch["start"] == [0, 0] and len(batch["captions"]) == 2
    loader = torch.utils.data.DataLoader(clips, batch_size=3, collate_fn=collate_clips)
    assert next(iter(loader))["actions"].shape == (3, 8, 7)


def test_clips_bad_arguments(tmp_path):
    store = EpisodeStore(tmp_path)
    store.write(make_episode(), "a")
    with pytest.raises(ValueError, match="multiples of chunk_frames"):
        EpisodeClips(store, clip_frames=6, chunk_frames=4)
    with pytest.raises(ValueError, match="multiples of chunk_frames"):
        EpisodeClips(store, clip_frames=8, chunk_frames=4, stride=2)
    with pytest.raises(ValueError, match="not in the index"):
        EpisodeClips(store, clip_frames=4, ids=["zzz"])
    noisy = EpisodeStore(tmp_path / "mixed")
    noisy.write(make_episode(), "d")
    noisy.write(make_episode(depth=False), "n")
    clips = EpisodeClips(noisy, clip_frames=8)
    with pytest.raises(ValueError, match="same fields"):
        collate_clips([clips[0], clips[1]])


def test_latent_cache_round_trip_and_clips(tmp_path):
    store = EpisodeStore(tmp_path / "eps")
    store.write(make_episode(t=8), "a")
    cache = LatentCache(tmp_path / "lat")
    lat = np.random.default_rng(0).standard_normal((8, 4, 2, 2)).astype(np.float16)
    assert not cache.has("a")
    cache.put("a", lat)
    assert cache.has("a") and np.array_equal(cache.get("a"), lat)
    assert sorted(os.listdir(tmp_path / "lat")) == ["a.safetensors"]
    item = EpisodeClips(store, clip_frames=4, latents=cache)[1]
    assert "rgb" not in item and item["latents"].shape == (4, 4, 2, 2)
    assert torch.equal(item["latents"], torch.from_numpy(lat[4:8].astype(np.float32)))
    with pytest.raises(ValueError, match="float16"):
        cache.put("b", lat.astype(np.float32))
    with pytest.raises(ValueError, match="no latents"):
        cache.get("b")
    (tmp_path / "lat" / "a.safetensors").write_bytes(b"junk")
    with pytest.raises(EpisodeError, match="a.safetensors"):
        cache.get("a")


# ----------------------------------------------------------------------------------------
# RealEstate10K: a synthetic clip written in the real file format
# ----------------------------------------------------------------------------------------


def _write_re10k(tmp_path, poses_world_re10k, w=32, h=18):
    """Camera file + PNG frames for RE10K-world c2w poses (t, 4, 4)."""
    from PIL import Image

    frames = tmp_path / "frames"
    frames.mkdir()
    lines = ["https://www.youtube.com/watch?v=synthetic"]
    for k, c2w in enumerate(poses_world_re10k):
        w2c = camera.invert_pose(c2w)[:3].ravel()
        stamp = 1_000_000 + k * 33_367
        lines.append(" ".join(map(str, [stamp, 0.5, 0.9, 0.5, 0.5, 0, 0, *w2c])))
        img = np.full((h, w, 3), 40 * k, np.uint8)
        Image.fromarray(img).save(frames / f"{stamp}.png")
    (tmp_path / "clip.txt").write_text("\n".join(lines) + "\n")
    return tmp_path / "clip.txt", frames


def test_realestate10k_import(tmp_path):
    # the RE10K world is y-down: a camera at identity faces its +z; walk it along +z, turning
    to_re10k = camera.invert_pose(RE10K_TO_WORLD)
    ours = camera.integrate_actions(camera.pose_from_heading(np.zeros(3), 0.0),
                                    [camera.Action(forward=0.1, yaw=5.0)] * 3)
    re10k = to_re10k @ ours
    assert np.allclose(re10k[0], np.eye(4))  # heading 0 at the origin is the RE10K identity
    cam_txt, frames = _write_re10k(tmp_path, re10k)
    ep = import_realestate10k(cam_txt, frames, size=9)
    assert ep.rgb.shape == (4, 9, 9, 3) and ep.depth is None
    assert np.allclose(ep.c2w, ours, atol=1e-9)
    # intrinsics: fx = 0.5 * 32 px, cropped to 18 x 18 at x0 = 7, then scaled by 9 / 18
    assert np.allclose(ep.K[0], [[8.0, 0, 4.5], [0, 8.1, 4.5], [0, 0, 1]])
    assert np.allclose(ep.actions[1:, 0], 0.1, atol=1e-6)
    assert np.allclose(ep.actions[1:, 2], 5.0, atol=1e-6)
    assert ep.meta["fps"] == pytest.approx(1e6 / 33_367)
    store = EpisodeStore(tmp_path / "store")
    store.write(ep, "clip")
    assert store.read("clip").depth is None


def test_realestate10k_big_jump_leaves_zero_actions_and_bad_files_raise(tmp_path):
    jump = np.eye(4)[None].repeat(2, 0)
    jump[1, 2, 3] = 5.0  # 5 m in one frame: beyond the Action limit
    cam_txt, frames = _write_re10k(tmp_path, jump)
    ep = import_realestate10k(cam_txt, frames, size=8)
    assert not ep.actions.any() and ep.meta["actions"].startswith("zeros")
    (frames / sorted(os.listdir(frames))[0]).unlink()
    with pytest.raises(ValueError, match="expected 2 frames"):
        import_realestate10k(cam_txt, frames, size=8)
    cam_txt.write_text("url\n1 2 3\n")
    with pytest.raises(ValueError, match="expected 19 numbers"):
        import_realestate10k(cam_txt, frames, size=8)


def test_subset_takes_the_first_episodes_of_each_map_under_their_ids(tmp_path):
    from worldlab.cli import main
    from worldlab.episodes.store import subset

    src = EpisodeStore(tmp_path / "src")
    for k in range(5):  # maps in turn: A B A B A
        ep = make_episode(seed=k)
        ep.meta["map"] = "AB"[k % 2]
        src.write(ep, f"ep-{k}")
    with pytest.raises(ValueError, match="2 episodes on map 'B', 3 were asked"):
        subset(src, tmp_path / "bad", {"A": 1, "B": 3})
    assert not (tmp_path / "bad").exists() or not EpisodeStore(tmp_path / "bad").ids()
    out = subset(src, tmp_path / "out", {"A": 2, "B": 1})
    assert out.ids() == ["ep-0", "ep-1", "ep-2"]
    assert np.array_equal(out.read("ep-2").rgb, src.read("ep-2").rgb)
    assert subset(src, tmp_path / "out", {"A": 2, "B": 1}).ids() == out.ids()  # idempotent
    assert main(["data", "subset", "--store", str(tmp_path / "src"), "--out",
                 str(tmp_path / "cli"), "--per-map", "A=3"]) == 0
    assert EpisodeStore(tmp_path / "cli").ids() == ["ep-0", "ep-2", "ep-4"]
    with pytest.raises(SystemExit, match="MAP=COUNT"):
        main(["data", "subset", "--store", str(tmp_path / "src"), "--out",
              str(tmp_path / "cli2"), "--per-map", "A:3"])


def test_load_frames_concatenates_episodes_in_order(tmp_path):
    from worldlab.episodes import load_frames

    store = EpisodeStore(tmp_path / "s")
    eps = [make_episode(t=8, seed=0), make_episode(t=6, seed=1),
           make_episode(t=7, seed=2, depth=False)]
    for k, ep in enumerate(eps):
        store.write(ep, f"e{k}")
    rgb, depth = load_frames(store, ["e1", "e0"], depth=True)
    assert np.array_equal(rgb, np.concatenate([eps[1].rgb, eps[0].rgb]))
    assert np.array_equal(depth, np.concatenate([eps[1].depth, eps[0].depth]))
    rgb, depth = load_frames(store, ["e2", "e0"])
    assert depth is None and rgb.shape == (15, 8, 8, 3)
    with pytest.raises(ValueError, match="'e2' has no depth"):
        load_frames(store, ["e0", "e2"], depth=True)
    with pytest.raises(ValueError, match="no episodes"):
        load_frames(store, [])
