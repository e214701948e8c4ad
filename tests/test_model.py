"""The world model: streaming == full pass, causality, prompt switching, control switches,
checkpoints, relative pose features and input validation. Tiny sizes, fp32, seeded."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

import worldlab as wl
from worldlab.model import WorldModel, block_causal_mask, relative_pose_features
from worldlab.model.memory_tokens import MemoryChunks
from worldlab.model.sampler import sample_chunk

B, F, C, S = 2, 2, 4, 4  # batch, frames per chunk, latent channels, latent size
TINY = dict(latent_channels=C, latent_size=S, width=32, depth=2, heads=2, chunk_frames=F,
            window_chunks=2)


def make_model(seed: int = 0, cls: type = WorldModel, **overrides) -> WorldModel:
    """A tiny model whose zero-initialised layers are randomised, so every path matters."""
    torch.manual_seed(seed)
    model = cls(**{**TINY, **overrides}).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim and bool((p == 0).all()):
                p.normal_(0.0, 0.1)
    return model


def make_inputs(n: int, seed: int = 1, text_dim: int = 384):
    """Latents, actions, poses (a walk that turns) and captions for n chunks."""
    g = torch.Generator().manual_seed(seed)
    T = n * F
    x = torch.randn(B, T, C, S, S, generator=g)
    actions = torch.zeros(B, T, 7)
    actions[..., :4] = torch.rand(B, T, 4, generator=g)
    actions[..., 4] = (torch.rand(B, T, generator=g) > 0.5).float()
    traj = wl.camera.turn_around(T - 1, degrees=90.0)
    c2w = torch.tensor(traj.c2w, dtype=torch.float32)[None].repeat(B, 1, 1, 1)
    c2w[1, :, :3, 3] += torch.linspace(0, 1, T)[:, None]  # second sample also walks
    text = torch.randn(B, n, 3, text_dim, generator=g)
    return x, actions, c2w, text


def chunk(j: int) -> slice:
    return slice(j * F, (j + 1) * F)


# ----------------------------------------------------------------------------------------
# Streaming equals the full pass
# ----------------------------------------------------------------------------------------


def make_memory(k: int = 2, seed: int = 5, valid=None) -> MemoryChunks:
    """k past chunks per sample at poses off the walk; `valid` (B, k) defaults to all."""
    g = torch.Generator().manual_seed(seed)
    c2w = torch.eye(4).repeat(B, k, F, 1, 1)
    c2w[..., :3, 3] = torch.randn(B, k, F, 3, generator=g)
    valid = torch.ones(B, k, dtype=torch.bool) if valid is None else valid
    return MemoryChunks(torch.randn(B, k, F, C, S, S, generator=g), c2w, valid)


@pytest.mark.parametrize("n", [2, 3, 6])  # window_chunks=2: 6 chunks run past the window
@pytest.mark.parametrize("extras", [False, True])
def test_streaming_matches_full_pass(n, extras):
    model = make_model(memory_tokens=2 * F * S * S, cache_latent=True) if extras \
        else make_model()
    x, actions, c2w, text = make_inputs(n)
    g = torch.Generator().manual_seed(5)
    memory = make_memory() if extras else None
    cache_lat = torch.randn(B, n * F, C + 1, S, S, generator=g) if extras else None
    tau = 0.63
    t = torch.zeros(B, n)
    t[:, -1] = tau  # teacher forcing: clean context, noisy last chunk
    drop = torch.tensor([[False] * n, [True] + [False] * (n - 1)])
    with torch.no_grad():
        v_full = model(x, t, actions=actions, c2w=c2w, text=text, text_drop=drop,
                       memory=memory, cache_latent=cache_lat)
        cache = model.new_cache(B)
        for j in range(n):
            kw = dict(actions=actions[:, chunk(j)], c2w=c2w[:, chunk(j)], text=text[:, j],
                      text_drop=drop[:, j],
                      cache_latent=None if cache_lat is None else cache_lat[:, chunk(j)])
            if j < n - 1:  # context chunks never read memory
                model.append_chunk(x[:, chunk(j)], cache, **kw)
            else:
                v_last = model.forward_chunk(x[:, chunk(j)], torch.full((B,), tau), cache,
                                             memory=memory, **kw)
    assert v_last.shape == (B, F, C, S, S)
    assert v_full[:, chunk(n - 1)].abs().mean() > 1e-2  # a non-trivial velocity
    torch.testing.assert_close(v_last, v_full[:, chunk(n - 1)], atol=1e-5, rtol=0)
    assert cache.chunks == n - 1
    assert cache.keys[0].shape[2] == min(n - 1, 2) * F * S * S  # bounded by the window


@pytest.mark.parametrize("compress", [1, 4])  # F=2, 4x4 tokens: 4 = blocks of 2x2
def test_memory_is_read_and_matches_when_deferred(compress):
    """Memory changes the generated chunk (and only it), padding slots change nothing,
    and a deferred append with memory gives the full pass's numbers."""
    model = make_model(memory_tokens=2 * F * S * S, memory_compress=compress)
    n, tau = 4, 0.5
    x, actions, c2w, text = make_inputs(n)
    t = torch.zeros(B, n)
    t[:, -1] = tau
    mem = make_memory()
    with torch.no_grad():
        base = model(x, t, actions=actions, c2w=c2w, text=text)
        v = model(x, t, actions=actions, c2w=c2w, text=text, memory=mem)
        assert (v[:, -F:] - base[:, -F:]).abs().mean() > 1e-3  # read by the last chunk
        torch.testing.assert_close(v[:, :-F], base[:, :-F], atol=1e-6, rtol=0)
        pad = torch.tensor([[True, False], [False, False]])
        masked = MemoryChunks(mem.latents[:, :1], mem.c2w[:, :1], pad[:, :1])
        padded = MemoryChunks(mem.latents, mem.c2w, pad)
        torch.testing.assert_close(model(x, t, actions=actions, c2w=c2w, text=text,
                                         memory=padded),
                                   model(x, t, actions=actions, c2w=c2w, text=text,
                                         memory=masked), atol=1e-5, rtol=0)
        # sample 1 has no valid slot: exactly the model without memory
        empty = model(x, t, actions=actions, c2w=c2w, text=text, memory=masked)
        torch.testing.assert_close(empty[1], base[1], atol=1e-6, rtol=0)
        cache = model.new_cache(B)
        for j in range(n - 1):
            model.append_chunk(x[:, chunk(j)], cache, defer=True, actions=actions[:, chunk(j)],
                               c2w=c2w[:, chunk(j)], text=text[:, j])
        j = n - 1
        v_stream = model.forward_chunk(x[:, chunk(j)], torch.full((B,), tau), cache,
                                       actions=actions[:, chunk(j)], c2w=c2w[:, chunk(j)],
                                       text=text[:, j], memory=mem)
    torch.testing.assert_close(v_stream, v[:, chunk(j)], atol=1e-5, rtol=0)


