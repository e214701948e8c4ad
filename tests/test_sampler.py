"""Sampling: exactness on a known velocity field, guidance, determinism and cost."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn

from worldlab.model import sampler
from worldlab.model import WorldModel

from test_model import B, C, F, S, make_inputs, make_model  # the shared tiny setup


class StraightFlow(nn.Module):
    """The exact rectified-flow velocity from a fixed noise to a fixed target x0.

    Along x_t = (1 - t) x0 + t noise the velocity is v = noise - x0 at every t: a real
    velocity field with straight paths, so every solver at any step count lands on x0.
    """

    def __init__(self, x0: torch.Tensor, noise: torch.Tensor):
        super().__init__()
        self.x0, self.noise = x0, noise
        self.config = SimpleNamespace(chunk_frames=x0.shape[1])
        self.calls = 0

    def forward_chunk(self, x, t, cache, **_):
        self.calls += 1
        return self.noise - self.x0


class CountingModel(WorldModel):
    """The real world model, counting its streaming calls."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = {"forward_chunk": 0, "append_chunk": 0}

    def forward_chunk(self, *args, **kwargs):
        self.calls["forward_chunk"] += 1
        return super().forward_chunk(*args, **kwargs)

    def append_chunk(self, *args, **kwargs):
        self.calls["append_chunk"] += 1
        return super().append_chunk(*args, **kwargs)


def target_and_noise(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, F, C, S, S, generator=g), torch.randn(B, F, C, S, S, generator=g)


# ----------------------------------------------------------------------------------------
# One chunk
# ----------------------------------------------------------------------------------------


def test_one_euler_step_recovers_x0_exactly():
    x0, noise = target_and_noise()
    flow = StraightFlow(x0, noise)
    out = sampler.sample_chunk(flow, None, noise, steps=1)
    # exact up to float rounding of noise - (noise - x0)
    torch.testing.assert_close(out, x0, atol=1e-6, rtol=0)
    assert flow.calls == 1


@pytest.mark.parametrize("solver,calls_per_step", [("euler", 1), ("heun", 2)])
def test_solvers_follow_straight_paths(solver, calls_per_step):
    x0, noise = target_and_noise(1)
    flow = StraightFlow(x0, noise)
    out = sampler.sample_chunk(flow, None, noise, steps=4, solver=solver)
    torch.testing.assert_close(out, x0, atol=1e-5, rtol=0)
    assert flow.calls == 4 * calls_per_step


def test_heun_and_euler_run_on_the_world_model():
    model = make_model()
    x, actions, c2w, text = make_inputs(2)
    cache = model.new_cache(B)
    with torch.no_grad():
        model.append_chunk(x[:, :F], cache, actions[:, :F], c2w[:, :F], text[:, 0])
    _, noise = target_and_noise(2)
    kw = dict(actions=actions[:, F:], c2w=c2w[:, F:], text=text[:, 1])
    euler = sampler.sample_chunk(model, cache, noise, steps=3, solver="euler", **kw)
    heun = sampler.sample_chunk(model, cache, noise, steps=3, solver="heun", **kw)
    assert euler.shape == heun.shape == (B, F, C, S, S)
    assert torch.isfinite(euler).all() and torch.isfinite(heun).all()
    assert (euler - heun).abs().max() > 1e-4  # a curved field: second order differs


def test_guidance():
    model = make_model()
    x, actions, c2w, text = make_inputs(1)
    cache = model.new_cache(B)
    _, noise = target_and_noise(3)
    kw = dict(actions=actions, c2w=c2w)
    one = torch.ones(B)
    with torch.no_grad():
        v_text = model.forward_chunk(noise, one, cache, text=text[:, 0], **kw)
        v_null = model.forward_chunk(noise, one, cache, text=text[:, 0],
                                     text_drop=torch.ones(B, dtype=torch.bool), **kw)
    # guidance = 1 is the plain conditional path: one Euler step is noise - v_text
    out = sampler.sample_chunk(model, cache, noise, 1, guidance=1.0, text=text[:, 0], **kw)
    torch.testing.assert_close(out, noise - v_text, atol=1e-6, rtol=0)
    g = 3.0
    out = sampler.sample_chunk(model, cache, noise, 1, guidance=g, text=text[:, 0], **kw)
    torch.testing.assert_close(out, noise - (v_null + g * (v_text - v_null)), atol=1e-5,
                               rtol=0)
    assert (v_text - v_null).abs().max() > 1e-3  # the text does something


def test_bad_sampling_arguments():
    x0, noise = target_and_noise()
    flow = StraightFlow(x0, noise)
    for kwargs, message in [({"steps": 0}, "steps must be a positive int"),
                            ({"steps": 2, "solver": "rk4"}, "solver must be one of"),
                            ({"steps": 2, "guidance": float("nan")}, "guidance must be")]:
        with pytest.raises(ValueError, match=message):
            sampler.sample_chunk(flow, None, noise, **kwargs)


# ----------------------------------------------------------------------------------------
# Rollout
# ----------------------------------------------------------------------------------------


def test_rollout_shapes_cost_and_context():
    model = make_model(cls=CountingModel)
    n, n_context, steps = 5, 1, 3
    x, actions, c2w, text = make_inputs(n)
    seen = []
    out = sampler.rollout(model, x[:, :n_context * F], actions, c2w, text, steps,
                          generator=torch.Generator().manual_seed(0),
                          callback=lambda j, chunk: seen.append((j, chunk.shape)))
    assert out.shape == (B, n * F, C, S, S)
    assert torch.equal(out[:, :n_context * F], x[:, :n_context * F])
    generated = n - n_context
    assert model.calls == {"forward_chunk": steps * generated, "append_chunk": n - 1}
    assert seen == [(j, (B, F, C, S, S)) for j in range(n_context, n)]


def test_rollout_is_deterministic_with_a_generator():
    model = make_model()
    x, actions, c2w, text = make_inputs(2)
    run = [sampler.rollout(model, x[:, :0], actions, c2w, text, 2, solver="heun",
                           guidance=2.0, generator=torch.Generator().manual_seed(seed))
           for seed in (7, 7, 8)]
    assert run[0].shape == (B, 2 * F, C, S, S)
    assert torch.equal(run[0], run[1])
    assert not torch.allclose(run[0], run[2])


def test_rollout_bad_input():
    model = make_model()
    x, actions, c2w, text = make_inputs(3)
    with pytest.raises(ValueError, match="multiple of chunk_frames=2"):
        sampler.rollout(model, x[:, :3], actions, c2w, text, 2)
    with pytest.raises(ValueError, match="actions/c2w cover 5 frames"):
        sampler.rollout(model, x[:, :2], actions[:, :5], c2w[:, :5], None, 2)
    with pytest.raises(ValueError, match="captions must be"):
        sampler.rollout(model, x[:, :2], actions, c2w, text[:, :2], 2)
    with pytest.raises(ValueError, match="needs actions"):
        sampler.rollout(model, x[:, :2], None, None, None, 2)
