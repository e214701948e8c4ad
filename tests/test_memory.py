"""Memory as switches: the config rules, the memory recipe (variants, zero-effect start,
clips that carry the memory play would select) and the rollout with memory (Stream:
the same chunks as a plain rollout without memory, the same selection as training, the 3D
cache fed and rendered). Tiny procedural worlds, seeded."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import worldlab as wl
from worldlab.episodes import EpisodeStore, LatentCache, record_many
from worldlab.evaluate.memory_rollout import open_loop
from worldlab.evaluate.generation import episode_conditions, generate
from worldlab.memory.retrieval import memory_slots, select_memory
from worldlab.memory.stream import Stream, world_stream
from worldlab.model import WorldModel
from worldlab.model.memory_tokens import MemoryChunks
from worldlab.model.sampler import chunk_conditions
from worldlab.pretrained import load_world
from worldlab.train.memory import VARIANTS, MemoryClips, finetune, load_base, variant_config
from worldlab.train.recipes import fill_latents

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

TOKENS_PER_FRAME = 16  # the tiny world: 32 px, 8x latents, patch 1 -> 4 x 4 tokens


@pytest.fixture(scope="module")
def store(tmp_path_factory, world_dir):
    """Three procedural walks of 48 frames with metric depth, latents of the tiny world."""
    s = EpisodeStore(tmp_path_factory.mktemp("memory_store"))
    record_many(s, "procedural", [0, 1, 2], 48, 32, "leave_and_return", workers=1)
    fill_latents(s, LatentCache(s.root / "latents"), world_dir / "autoencoder", "cpu")
    return s


# ----------------------------------------------------------------------------------------
# Config
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_variant_is_a_valid_config(variant):
    base = wl.make_config("tiny")
    cfg = variant_config(base, variant, steps=3, batch_size=2,
                         tokens_per_frame=TOKENS_PER_FRAME)
    mem, m = cfg.memory, cfg.model
    slots = int(mem.sink) + mem.retrieve
    per_chunk = m.chunk_frames * TOKENS_PER_FRAME // m.memory_compress
    assert m.memory_tokens == slots * per_chunk
    assert m.cache_latent == (mem.cache3d != "off")
    assert cfg.train.forcing == "teacher" and cfg.train.steps == 3


def test_memory_config_rules_name_the_field():
    with pytest.raises(ValueError, match="memory.retrieve=2 need memory attention"):
        wl.make_config("tiny", memory__retrieve=2)
    with pytest.raises(ValueError, match="memory.cache3d='oracle' needs model.cache_latent"
                                         "=True .* or sample.composite='cache'"):
        wl.make_config("tiny", memory__cache3d="oracle")
    with pytest.raises(ValueError, match="model.cache_latent=True reads a 3D cache"):
        wl.make_config("tiny", model__cache_latent=True)
    painter = wl.make_config("tiny", memory__cache3d="own", sample__composite="cache")
    assert not painter.model.cache_latent  # a cache that only paints
    with pytest.raises(ValueError, match=r"memory.cache3d must be one of"):
        wl.make_config("tiny", memory__cache3d="engine")
    with pytest.raises(ValueError, match="sample.composite='cache' paints the 3D cache"):
        wl.make_config("tiny", sample__composite="cache")
    with pytest.raises(ValueError, match=r"sample.composite must be one of"):
        wl.make_config("tiny", sample__composite="warp")
    with pytest.raises(ValueError, match="unknown memory variant 'fog'"):
        variant_config(wl.make_config("tiny"), "fog", 3, 2, TOKENS_PER_FRAME)
    with pytest.raises(ValueError, match="memory_compress=3 must be f s"):
        WorldModel(latent_channels=4, latent_size=4, width=32, depth=1, heads=2,
                   memory_tokens=8, memory_compress=3)


# ----------------------------------------------------------------------------------------
# The recipe
# ----------------------------------------------------------------------------------------


def test_load_base_starts_at_zero_effect(world_dir, world):
    """A memory model (sink, retrieval, 3D-cache input) loaded from a world without memory
    gives that world's numbers exactly, whatever memory and cache it is shown."""
    cfg = variant_config(world.config, "sink+tokens+cache3d_own", 3, 2, TOKENS_PER_FRAME)
    model = WorldModel.from_config_dataclass(cfg.model, 4, 4).eval()
    load_base(model, world_dir / "world")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 8, 4, 4, 4, generator=g)
    t = torch.tensor([[0.0, 0.6]])
    c2w = torch.eye(4).repeat(1, 8, 1, 1)
    actions = torch.zeros(1, 8, 7)
    memory = wl.model.memory_tokens.MemoryChunks(torch.randn(1, 2, 4, 4, 4, 4, generator=g),
                                                 torch.eye(4).repeat(1, 2, 4, 1, 1),
                                                 torch.ones(1, 2, dtype=torch.bool))
    cache = torch.rand(1, 8, 5, 4, 4, generator=g)
    with torch.no_grad():
        torch.testing.assert_close(
            model(x, t, actions=actions, c2w=c2w, memory=memory, cache_latent=cache),
            world.model(x, t, actions=actions, c2w=c2w), atol=1e-6, rtol=0)
    assert model.memory_gates() == {"memory_gate_norm": 0.0, "cache_gate_norm": 0.0}
    assert world.model.memory_gates() == {}  # no memory, no gate