@pytest.mark.parametrize("compress", [1, 4])
def test_memory_read_once_samples_the_same_numbers(compress):
    """Memory read once per chunk (`read_memory`, as `sample_chunk` does) gives exactly the
    numbers of memory encoded at every step, the first step's pending chunk included; a
    read kept for another chunk is refused."""
    model = make_model(memory_tokens=2 * F * S * S, memory_compress=compress)
    x, actions, c2w, text = make_inputs(3)
    mem = make_memory()
    noise = torch.randn(B, F, C, S, S, generator=torch.Generator().manual_seed(9))
    kw = dict(actions=actions[:, chunk(2)], c2w=c2w[:, chunk(2)], text=text[:, 2])

    def context():
        cache = model.new_cache(B)
        for j in range(2):
            model.append_chunk(x[:, chunk(j)], cache, defer=True, actions=actions[:, chunk(j)],
                               c2w=c2w[:, chunk(j)], text=text[:, j])
        return cache

    def euler(cache, memory):  # sample_chunk's 3 Euler steps, spelt out
        z, times = noise, torch.linspace(1.0, 0.0, 4)
        with torch.no_grad():
            for t, t_next in zip(times[:-1], times[1:]):
                z = z + (t_next - t) * model.forward_chunk(z, t.expand(B), cache,
                                                           memory=memory, **kw)
        return z
    each_step = euler(context(), mem)
    cache = context()
    read = model.read_memory(mem, kw["c2w"], cache)
    assert torch.equal(euler(cache, read), each_step)
    cache = context()
    assert torch.equal(sample_chunk(model, cache, noise, 3, memory=mem, **kw), each_step)
    with torch.no_grad():
        model.append_chunk(each_step, cache, **kw)
        with pytest.raises(ValueError, match="read it again"):
            model.forward_chunk(noise, torch.ones(B), cache, memory=read, **kw)


