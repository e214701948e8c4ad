"""Long-horizon training switches (train.anti_drift) and the noisy context at sampling:
the error bank, the corruptions, the model's own rollout as context, diffusion forcing on
the context, and their config checks. Tiny and seeded."""

from __future__ import annotations

import pytest
import torch

from worldlab import train as T
from worldlab.config import make_config
from worldlab.model.dit import WorldModel
from worldlab.model.sampler import append_generated, rollout
from worldlab.train import anti_drift as A

from fit_accelerate_script import RandomClips

CF = make_config("tiny").model.chunk_frames
B, N, C, S = 3, 4, 4, 4  # batch, chunks, latent channels, latent size


def tiny_world(seed: int = 0) -> WorldModel:
    torch.manual_seed(seed)
    model = WorldModel.from_config_dataclass(make_config("tiny").model, C, S)
    with torch.no_grad():  # randomise the zero-initialised output so rollouts move
        for p in model.parameters():
            if p.ndim and bool((p == 0).all()):
                p.normal_(0.0, 0.1)
    return model


def clip(seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    t = N * CF
    return {"latents": torch.randn(B, t, C, S, S, generator=g),
            "actions": torch.rand(B, t, 7, generator=g).round(),
            "c2w": torch.eye(4).expand(B, t, 4, 4).clone()}


def train_cfg(**kw):
    return make_config("tiny", train={"forcing": "teacher", **kw}).train


# ----------------------------------------------------------------------------------------
# The error bank and the corruptions
# ----------------------------------------------------------------------------------------


def test_error_bank_keeps_recent_errors_by_flow_time():
    bank, g = A.ErrorBank(), torch.Generator().manual_seed(0)
    assert bank.draw(2, g) is None  # empty: nothing to draw
    bank.record(torch.full((2, CF, C, S, S), 9.0), torch.tensor([0.95, 0.7]))
    assert len(bank) == 2 and bank.draw(2, g) is None  # only high-noise errors so far
    errors = torch.arange(3.0)[:, None, None, None, None].expand(3, CF, C, S, S)
    bank.record(errors, torch.tensor([0.05, 0.15, 0.45]))
    drawn = bank.draw(50, g)
    assert drawn.shape == (50, CF, C, S, S)
    assert set(drawn[:, 0, 0, 0, 0].tolist()) == {0.0, 1.0, 2.0}  # never the t > 0.5 ones
    for _ in range(A.BANK_SIZE + 5):  # a bucket keeps its most recent BANK_SIZE
        bank.record(errors[:1], torch.tensor([0.05]))
    assert len(bank.buckets[0]) == A.BANK_SIZE
    before = [list(b) for b in bank.buckets]
    bad = errors.clone()
    bad[1, 0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="non-finite errors .1 of"):
        bank.record(bad, torch.tensor([0.05, 0.15, 0.45]))
    assert [list(b) for b in bank.buckets] == before  # nothing kept, not even the finite ones


@pytest.mark.parametrize("kind", ["noise", "blur", "colour", "bank"])
def test_corruptions_change_the_context_as_named(kind):
    g = torch.Generator().manual_seed(0)
    context = torch.randn(B, N - 1, CF, C, S, S, generator=g)
    bank = A.ErrorBank()
    bank.record(torch.full((1, CF, C, S, S), 0.5), torch.tensor([0.1]))
    out = A.corrupt(context, kind, g, bank)
    assert out.shape == context.shape and not torch.equal(out, context)
    delta = out - context
    if kind == "colour":  # one offset per sample and channel, the same at every pixel
        assert torch.allclose(delta, delta[:, :1, :1, :, :1, :1].expand_as(delta))
    if kind == "bank":
        assert torch.allclose(delta, torch.full_like(delta, 0.5))
    flat = torch.ones(1, 1, CF, C, S, S)
    if kind == "blur":  # a flat latent is its own blur
        assert torch.allclose(A.corrupt(flat, kind, g), flat)
    with pytest.raises(ValueError, match="corruption 'smudge'"):
        A.corrupt(context, "smudge", g)


# ----------------------------------------------------------------------------------------
# What the model sees
# ----------------------------------------------------------------------------------------


def test_all_switches_off_leave_the_clip_and_the_generator_alone():
    g = torch.Generator().manual_seed(3)
    state = g.get_state()
    b = clip()
    inputs = A.context_inputs(tiny_world(), b["latents"], train_cfg(), CF, g, None,
                              b["actions"], b["c2w"])
    assert inputs is b["latents"] and torch.equal(g.get_state(), state)


def test_own_rollout_replaces_the_middle_chunks_only():
    model, b = tiny_world(), clip()
    model.train()
    lat, t = b["latents"], N * CF
    own = A.own_rollout(model, lat, CF, 2, torch.Generator().manual_seed(1), b["actions"],
                        b["c2w"])
    assert model.training  # put back as it was
    assert torch.equal(own[:, :CF], lat[:, :CF]) and torch.equal(own[:, -CF:], lat[:, -CF:])
    seed = int(torch.randint(0, 2 ** 62, (1,), generator=torch.Generator().manual_seed(1)))
    expected = rollout(model.eval(), lat[:, :CF], b["actions"][:, :t - CF],
                       b["c2w"][:, :t - CF], None, 2,
                       generator=torch.Generator().manual_seed(seed))
    torch.testing.assert_close(own[:, CF:t - CF], expected[:, CF:])
    assert (own[:, CF:t - CF] - lat[:, CF:t - CF]).abs().mean() > 0.1  # really its own


def test_corruption_hits_a_share_of_samples_and_never_the_target():
    b = clip()
    cfg = train_cfg(context_corruption="noise", corruption_prob=0.5)
    hits = []
    for seed in range(40):
        inputs = A.context_inputs(tiny_world(), b["latents"], cfg, CF,
                                  torch.Generator().manual_seed(seed), None)
        assert torch.equal(inputs[:, -CF:], b["latents"][:, -CF:])
        hits += (inputs[:, :-CF] != b["latents"][:, :-CF]).flatten(1).any(1).tolist()
    assert 0.3 < sum(hits) / len(hits) < 0.7


def test_context_noise_draws_small_context_times():
    t, mask = T.chunk_times(500, N, "teacher", torch.Generator().manual_seed(0),
                            context_noise=0.2)
    assert (t[:, :-1] >= 0).all() and (t[:, :-1] <= 0.2).all() and t[:, :-1].std() > 0.03
    assert torch.equal(mask[:, :-1], torch.zeros(500, N - 1))


def test_bank_records_the_clean_prediction_error():
    """A fresh WorldModel predicts v = 0, so its clean prediction is x_t itself: the error
    recorded is x_t - x0 of the last chunk."""
    model = WorldModel.from_config_dataclass(make_config("tiny").model, C, S)
    b, seen = clip(), []
    T.flow_matching_loss(model, b["latents"], chunk_frames=CF,
                         generator=torch.Generator().manual_seed(0), forcing="teacher",
                         actions=b["actions"], c2w=b["c2w"],
                         observe=lambda err, t: seen.append((err, t)))
    err, t = seen[0]
    g = torch.Generator().manual_seed(0)
    times, _ = T.chunk_times(B, N, "teacher", g)
    noise = torch.randn(b["latents"].shape, generator=g)[:, -CF:]
    x0 = b["latents"][:, -CF:]
    tt = times[:, -1, None, None, None, None]
    torch.testing.assert_close(err, (1 - tt) * x0 + tt * noise - x0)
    torch.testing.assert_close(t, times[:, -1])


@pytest.mark.parametrize("switch", [dict(context_corruption="bank"),
                                    dict(context_corruption="blur", context_noise=0.1),
                                    dict(self_rollout_prob=1.0, self_rollout_steps=1)])
def test_fit_trains_with_each_switch(switch):
    cfg = train_cfg(steps=3, **switch)
    logs = []
    state = T.fit(tiny_world(), RandomClips(6, N * CF, C, S), cfg,
                  T.world_model_loss(cfg, CF, captions=None),
                  callbacks=[logs.append])
    assert state["step"] == 3 and all(torch.isfinite(torch.tensor(s["loss"])) for s in logs)
    if switch.get("context_corruption") == "bank":
        assert logs[-1]["bank_errors"] == 3 * cfg.batch_size  # each step records its batch


def test_a_long_rollout_is_cropped_before_the_loss():
    """self_rollout_chunks=2: clips of N + 2 chunks roll out from their first chunk, then
    the model trains on the last N chunks only, its own rollout as their context."""
    cfg = train_cfg(steps=2, self_rollout_prob=1.0, self_rollout_steps=1, self_rollout_chunks=2)
    model, seen = tiny_world(), []
    model.register_forward_hook(lambda m, args, out: seen.append(out.shape[1]))
    state = T.fit(model, RandomClips(6, (N + 2) * CF, C, S), cfg,
                  T.world_model_loss(cfg, CF, captions=None))
    assert state["step"] == 2 and seen and set(seen) == {N * CF}  # the trained passes
    b, g = clip(), torch.Generator().manual_seed(3)
    own = A.own_rollout(model, b["latents"], CF, 1, g, b["actions"], b["c2w"])
    assert torch.equal(own[:, -CF:], b["latents"][:, -CF:])


def test_switches_need_teacher_forcing_and_valid_values():
    with pytest.raises(ValueError, match="self_rollout_chunks=4 rolls out .* is 0"):
        make_config("tiny", train={"forcing": "teacher", "self_rollout_chunks": 4})
    with pytest.raises(ValueError, match="self_rollout_chunks=4 crops .* memory"):
        make_config("tiny", train={"forcing": "teacher", "self_rollout_chunks": 4,
                                   "self_rollout_prob": 0.5},
                    memory={"cache3d": "oracle"})
    with pytest.raises(ValueError, match="train.self_rollout_chunks"):
        make_config("tiny", train={"forcing": "teacher", "self_rollout_chunks": -1})
    with pytest.raises(ValueError, match="train.context_noise .* train.forcing='teacher'"):
        make_config("tiny", train={"forcing": "diffusion", "context_noise": 0.1})
    with pytest.raises(ValueError, match="train.context_corruption"):
        make_config("tiny", train={"forcing": "teacher", "context_corruption": "smudge"})
    with pytest.raises(ValueError, match="sample.context_noise"):
        make_config("tiny", sample={"context_noise": 0.9})
    # a switch the world does not carry: noised context it was never trained to read
    with pytest.raises(ValueError,
                       match=r"sample.context_noise=0.05 .*\(train.context_noise is 0\)"):
        make_config("tiny", train={"forcing": "teacher"}, sample={"context_noise": 0.05})
    make_config("tiny", train={"forcing": "teacher", "context_noise": 0.1},
                sample={"context_noise": 0.05})


# ----------------------------------------------------------------------------------------
# Noisy context at sampling time
# ----------------------------------------------------------------------------------------


def test_generated_chunk_goes_in_noised_to_the_context_time():
    model, b = tiny_world(), clip()
    x0, cond = b["latents"][:, :CF], dict(actions=b["actions"][:, :CF], c2w=b["c2w"][:, :CF])
    cache = model.new_cache(B)
    append_generated(model, cache, x0, 0.0, **cond)
    assert torch.equal(cache.pending["x"], x0) and torch.equal(cache.pending["t"],
                                                                torch.zeros(B))
    cache = model.new_cache(B)
    append_generated(model, cache, x0, 0.2, torch.Generator().manual_seed(0), **cond)
    noise = torch.randn(x0.shape, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(cache.pending["x"], 0.8 * x0 + 0.2 * noise)
    assert torch.allclose(cache.pending["t"], torch.full((B,), 0.2))
    with pytest.raises(ValueError, match="context_noise"):
        append_generated(model, model.new_cache(B), x0, 1.5, **cond)