def test_the_gates_open_from_the_first_step_and_are_logged(tmp_path, store, world_dir):
    """Both memory paths learn at once: the zero output projection of memory attention and
    the zero cache columns of the patch embedding get gradient on step 1; every step logs
    their norms (TensorBoard and the notebook's live loss read them; `table recall --run`
    reads them back from TensorBoard)."""
    from worldlab.model.depth_head import DepthHead
    from worldlab.train.tracked import gate_curves

    logs = []
    finetune(world_dir, "sink+tokens+cache3d_own", store, tmp_path / "run", steps=2,
             batch_size=2, depth_head=DepthHead(), callbacks=[logs.append])
    assert [set(s) >= {"memory_gate_norm", "cache_gate_norm"} for s in logs] == [True, True]
    # logged as each step's loss is computed: closed on step 1, open after its update
    assert logs[0]["memory_gate_norm"] == 0 < logs[1]["memory_gate_norm"]
    assert logs[0]["cache_gate_norm"] == 0 < logs[1]["cache_gate_norm"]
    curves = gate_curves(tmp_path / "run", every=1)
    assert sorted(curves) == ["cache_gate_norm", "memory_gate_norm"]
    for key, curve in curves.items():
        assert [s for s, _ in curve] == [1, 2]
        assert [v for _, v in curve] == pytest.approx([s[key] for s in logs], abs=1e-5)
    with pytest.raises(FileNotFoundError, match="no TensorBoard events"):
        gate_curves(tmp_path)
    with pytest.raises(ValueError, match="every must be a positive number of steps, got 0"):
        gate_curves(tmp_path / "run", every=0)


def test_long_horizon_streams_a_memory_world_through_its_memory(world_dir, world, store):
    """The long protocol streams a sink world through its memory, and while that memory
    has zero effect, both streams are the base world's, frame for frame."""
    from worldlab.evaluate import long as long_protocol
    from worldlab.pretrained import World

    cfg = variant_config(world.config, "sink", 3, 2, TOKENS_PER_FRAME)
    model = WorldModel.from_config_dataclass(cfg.model, 4, 4).eval()
    load_base(model, world_dir / "world")
    sink = World(world.ae, model, cfg, world.device)
    ep = store.read(store.ids()[0])
    a, b = long_protocol.generate_walk(sink, ep), long_protocol.generate_walk(world, ep)
    for name in ("open_loop", "drift_free", "autoencoder"):
        np.testing.assert_array_equal(a[name], b[name])
    assert (a["open_loop"][4:] != a["drift_free"][4:]).any()  # the two streams differ


def test_load_base_refuses_what_it_cannot_map(tmp_path, world_dir):
    other = WorldModel(latent_channels=4, latent_size=4, width=64, depth=2, heads=2,
                       window_chunks=4)
    with pytest.raises(ValueError, match="this model's"):
        load_base(other, world_dir / "world")