def test_fresh_memory_changes_nothing():
    """Memory attention starts at zero: a fresh memory model with the weights of a model
    without memory gives its numbers exactly (step 0 of a memory fine-tune)."""
    base = make_model()
    model = WorldModel(**{**TINY, "memory_tokens": F * S * S}).eval()
    missing, unexpected = model.load_state_dict(base.state_dict(), strict=False)
    assert not unexpected and all("memory" in k for k in missing)
    x, actions, c2w, text = make_inputs(3)
    t = torch.zeros(B, 3)
    t[:, -1] = 0.7
    with torch.no_grad():
        torch.testing.assert_close(
            model(x, t, actions=actions, c2w=c2w, text=text, memory=make_memory(1)),
            base(x, t, actions=actions, c2w=c2w, text=text), atol=1e-6, rtol=0)


@pytest.mark.parametrize("cache_latent", [None, "every chunk", "generated chunk"])
def test_deferred_append_matches_full_pass(cache_latent):
    """Each chunk appended with defer=True is run within the next chunk's pass: every
    velocity still equals the full pass's (6 chunks, window 2: evictions included). With a
    3D-cache input given to every chunk, or only to the chunk being generated (as a stream
    does: its context chunks go in without one, as zeros, as training gives them)."""
    model = make_model(cache_latent=cache_latent is not None)
    n, tau = 6, 0.41
    x, actions, c2w, text = make_inputs(n)
    lat = torch.randn(B, n * F, C + 1, S, S) if cache_latent else None
    kw = lambda j: dict(actions=actions[:, chunk(j)], c2w=c2w[:, chunk(j)],  # noqa: E731
                        text=text[:, j], cache_latent=None if lat is None else lat[:, chunk(j)])
    with torch.no_grad():
        cache = model.new_cache(B)
        for j in range(n):
            t = torch.zeros(B, j + 1)
            t[:, -1] = tau
            full = None if lat is None else lat[:, :(j + 1) * F].clone()
            if cache_latent == "generated chunk":
                full[:, :j * F] = 0  # the context chunks had no render
            v_full = model(x[:, :(j + 1) * F], t, actions=actions[:, :(j + 1) * F],
                           c2w=c2w[:, :(j + 1) * F], text=text[:, :j + 1], cache_latent=full)
            v = model.forward_chunk(x[:, chunk(j)], torch.full((B,), tau), cache, **kw(j))
            assert cache.pending is None and cache.committed == j  # taken along
            torch.testing.assert_close(v, v_full[:, chunk(j)], atol=1e-5, rtol=0)
            context = kw(j)
            if cache_latent == "generated chunk":
                context["cache_latent"] = None
            model.append_chunk(x[:, chunk(j)], cache, defer=True, **context)
            assert cache.pending is not None and cache.chunks == j + 1
    assert cache.keys[0].shape[2] == 2 * F * S * S  # the window, as without deferring