def test_clips_carry_the_memory_play_selects(store, world):
    mem = dataclasses.replace(world.config.memory, sink=True, retrieve=2)
    K = store.read(store.ids()[0]).K[0]
    clips = MemoryClips(store, LatentCache(store.root / "latents"), 8, 4, mem, K, (32, 32),
                        window=2)
    memory = clips.gather(list(range(len(clips))))["memory"]
    assert isinstance(memory, MemoryChunks)  # typed, not string keys
    assert memory.latents.shape == (len(clips), 3, 4, 4, 4, 4)
    assert memory.c2w.shape == (len(clips), 3, 4, 4, 4)
    for n, (episode_id, start) in enumerate(clips.windows):
        ep = store.read(episode_id)
        chunks = ep.c2w[:len(ep) // 4 * 4].reshape(-1, 4, 4, 4)
        picked = select_memory(chunks, start // 4 + 1, 2, 2, True, K, (32, 32))
        assert memory.valid[n].tolist() == [True] * len(picked) + [False] * (3 - len(picked))
        # the picked chunks, then the padding rule's: the chunk before the target
        for slot, i in enumerate(memory_slots(picked, 3, start // 4 + 1)[0]):
            torch.testing.assert_close(memory.c2w[n, slot],
                                       torch.as_tensor(chunks[i], dtype=torch.float32))
    assert bool(memory.valid.any())  # late chunks of a revisit walk remember


def test_own_memory_generates_the_slots_that_have_a_chunk_before(store, world):
    """With `own`, clips carry each slot's engine chunk before it; `own_memory` replaces
    exactly the hit slots that have one by the model's own generation from it, and leaves
    the sink (chunk 0) and the rest as the engine's."""
    from worldlab.model.sampler import rollout
    from worldlab.train.anti_drift import own_memory

    mem = dataclasses.replace(world.config.memory, sink=True, retrieve=1)
    K = store.read(store.ids()[0]).K[0]
    clips = MemoryClips(store, LatentCache(store.root / "latents"), 8, 4, mem, K, (32, 32),
                        window=2, own=True)
    batch = clips.gather(list(range(len(clips))))
    memory, before = batch["memory"], batch["memory_before"]
    b = len(clips)
    assert before["latents"].shape == (b, 2, 4, 4, 4, 4) and before["c2w"].shape[2] == 8
    assert not before["ok"][:, 0].any()  # the sink is chunk 0: nothing before it
    assert bool(before["ok"][:, 1].any())
    rows = before["ok"][:, 1]
    torch.testing.assert_close(before["c2w"][rows, 1, 4:], memory.c2w[rows, 1])

    g = torch.Generator().manual_seed(0)
    assert own_memory(world.model, memory, before, 2, 0.0, g) is memory  # nobody hit
    own = own_memory(world.model, memory, before, 2, 1.0, torch.Generator().manual_seed(0))
    torch.testing.assert_close(own.latents[:, 0], memory.latents[:, 0])  # the sink stays
    torch.testing.assert_close(own.latents[~rows, 1], memory.latents[~rows, 1])
    g = torch.Generator().manual_seed(0)
    torch.rand(b, generator=g)  # the draw of who is hit
    seed = int(torch.randint(0, 2 ** 62, (1,), generator=g))
    expected = rollout(world.model.eval(), before["latents"][rows, 1],
                       before["actions"][rows, 1], before["c2w"][rows, 1], None, 2,
                       generator=torch.Generator().manual_seed(seed))[:, 4:]
    torch.testing.assert_close(own.latents[rows, 1], expected)


def test_finetune_with_own_memory_runs_and_names_a_variant_without_retrieval(
        tmp_path, store, world_dir):
    run = finetune(world_dir, "retrieval", store, None, steps=2, batch_size=2,
                   own_memory=1.0)
    assert run.config.train.memory_own_prob == 1.0 and run.state["step"] == 2
    with pytest.raises(ValueError, match="memory_own_prob=0.5 generates .*retrieve is 0"):
        finetune(world_dir, "sink", store, None, steps=2, batch_size=2, own_memory=0.5)


def test_the_padding_rule_is_one_for_training_and_play():
    assert memory_slots([0, 5], 4, 9) == ([0, 5, 8, 8], [True, True, False, False])
    assert memory_slots([], 2, 0) == ([0, 0], [False, False])  # chunk 0 pads with itself
    with pytest.raises(ValueError, match="3 chunks picked for 2 memory slots"):
        memory_slots([1, 2, 3], 2, 9)
    with pytest.raises(ValueError, match="target must be an integer >= 0"):
        memory_slots([], 2, -1)


def test_finetune_runs_and_is_a_world(tmp_path, store, world_dir):
    run = finetune(world_dir, "retrieval", store, tmp_path / "run", steps=2, batch_size=2)
    assert run.config.memory.retrieve == 1 and run.config.model.memory_tokens == 64
    wl.train.package(world_dir / "autoencoder", tmp_path / "run", tmp_path / "w")
    w = load_world(tmp_path / "w", device="cpu")
    assert w.config.memory.retrieve == 1 and w.model.memory_encoder is not None


def test_cache3d_variant_trains_on_rendered_caches(tmp_path, store, world_dir):
    run = finetune(world_dir, "cache3d_oracle", store, None, steps=1, batch_size=2)
    c3d = run.clips.cache3d  # (N, f, c + 1, h, w): the last chunk's renders
    assert c3d.shape[1:] == (4, 5, 4, 4)
    assert float(c3d[:, :, -1].max()) > 0.5  # later chunks see much of the cache
    # rendered once per store: another seed reads the same file; other inputs, another key
    from worldlab.train.cache_inputs import FOLDER, cache_key
    files = sorted((store.root / FOLDER).glob("oracle-*.safetensors"))
    assert len(files) == 1
    stamp = files[0].stat().st_mtime_ns
    again = finetune(world_dir, "cache3d_oracle", store, None, steps=1, batch_size=2, seed=1)
    assert torch.equal(again.clips.cache3d, c3d) and files[0].stat().st_mtime_ns == stamp
    windows, ae = [("a", 0), ("a", 4)], load_world(world_dir, device="cpu").ae
    assert cache_key(windows, 16, 4, ae, "oracle", 2) != cache_key(windows, 16, 4, ae,
                                                                    "oracle", 1)
    assert cache_key(windows, 16, 4, ae, "oracle", 2) == cache_key(list(windows), 16, 4, ae,
                                                                   "oracle", 2)


# ----------------------------------------------------------------------------------------
# The rollout with memory
# ----------------------------------------------------------------------------------------


def test_stream_without_memory_is_the_plain_rollout(world, store):
    ep = store.read(store.ids()[0])
    out = open_loop(world, ep, seed=3, steps=2)
    ref = generate(world, ep, 0, 4, 48, steps=2, seed=3)
    assert out["frames"].shape == (48, 32, 32, 3)
    assert np.abs(out["frames"][4:].astype(int) - ref.astype(int)).max() <= 1


def test_generate_gives_a_world_its_3d_cache(tmp_path, world_dir, store):
    """The protocols' `generate` streams with the world's own memory: a world that reads its
    3D cache every chunk (the geometry input) gets the render of its context there, and
    matches the open loop with memory chunk for chunk."""
    world = memory_world(tmp_path, world_dir, store, "cache3d_own")
    old = world.model.patch_in.weight.shape[1] // 2  # the latent columns; then the cache's
    with torch.no_grad():  # a cache the model reads strongly (trained 1 step, it barely does)
        world.model.patch_in.weight[:, old:].normal_(0, 0.5, generator=torch.Generator()
                                                      .manual_seed(0))
    ep = store.read(store.ids()[1])
    ref = open_loop(world, ep, seed=3, steps=1)["frames"]
    out = generate(world, ep, 0, 4, 48, steps=1, seed=3)
    assert np.abs(out.astype(int) - ref[4:].astype(int)).max() <= 1
    blind = dataclasses.replace(world, config=dataclasses.replace(
        world.config, memory=wl.config.MemoryConfig()))  # the same weights, the cache empty
    assert np.abs(generate(blind, ep, 0, 4, 48, steps=1, seed=3).astype(int)
                  - out.astype(int)).mean() > 1


def with_sample(world, **fields):
    """`world` with these sample fields changed (the same weights)."""
    return dataclasses.replace(world, config=dataclasses.replace(world.config, sample=(
        dataclasses.replace(world.config.sample, **fields))))


def drawn_at_first_chunk(world, ep, depth=None):
    """A stream of `world` holding the walk's first chunk (the engine's, with its `depth`
    for an oracle cache), and the decoded frames of a chunk it then made at the same
    cameras (one step), not yet shown."""
    f, stream = world.chunk_frames, world_stream(world, ep.K[0])
    cond = chunk_conditions(0, f, *episode_conditions(world, ep, 0, f))
    stream.append_truth(world.encode(ep.rgb[:f]), cond, ep.rgb[:f], depth)
    g = torch.Generator().manual_seed(0)
    x = stream.step(torch.randn((1, f, 4, 4, 4), generator=g), cond, 1, g)
    return stream, world.decode(x)


def test_composite_paints_what_the_cache_holds_and_the_world_draws_the_rest(
        tmp_path, world_dir, store):
    """sample.composite="cache": a place seen before comes back as it was seen. The walk's
    first chunk goes into the oracle cache; a chunk made at the same cameras shows the
    cache's render wherever a point lands (the engine's frames there) and the world's own
    frames elsewhere; without composite the world's frames are shown as they are."""
    world = memory_world(tmp_path, world_dir, store, "cache3d_oracle")
    ep = store.read(store.ids()[0])
    f = world.chunk_frames
    shown = {}
    for composite in ("off", "cache"):
        w = with_sample(world, composite=composite)
        stream, drawn = drawn_at_first_chunk(w, ep, ep.depth[:f])
        if composite == "cache":  # generate's renders, kept for the paint, change nothing
            poses = stream.bank.poses([1])[0]  # the cameras the stream rendered
            alone = [stream._paint(frame, pose)[0] for frame, pose in zip(drawn, poses)]
        shown[composite] = (drawn, stream.show(drawn, ep.depth[:f]))
        if composite == "cache":  # the world goes on from what it showed
            again = w.encode(shown["cache"][1])  # (1, f, c, h, w)
            torch.testing.assert_close(stream.bank.latents([0, 1])[1], again[0])
            torch.testing.assert_close(stream.cache.pending["x"], again)  # no context noise
    drawn, same = shown["off"]
    assert same is drawn or np.array_equal(same, drawn)
    drawn, painted = shown["cache"]
    changed = (painted != drawn).any(-1)  # (f, h, w): the pixels the render covered
    assert changed.mean() > 0.3
    truth_err = np.abs(painted.astype(int) - ep.rgb[:f].astype(int)).mean(-1)
    assert truth_err[changed].mean() < 0.5 * np.abs(drawn.astype(int) - ep.rgb[:f].astype(
        int)).mean(-1)[changed].mean()  # closer to the engine's frames where painted
    assert np.array_equal(painted[~changed], drawn[~changed])
    assert np.array_equal(np.stack(alone), painted)


def test_paint_view_paints_the_newest_view_first(tmp_path, world_dir, store):
    """sample.paint_view: the newest frame the stream observed, moved into each camera with
    its depth, is painted before the cache's render. At that frame's own camera it comes
    back exactly (the engine's frame wherever its depth is finite), where the cache's render
    alone (every second frame fused) does not; and the paint still reaches the depth it
    drew at. Paint_view needs composite: the config refuses it alone, naming it."""
    from worldlab.config import make_config

    world = memory_world(tmp_path, world_dir, store, "cache3d_oracle")
    ep = store.read(store.ids()[0])
    f = world.chunk_frames
    painted = {}
    for view in ("off", "nearest"):
        w = with_sample(world, composite="cache", paint_view=view)
        stream, drawn = drawn_at_first_chunk(w, ep, ep.depth[:f])
        painted[view] = stream._paint(drawn[-1], ep.c2w[f - 1])
    seen = np.isfinite(ep.depth[f - 1])
    frame, depth = painted["nearest"]
    assert seen.mean() > 0.5 and np.array_equal(frame[seen], ep.rgb[f - 1][seen])
    np.testing.assert_allclose(depth[seen], ep.depth[f - 1][seen], rtol=1e-5)
    assert (painted["off"][0][seen] != ep.rgb[f - 1][seen]).any()
    with pytest.raises(ValueError, match="sample.paint_view='nearest' .* set it to 'cache'"):
        make_config("tiny", sample__paint_view="nearest")
    with pytest.raises(ValueError, match="sample.paint_view"):
        make_config("tiny", sample__paint_view="cubic")


def test_paint_blend_is_the_painted_renders_soft_z_buffer(tmp_path, world_dir, store):
    """sample.paint_blend: the pixels a point lands on show `render_splats` at that blend
    (0: the nearest point alone); a negative blend is refused by the config."""
    from worldlab.config import make_config

    world = memory_world(tmp_path, world_dir, store, "cache3d_own")
    ep = store.read(store.ids()[0])
    shown = {}
    for blend in (0.0, 1.0):
        w = with_sample(world, composite="cache", paint_blend=blend)
        stream, drawn = drawn_at_first_chunk(w, ep)
        pose = stream.bank.poses([len(stream.bank) - 1])[0][0]
        frame, _ = stream._paint(drawn[0], pose)
        rgb, _, landed = stream.points.render_splats(pose, stream.K, *frame.shape[:2], (1,),
                                                     blend)[1]
        assert landed.mean() > 0.3 and np.array_equal(frame[landed], rgb[landed])
        shown[blend] = frame
    assert (shown[0.0] != shown[1.0]).any()
    with pytest.raises(ValueError, match="sample.paint_blend"):
        make_config("tiny", sample__paint_blend=-0.5)


def test_the_own_cache_fuses_a_painted_pixel_where_the_cache_rendered_it(
        tmp_path, world_dir, store):
    """With composite, the own cache keeps what it holds where it first put it: a painted
    pixel is fused at the depth the cache rendered it at, the depth head's guess only where
    the world drew (the same cache as fusing those depths by hand)."""
    from worldlab.memory.cache3d import PointCache

    world = memory_world(tmp_path, world_dir, store, "cache3d_own")
    world = with_sample(world, composite="cache")
    ep = store.read(store.ids()[0])
    f = world.chunk_frames
    stream, drawn = drawn_at_first_chunk(world, ep)
    before, frames = PointCache(stream.points.voxel, stream.points.max_points), stream._frames
    before.restore(stream.points.snapshot())
    paint = [stream._paint(frame, pose) for frame, pose in zip(drawn, ep.c2w[:f])]
    shown = stream.show(drawn)
    assert np.array_equal(shown, np.stack([frame for frame, _ in paint]))
    known = np.stack([depth for _, depth in paint])  # (f, h, w), inf where the world drew
    painted, guess = np.isfinite(known), world.depth_head.predict(shown)
    assert painted.mean() > 0.3 and np.abs(guess - known)[painted].mean() > 0.1
    c2w = stream.bank.poses([len(stream.bank) - 1])[0]  # the cameras the stream placed it at
    for i in range(f):
        if (frames + i) % world.config.memory.cache_stride == 0:
            before.fuse(shown[i], np.where(painted[i], known[i], guess[i]), c2w[i], ep.K[0])
    (points, colors, keys, seen, _), by_hand = stream.points.snapshot(), before.snapshot()
    np.testing.assert_allclose(points, by_hand[0], atol=1e-5)  # the head's last bits vary
    for mine, theirs in zip((colors, keys, seen), by_hand[1:4]):
        np.testing.assert_array_equal(mine, theirs)


def test_a_world_that_reads_no_cache_can_keep_one_to_paint(tmp_path, world_dir, store):
    """`train package --composite cache --cache3d own` gives any world (here one with no
    memory) a 3D cache that only paints: it loads, and what it showed at the walk's cameras
    is the engine's first chunk where the cache covers it. Without a depth head for the own
    cache the package is refused, naming it, and nothing is written."""
    from worldlab.cli import main
    from worldlab.model.depth_head import DepthHead

    torch.manual_seed(0)
    DepthHead().save_pretrained(tmp_path / "head")
    common = ["train", "package", "--autoencoder", str(world_dir / "autoencoder"), "--world",
              str(world_dir), "--weights", "world", "--composite", "cache", "--cache3d", "own"]
    with pytest.raises(ValueError, match="memory.cache3d='own' fuses .* pass depth_head"):
        main([*common, "--out", str(tmp_path / "refused")])
    assert not (tmp_path / "refused").exists()
    assert main([*common, "--depth-head", str(tmp_path / "head"), "--cache-points", "5000",
                 "--out", str(tmp_path / "painter")]) == 0
    w = load_world(tmp_path / "painter", device="cpu")
    assert not w.model.config.cache_latent and w.config.memory.cache_points == 5000
    ep = store.read(store.ids()[0])
    f = w.chunk_frames
    stream, drawn = drawn_at_first_chunk(w, ep)
    shown = stream.show(drawn)
    changed = (shown != drawn).any(-1)
    assert changed.mean() > 0.3 and len(stream.points) <= 5000
    assert np.abs(shown.astype(int) - ep.rgb[:f].astype(int))[changed].mean() < \
        np.abs(drawn.astype(int) - ep.rgb[:f].astype(int))[changed].mean()


def test_stream_reads_the_memory_training_selects(tmp_path, world_dir, store):
    finetune(world_dir, "sink", store, tmp_path / "run", steps=1, batch_size=2)
    wl.train.package(world_dir / "autoencoder", tmp_path / "run", tmp_path / "w")
    w = load_world(tmp_path / "w", device="cpu")
    ep = store.read(store.ids()[1])
    out = open_loop(w, ep, seed=0, steps=1)
    window = w.model.config.window_chunks
    chunks = ep.c2w.reshape(-1, 4, 4, 4)
    for j, read in enumerate(out["memory_chunks"], start=1):
        assert read == select_memory(chunks[:j + 1], j, window, 0, True, ep.K[0], (32, 32))
    assert out["memory_chunks"][-1] == [0]  # the sink, once it left the window


def test_stream_bad_setups_raise(world):
    mem = dataclasses.replace(world.config.memory, cache3d="own")
    with pytest.raises(ValueError, match="pass depth_head"):
        Stream(world.model, world.ae, mem, world.config.sample, np.eye(3))


def test_play_streams_with_memory_and_takes_back_a_failed_chunk(tmp_path, world_dir, store):
    from worldlab.camera import Action
    from worldlab.play.session import WorldSession

    finetune(world_dir, "retrieval", store, tmp_path / "run", steps=1, batch_size=2)
    wl.train.package(world_dir / "autoencoder", tmp_path / "run", tmp_path / "w")
    session = WorldSession(load_world(tmp_path / "w", device="cpu"), steps=1, twin=False)
    session.reset(engine="procedural", seed=0)
    memory = session.state.stream
    assert memory.bank is not None and len(memory.bank) == 1  # the context chunk
    for _ in range(12):
        session.step(Action(yaw=30.0))
    assert len(memory.bank) == 1 + 3  # three chunks made
    chunks, keys = len(memory.bank), memory.cache.chunks

    def broken(*args, **kwargs):
        raise RuntimeError("decoder down")
    session.world.decode = broken
    with pytest.raises(RuntimeError, match="decoder down"):
        session.step_chunk(Action(yaw=30.0))
    assert len(memory.bank) == chunks and memory.cache.chunks == keys


def test_a_session_plays_with_its_cache_painting_what_it_has_seen(tmp_path, world_dir):
    """`WorldSession.from_pretrained(..., paint=True)` (play --paint): the world's own 3D
    cache paints its frames; the same world without it draws them all. A world without a
    depth head is refused, naming it."""
    import shutil

    from worldlab.camera import Action
    from worldlab.model.depth_head import DepthHead
    from worldlab.play.session import WorldSession

    with pytest.raises(ValueError, match="memory.cache3d='own' needs its depth head"):
        WorldSession.from_pretrained(world_dir, "cpu", steps=1, twin=False, paint=True)
    shutil.copytree(world_dir, tmp_path / "w")
    torch.manual_seed(0)
    DepthHead().save_pretrained(tmp_path / "w" / "depth_head")
    frames = {}
    for paint in (False, True):
        session = WorldSession.from_pretrained(tmp_path / "w", "cpu", steps=1, twin=False,
                                               paint=paint)
        session.reset(engine="procedural", seed=0)
        frames[paint] = [session.step(Action(yaw=yaw)).frame
                         for yaw in (10.0,) * 4 + (-10.0,) * 4]
        stream = session.state.stream
        assert (stream.points is not None and len(stream.points) > 0) == paint
        session.close()
    assert session.world.config.sample.composite == "cache"
    assert not np.array_equal(frames[True][-1], frames[False][-1])


def memory_world(tmp_path, world_dir, store, variant: str):
    """`world_dir` fine-tuned one step as a memory variant and packaged (with an untrained
    depth head for the variants that need one)."""
    from worldlab.model.depth_head import DepthHead

    head = None
    if "own" in variant:
        torch.manual_seed(0)
        head = DepthHead()
        head.save_pretrained(tmp_path / "head")
    finetune(world_dir, variant, store, tmp_path / "run", steps=1, batch_size=2,
             depth_head=head)
    wl.train.package(world_dir / "autoencoder", tmp_path / "run", tmp_path / "w",
                     depth_head=None if head is None else tmp_path / "head")
    return load_world(tmp_path / "w", device="cpu")


@pytest.mark.parametrize("variant", ["retrieval", "cache3d_own", "cache3d_own+view"])
def test_a_memory_session_saved_mid_walk_resumes_bit_for_bit(tmp_path, world_dir, store,
                                                            variant):
    """A session with memory resumes from a save mid-walk to the same frames; with
    `+view` the world paints (composite, paint_view) and is saved before its first chunk,
    while the engine's first frame is still the view to paint: the save carries it."""
    from worldlab.camera import Action
    from worldlab.play import saved
    from worldlab.play.session import WorldSession

    variant, _, view = variant.partition("+")
    world = memory_world(tmp_path, world_dir, store, variant)
    if view:
        world = with_sample(world, composite="cache", paint_view="nearest")
    f = world.chunk_frames
    # turning in place comes back to known views every few chunks: retrieval has work
    script = [Action(yaw=30.0, forward=0.05 * (i % 2)) for i in range(8 * f)]
    # mid-chunk, once memory reads chunks older than the window (+view: before any chunk)
    cut = 0 if view else 5 * f + 2

    def started():
        s = WorldSession(world, steps=1, twin=False)
        s.reset(engine="procedural", seed=0)
        return s
    ref = started()
    expected = [ref.step(a).frame for a in script]
    first = started()
    for a in script[:cut]:
        first.step(a)
    first.save(tmp_path / "saved")
    first.step(Action(yaw=-45.0))  # diverge after saving: the copy on disk stays
    resumed = WorldSession(world, steps=1, twin=False)
    resumed.reset(engine="procedural", seed=3)  # overwritten by load
    resumed.load(tmp_path / "saved")
    got = [resumed.step(a).frame for a in script[cut:]]
    assert all(np.array_equal(g, e) for g, e in zip(got, expected[cut:]))
    a, b = ref.state.stream, resumed.state.stream
    assert len(a.bank) == len(b.bank) == 1 + 8 and a.last_memory == b.last_memory
    assert torch.equal(a.bank.latents(range(9)), b.bank.latents(range(9)))
    if variant == "retrieval":
        assert a.last_memory, "the walk never read its memory: the test would prove nothing"
    else:
        assert len(a.points) > 0 and np.array_equal(a.points.points, b.points.points)
        assert np.array_equal(a.points.colors, b.points.colors)
    assert a._view is None and b._view is None  # the world's frames end the view
    if view:
        tensors, meta = saved.read(tmp_path / "saved")
        assert meta["memory"]["view"] and "memory.view_depth" in tensors
        bad = dict(tensors, **{"memory.view_depth": -tensors["memory.view_depth"]})
        saved.write(tmp_path / "bad", bad, meta)
        other = WorldSession(world, steps=1, twin=False)
        with pytest.raises(saved.SaveError, match="memory.view_depth.* not positive depths"):
            other.load(tmp_path / "bad")
        assert other.state is None  # nothing changed


def test_a_memory_save_loads_only_into_its_own_memory(tmp_path, world_dir, store):
    from worldlab.camera import Action
    from worldlab.play import saved
    from worldlab.play.session import WorldSession

    world = memory_world(tmp_path, world_dir, store, "retrieval")
    s = WorldSession(world, steps=1, twin=False)
    s.reset(engine="procedural", seed=0)
    s.step_chunk(Action(yaw=30.0))
    s.save(tmp_path / "saved")
    tensors, meta = saved.read(tmp_path / "saved")
    assert meta["version"] == 3 and meta["memory"]["chunks"] == 2
    assert tuple(tensors["memory.latents"].shape[:2]) == (2, world.chunk_frames)
    sink = dataclasses.replace(world, config=dataclasses.replace(
        world.config, memory=dataclasses.replace(world.config.memory, retrieve=0, sink=True)))
    other = WorldSession(sink, steps=1, twin=False)  # the same model, another memory
    with pytest.raises(saved.SaveError, match="this world has sink=True"):
        other.load(tmp_path / "saved")
    assert other.state is None  # nothing changed
    bad = dict(tensors, **{"memory.c2w": tensors["memory.c2w"][:1]})
    saved.write(tmp_path / "bad", bad, {k: v for k, v in meta.items()
                                         if k not in ("format", "version")})
    with pytest.raises(saved.SaveError, match="memory.c2w"):
        WorldSession(world, steps=1, twin=False).load(tmp_path / "bad")


def test_a_memory_config_that_does_not_fit_the_checkpoint_names_the_field(tmp_path, world_dir):
    import json
    import shutil

    shutil.copytree(world_dir, tmp_path / "w")
    cfg = json.loads((tmp_path / "w" / "world_config.json").read_text())
    cfg["memory"] = {"retrieve": 1}
    cfg["model"]["memory_tokens"] = 64  # the config claims memory the weights do not have
    (tmp_path / "w" / "world_config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="memory.sink=False and memory.retrieve=1 need 64"):
        load_world(tmp_path / "w", device="cpu")


def test_memory_stores_refuse_bad_frames_and_keep_their_contents(world, store):
    ep = store.read(store.ids()[0])
    mem = dataclasses.replace(world.config.memory, cache3d="oracle")
    stream = Stream(world.model, world.ae, mem, world.config.sample, ep.K[0])
    stream.bank.add(torch.zeros(4, 4, 4, 4), ep.c2w[:4])
    stream.observe(ep.rgb[:4], ep.depth[:4])
    before = (len(stream.points), stream.points.points.copy(), len(stream.bank))
    bad_depth = ep.depth[:4].copy()
    bad_depth[0, 3, 3] = np.nan
    for rgb, depth, match in ((ep.rgb[:4, :16], ep.depth[:4], r"depth\[0\] must have shape"),
                              (ep.rgb[:4], bad_depth, "NaN"),
                              (ep.rgb[:4], None, "needs depth")):
        with pytest.raises(ValueError, match=match):
            stream.observe(rgb, depth)
    bad_pose = ep.c2w[4:8].copy()
    bad_pose[0, 0, 3] = np.inf
    with pytest.raises(ValueError, match="finite"):
        stream.bank.add(torch.zeros(4, 4, 4, 4), bad_pose)
    with pytest.raises(ValueError, match="latents of chunk 1 must have shape"):
        stream.bank.add(torch.zeros(4, 4, 8, 8), ep.c2w[4:8])
    assert (len(stream.points), len(stream.bank)) == (before[0], before[2])
    np.testing.assert_array_equal(stream.points.points, before[1])


def test_observe_fuses_all_frames_or_none(world, store):
    ep = store.read(store.ids()[0])
    mem = dataclasses.replace(world.config.memory, cache3d="oracle", cache_stride=1)
    stream = Stream(world.model, world.ae, mem, world.config.sample, ep.K[0])
    stream.bank.add(torch.zeros(4, 4, 4, 4), ep.c2w[:4])
    depth = ep.depth[:4].copy()
    depth[3, 0, 0] = np.nan  # the last frame is bad: the first three must not go in either
    with pytest.raises(ValueError, match=r"depth\[3\] contains NaN"):
        stream.observe(ep.rgb[:4], depth)
    assert len(stream.points) == 0


def test_the_stream_keeps_its_point_cache_bounded(world, store):
    ep = store.read(store.ids()[0])
    mem = dataclasses.replace(world.config.memory, cache3d="oracle", cache_stride=1,
                              cache_points=6000)
    stream = Stream(world.model, world.ae, mem, world.config.sample, ep.K[0])
    sizes = []
    for j in range(0, 24, 4):
        stream.bank.add(torch.zeros(4, 4, 4, 4), ep.c2w[j:j + 4])
        stream.observe(ep.rgb[j:j + 4], ep.depth[j:j + 4])
        sizes.append(len(stream.points))
    assert sizes[0] < 6000 and sizes[-2:] == [6000, 6000]  # it fills, then stays there
    with pytest.raises(ValueError, match="cache_points"):
        wl.make_config("tiny", memory__cache_points=0)


def test_bench_memory_times_worlds_side_by_side(tmp_path, world_dir):
    from worldlab.evaluate.bench import bench_memory

    r = bench_memory([f"a={world_dir}", f"b={world_dir}"], chunks=12, sample_steps=1,
                     device="cpu")
    assert r["baseline"] == "a" and set(r["worlds"]) == {"a", "b"}
    a, b = r["worlds"]["a"], r["worlds"]["b"]
    assert a["ms_vs_first"] == 1.0 and b["ms_vs_first"] > 0 and a["chunks"] == 12
    assert a["ms_per_chunk"] > 0 and a["memory_tokens_per_frame"] == 0
    with pytest.raises(ValueError, match="NAME=DIR"):
        bench_memory([str(world_dir)])


def test_play_with_a_3d_cache_shows_its_points(tmp_path, world_dir, store):
    from worldlab.camera import Action
    from worldlab.model.depth_head import DepthHead
    from worldlab.play.session import WorldSession

    head = DepthHead()
    head.save_pretrained(tmp_path / "head")
    finetune(world_dir, "cache3d_own", store, tmp_path / "run", steps=1, batch_size=2,
             depth_head=head)
    wl.train.package(world_dir / "autoencoder", tmp_path / "run", tmp_path / "w",
                     depth_head=tmp_path / "head")
    session = WorldSession(load_world(tmp_path / "w", device="cpu"), steps=1, twin=False)
    session.reset(engine="procedural", seed=0)
    before = len(session.memory_points())
    for _ in range(8):
        session.step(Action(forward=0.2))
    points = session.memory_points(max_points=50)
    assert before > 0 and 0 < len(points) <= 50 and points.shape[1] == 3


def test_memory_parameters_learn_at_their_own_rate():
    from worldlab.train.loop import lr_at, param_groups

    model = WorldModel(latent_channels=4, latent_size=4, width=32, depth=1, heads=2,
                       memory_tokens=64)
    cfg = wl.make_config("tiny", train__memory_lr_scale=10.0).train
    groups = param_groups(model, cfg)
    names = {id(p): n for n, p in model.named_parameters()}
    assert groups[1]["lr_scale"] == 10.0
    assert all("memory" in names[id(p)] for p in groups[1]["params"])
    assert not any("memory" in names[id(p)] for p in groups[0]["params"])
    assert sum(len(g["params"]) for g in groups) == len(names)
    # a model without memory parameters keeps one group; the schedule scales per group
    assert len(param_groups(WorldModel(latent_channels=4, latent_size=4, width=32, depth=1,
                                       heads=2), cfg)) == 1
    assert lr_at(3, cfg) > 0


def test_training_clips_are_the_revisits_for_every_variant(store, world):
    from worldlab.episodes.datasets import clip_windows
    from worldlab.memory.retrieval import chunk_overlap
    from worldlab.train.memory import revisit_windows

    windows = clip_windows(store, 8, 4, 4, store.ids())
    K = store.read(store.ids()[0]).K[0]
    kept = revisit_windows(store, windows, 8, 4, 2, K, (32, 32), 0.5)
    assert 0 < len(kept) < len(windows)
    for episode_id, start in windows:
        c2w = store.read(episode_id).c2w.reshape(-1, 4, 4, 4)
        j = start // 4 + 1
        best = chunk_overlap(c2w[:j - 2], c2w[j], K, (32, 32)).max() if j > 2 else 0.0
        assert ((episode_id, start) in kept) == (best >= 0.5)
    with pytest.raises(ValueError, match="no clip .* comes back"):
        revisit_windows(store, windows, 8, 4, 2, K, (32, 32), 1.01)
    # only memory can show it: the window's chunks overlap it by less than `below`
    seen = {}
    for episode_id, start in kept:
        c2w = store.read(episode_id).c2w.reshape(-1, 4, 4, 4)
        j = start // 4 + 1
        seen[episode_id, start] = chunk_overlap(c2w[j - 2:j], c2w[j], K, (32, 32)).max()
    below = float(np.median(list(seen.values())))  # these walks retrace: some pass, some not
    recall = revisit_windows(store, windows, 8, 4, 2, K, (32, 32), 0.5, below)
    assert 0 < len(recall) < len(kept)
    assert recall == [clip for clip in kept if seen[clip] < below]
    with pytest.raises(ValueError, match="max_window_overlap must be a share"):
        revisit_windows(store, windows, 8, 4, 2, K, (32, 32), 0.5, 0.0)


def test_open_loop_uses_the_worlds_own_depth_head(tmp_path, world_dir, store):
    from worldlab.model.depth_head import DepthHead

    DepthHead().save_pretrained(tmp_path / "head")
    finetune(world_dir, "cache3d_own", store, tmp_path / "run", steps=1, batch_size=2,
             depth_head=DepthHead())
    wl.train.package(world_dir / "autoencoder", tmp_path / "run", tmp_path / "w",
                     depth_head=tmp_path / "head")
    out = open_loop(load_world(tmp_path / "w", device="cpu"), store.read(store.ids()[0]),
                    steps=1)
    assert out["frames"].shape == (48, 32, 32, 3)


def test_a_checkpoint_from_before_memory_loads(tmp_path):
    import json

    from worldlab.train.checkpoints import load_weights

    tiny = dict(latent_channels=4, latent_size=4, width=32, depth=1, heads=2)
    WorldModel(**tiny).save_pretrained(tmp_path / "old")
    cfg = json.loads((tmp_path / "old" / "config.json").read_text())
    del cfg["memory_compress"]  # written before the field existed
    (tmp_path / "old" / "config.json").write_text(json.dumps(cfg))
    load_weights(WorldModel(**tiny), tmp_path / "old")  # its default: the same model
    with pytest.raises(ValueError, match="memory_compress=None but the model has"):
        load_weights(WorldModel(**tiny, memory_tokens=16, memory_compress=8), tmp_path / "old")