def test_flush_equals_an_immediate_append():
    model = make_model()
    x, actions, c2w, text = make_inputs(3)
    with torch.no_grad():
        caches = model.new_cache(B), model.new_cache(B)
        for j in range(3):
            model.append_chunk(x[:, chunk(j)], caches[0], actions[:, chunk(j)],
                               c2w[:, chunk(j)], text[:, j])
            model.append_chunk(x[:, chunk(j)], caches[1], actions[:, chunk(j)],
                               c2w[:, chunk(j)], text[:, j], defer=True)
        model.flush(caches[1])
        model.flush(caches[1])  # nothing pending: a no-op
    now, deferred = caches
    assert deferred.pending is None and deferred.chunks == now.chunks == 3
    for k0, k1 in zip(now.keys + now.values, deferred.keys + deferred.values):
        torch.testing.assert_close(k1, k0, atol=0, rtol=0)
    torch.testing.assert_close(deferred.last_pose, now.last_pose)


def test_deferred_append_checks_its_input_at_once():
    model = make_model()
    x, actions, c2w, _ = make_inputs(2)
    cache = model.new_cache(B)
    with pytest.raises(ValueError, match="actions"):
        model.append_chunk(x[:, chunk(0)], cache, actions[:, :1], c2w[:, chunk(0)],
                           defer=True)
    assert cache.pending is None and cache.chunks == 0  # nothing was kept


def test_cache_snapshot_restores_a_pending_chunk():
    model = make_model()
    x, actions, c2w, _ = make_inputs(2)
    with torch.no_grad():
        cache = model.new_cache(B)
        model.append_chunk(x[:, chunk(0)], cache, actions[:, chunk(0)], c2w[:, chunk(0)],
                           defer=True)
        snap = cache.snapshot()
        model.forward_chunk(x[:, chunk(1)], torch.full((B,), 0.5), cache,
                            actions[:, chunk(1)], c2w[:, chunk(1)])
        assert cache.pending is None and cache.keys[0] is not None
        cache.restore(snap)
    assert cache.pending is not None and cache.keys[0] is None and cache.chunks == 1


def test_forward_chunk_leaves_cache_alone():
    model = make_model()
    x, actions, c2w, text = make_inputs(2)
    cache = model.new_cache(B)
    with torch.no_grad():
        model.append_chunk(x[:, chunk(0)], cache, actions[:, chunk(0)], c2w[:, chunk(0)])
        before = [k.clone() for k in cache.keys], cache.chunks, cache.last_pose.clone()
        model.forward_chunk(x[:, chunk(1)], torch.full((B,), 0.5), cache,
                            actions[:, chunk(1)], c2w[:, chunk(1)])
    assert all(torch.equal(a, b) for a, b in zip(before[0], cache.keys))
    assert cache.chunks == before[1] and torch.equal(cache.last_pose, before[2])


def test_block_causal_mask_golden():
    mask = block_causal_mask(n=4, chunk_tokens=1, window=1)
    expected = torch.tensor([[1, 0, 0, 0],   # chunk 0
                             [1, 1, 0, 0],   # chunk 1 sees chunk 0 (window 1)
                             [0, 1, 1, 0],   # chunk 2: chunk 0 left the window
                             [0, 0, 1, 1]], dtype=torch.bool)
    assert torch.equal(mask, expected)


# ----------------------------------------------------------------------------------------
# Causality and prompt switching
# ----------------------------------------------------------------------------------------


def test_cannot_see_the_future():
    model = make_model(window_chunks=4)
    x, actions, c2w, text = make_inputs(4)
    t = torch.rand(B, 4, generator=torch.Generator().manual_seed(2))
    k = 1
    x2, a2, p2, text2 = x.clone(), actions.clone(), c2w.clone(), text.clone()
    x2[:, chunk(k + 1)] += 3.0
    a2[:, chunk(k + 1), :4] -= 1.0
    p2[:, chunk(k + 1), :3, 3] += 2.0
    text2[:, k + 1] *= -1
    t2 = t.clone()
    t2[:, k + 1] = 1 - t2[:, k + 1]
    with torch.no_grad():
        v = model(x, t, actions=actions, c2w=c2w, text=text)
        v2 = model(x2, t2, actions=a2, c2w=p2, text=text2)
    torch.testing.assert_close(v2[:, :(k + 1) * F], v[:, :(k + 1) * F], atol=1e-6, rtol=0)
    assert (v2[:, chunk(k + 1)] - v[:, chunk(k + 1)]).abs().max() > 1e-2


def test_prompt_switch_never_touches_earlier_cache():
    model = make_model(window_chunks=8)
    x, actions, c2w, text = make_inputs(3)
    prompt_a, prompt_b = text[:, 0], text[:, 1]
    with torch.no_grad():
        cache = model.new_cache(B)
        for j in range(2):
            model.append_chunk(x[:, chunk(j)], cache, actions[:, chunk(j)], c2w[:, chunk(j)],
                               prompt_a)
        keys = [k.clone() for k in cache.keys]
        values = [v.clone() for v in cache.values]
        ref = model.new_cache(B)  # the same history, continued without a switch
        ref.keys, ref.values = list(cache.keys), list(cache.values)
        ref.chunks, ref.last_pose = cache.chunks, cache.last_pose
        model.append_chunk(x[:, chunk(2)], cache, actions[:, chunk(2)], c2w[:, chunk(2)],
                           prompt_b)
        model.append_chunk(x[:, chunk(2)], ref, actions[:, chunk(2)], c2w[:, chunk(2)],
                           prompt_a)
    old = keys[0].shape[2]
    for i in range(len(keys)):
        assert torch.equal(cache.keys[i][:, :, :old], keys[i])  # bit-identical
        assert torch.equal(cache.values[i][:, :, :old], values[i])
    # the switch did change the new chunk's K/V (past the first layer's keys, which come
    # before any cross-attention)
    assert not torch.equal(cache.keys[-1][:, :, old:], ref.keys[-1][:, :, old:])


# ----------------------------------------------------------------------------------------
# Control switches and conditioning
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("control", ["pose", "action"])
def test_control_switch(control):
    model = make_model(control=control)
    x, actions, c2w, text = make_inputs(2)
    t = torch.full((B, 2), 0.5)
    other_actions = actions.flip(1)
    other_c2w = c2w.flip(1)
    with torch.no_grad():
        v = model(x, t, actions=actions, c2w=c2w)
        v_act = model(x, t, actions=other_actions, c2w=c2w)
        v_pose = model(x, t, actions=actions, c2w=other_c2w)
    ignored, used = (v_act, v_pose) if control == "pose" else (v_pose, v_act)
    assert torch.equal(ignored, v)
    assert (used - v).abs().max() > 1e-3
    needed = "c2w" if control == "pose" else "actions"
    with pytest.raises(ValueError, match=needed):
        model(x, t, **({"actions": actions} if control == "pose" else {"c2w": c2w}))


def test_fresh_model_predicts_zero_velocity():
    torch.manual_seed(0)
    model = WorldModel(**TINY)  # AdaLN-zero and a zero final layer: v = 0 at the start
    x, actions, c2w, text = make_inputs(2)
    v = model(x, torch.rand(B, 2), actions=actions, c2w=c2w, text=text)
    assert torch.equal(v, torch.zeros_like(v))


def test_relative_pose_features_golden():
    walk = torch.tensor(wl.camera.straight(3, step_m=0.25).c2w)[None]  # (1, 4, 4, 4)
    feats = relative_pose_features(walk)
    assert feats.shape == (1, 4, 6)
    assert torch.equal(feats[0, 0], torch.zeros(6))  # first frame: no previous pose
    torch.testing.assert_close(feats[0, 1:], torch.tensor([[0, 0, 0.25, 0, 0, 0.0]] * 3,
                                                          dtype=torch.float64))
    turn = torch.tensor(wl.camera.turn_around(2, degrees=20.0).c2w)[None]
    feats = relative_pose_features(turn)
    # turning left (counter-clockwise from above) is a rotation about the camera's -y (up)
    torch.testing.assert_close(feats[0, 1:], torch.tensor([[0, 0, 0, 0, -math.radians(10), 0]]
                                                          * 2, dtype=torch.float64))
    previous = torch.tensor(wl.camera.pose_from_heading([0, 0, 0], -10.0))[None]
    torch.testing.assert_close(relative_pose_features(turn, previous)[0, 0, 4],
                               torch.tensor(-math.radians(10), dtype=torch.float64))


# ----------------------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------------------


def test_save_load_round_trip(tmp_path):
    model = make_model()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "diffusion_pytorch_model.safetensors").is_file()
    loaded = WorldModel.from_checkpoint(tmp_path, latent_channels=C, latent_size=S).eval()
    x, actions, c2w, text = make_inputs(2)
    t = torch.full((B, 2), 0.3)
    with torch.no_grad():
        assert torch.equal(model(x, t, actions=actions, c2w=c2w, text=text),
                           loaded(x, t, actions=actions, c2w=c2w, text=text))


def test_from_config_dataclass_and_mismatched_checkpoint(tmp_path):
    cfg = wl.make_config("tiny").model
    model = WorldModel.from_config_dataclass(cfg, latent_channels=C, latent_size=S)
    assert model.config.width == cfg.width and model.config.window_chunks == cfg.window_chunks
    model.save_pretrained(tmp_path)
    WorldModel.from_checkpoint(tmp_path, cfg, latent_channels=C, latent_size=S)
    wider = dataclasses.replace(cfg, width=2 * cfg.width)
    with pytest.raises(ValueError, match=f"width={cfg.width}.*expected width={2 * cfg.width}"):
        WorldModel.from_checkpoint(tmp_path, wider)
    with pytest.raises(ValueError, match="latent_size"):
        WorldModel.from_checkpoint(tmp_path, cfg, latent_size=2 * S)
    # a config edited on disk no longer fits the weights: loading refuses
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "width": 2 * cfg.width}))
    with pytest.raises(ValueError, match="shape"):
        WorldModel.from_pretrained(tmp_path, use_safetensors=True)


# ----------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------


def _bad_cases():
    x, actions, c2w, text = make_inputs(2)
    nan_pose = c2w.clone()
    nan_pose[0, 1, 0, 3] = float("nan")
    t = torch.full((B, 2), 0.5)
    ok = dict(x=x, t=t, actions=actions, c2w=c2w, text=text)
    return [
        ({**ok, "actions": actions[..., :6]}, "actions.*action width a=7"),
        ({**ok, "x": x[:, :3], "actions": actions[:, :3], "c2w": c2w[:, :3]},
         "3 frames.*multiple of chunk_frames=2"),
        ({**ok, "x": torch.randn(B, 4, C, 2 * S, 2 * S)}, "latent_size=4"),
        ({**ok, "x": torch.randn(B, 4, C + 1, S, S)}, "latent_channels=4"),
        ({**ok, "c2w": nan_pose}, "c2w must be finite"),
        ({**ok, "text": text[..., :100]}, "text.*e=384"),
        ({**ok, "t": t + 1}, r"t must lie in \[0, 1\]"),
        ({**ok, "t": t[:, :1]}, r"t has shape \(2, 1\)"),
        ({**ok, "memory": make_memory()}, "memory_tokens=0"),
    ]


@pytest.mark.parametrize("case", range(len(_bad_cases())))
def test_bad_input_raises(case):
    model = make_model()
    kwargs, message = _bad_cases()[case]
    with pytest.raises(ValueError, match=message):
        model(**kwargs)


def test_bad_chunk_and_architecture():
    model = make_model()
    x, actions, c2w, text = make_inputs(2)
    cache = model.new_cache(B)
    with pytest.raises(ValueError, match="a chunk must have shape"):
        model.forward_chunk(x, torch.zeros(B), cache, actions, c2w)
    with pytest.raises(ValueError, match=r"\(b,\) flow time"):
        model.forward_chunk(x[:, chunk(0)], torch.zeros(B, 1), cache, actions[:, chunk(0)],
                            c2w[:, chunk(0)])
    with pytest.raises(ValueError, match="control must be one of"):
        WorldModel(**{**TINY, "control": "keys"})
    with pytest.raises(ValueError, match="head dim"):
        WorldModel(**{**TINY, "heads": 3})
