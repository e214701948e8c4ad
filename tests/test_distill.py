"""Few-step students: the losses' invariants (a student that is its teacher has nothing to
learn), the teacher's trajectories and the self rollout against the sampler, every recipe end
to end on a tiny world into a loadable student world, and bad input."""

from __future__ import annotations

import copy
import json

import pytest
import torch

import worldlab as wl
from worldlab.cli import main
from worldlab.config import make_config
from worldlab.episodes import EpisodeStore, LatentCache, record_episode
from worldlab.play.distill_bench import parse_model
from worldlab.model.sampler import prefill, sample_chunk
from worldlab.pretrained import load_world
from worldlab.train import distill_losses as L
from worldlab.train.distill import distill
from worldlab.train.recipes import fill_latents

from test_play import make_tiny_world

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory):
    return make_tiny_world(tmp_path_factory.mktemp("teacher"))


@pytest.fixture(scope="module")
def store(tmp_path_factory, teacher_dir):
    s = EpisodeStore(tmp_path_factory.mktemp("store"))
    for seed in range(3):
        s.write(record_episode("procedural", seed, 16, 32, "mix"))
    fill_latents(s, LatentCache(s.root / "latents"), load_world(teacher_dir, "cpu").ae,
                 torch.device("cpu"))
    return s


@pytest.fixture(scope="module")
def teacher(teacher_dir):
    return load_world(teacher_dir, device="cpu").model.eval().requires_grad_(False)


def clip(model, b=2, chunks=3, seed=0):
    """A random clip: latents (b, chunks f, c, h, w) and its conditions."""
    g = torch.Generator().manual_seed(seed)
    cfg = model.config
    t = chunks * cfg.chunk_frames
    lat = torch.randn(b, t, cfg.latent_channels, cfg.latent_size, cfg.latent_size, generator=g)
    c2w = torch.eye(4).repeat(b, t, 1, 1)
    c2w[..., 2, 3] = torch.linspace(0, 1, t)
    actions = torch.zeros(b, t, cfg.action_width)
    actions[..., :4] = torch.randn(b, t, 4, generator=g) * 0.1  # forward, right, yaw, pitch
    cond = L.Conditions(actions, c2w,
                        torch.randn(b, chunks, cfg.text_tokens, cfg.text_dim, generator=g))
    return lat, cond


# ----------------------------------------------------------------------------------------
# Losses and their invariants
# ----------------------------------------------------------------------------------------


def test_chunk_velocity_matches_the_kv_cache_path(teacher):
    lat, cond = clip(teacher)
    f = teacher.config.chunk_frames
    context, x = lat[:, :2 * f], lat[:, 2 * f:]
    t = torch.tensor([0.3, 0.8])
    cache = prefill(teacher, context, cond.actions, cond.c2w, cond.text)
    cached = teacher.forward_chunk(x, t, cache, **cond.chunk(2, f))
    torch.testing.assert_close(L.chunk_velocity(teacher, context, x, t, cond), cached,
                               atol=1e-5, rtol=1e-4)


def test_ode_pairs_are_the_teachers_own_sampling_and_a_teacher_student_has_zero_loss(teacher):
    lat, cond = clip(teacher)
    f, S = teacher.config.chunk_frames, 2
    context = lat[:, :2 * f]
    noise = torch.randn(lat[:, :f].shape, generator=torch.Generator().manual_seed(1))
    states = [noise]
    cache = prefill(teacher, context, cond.actions, cond.c2w, cond.text)
    x0 = sample_chunk(teacher, cache, noise, S, on_step=lambda x, t: states.append(x),
                      **cond.chunk(2, f))
    traj = torch.stack(states, 1)  # (b, S + 1, f, c, h, w)
    assert traj.shape[1] == S + 1 and torch.equal(traj[:, -1], x0)
    grid = L.student_grid(S)
    for k in range(S):  # a student on the teacher's own grid is the teacher: nothing to learn
        loss = L.ode_regression_loss(teacher, context, traj, cond, torch.full((2,), k), grid)
        assert float(loss) < 1e-8


def test_consistency_target_at_the_boundary_is_the_teacher_step_itself(teacher):
    lat, cond = clip(teacher)
    f = teacher.config.chunk_frames
    x = lat[:, -f:]
    zero = torch.zeros(2)
    torch.testing.assert_close(L.clean_prediction(teacher, lat[:, :-f], x, zero, cond), x)
    student = copy.deepcopy(teacher).requires_grad_(True)
    loss = L.consistency_loss(student, teacher, lat[:, :-f], x, cond, torch.randn_like(x),
                              torch.ones(2), teacher_steps=4)
    loss.backward()
    assert torch.isfinite(loss) and any(p.grad is not None for p in student.parameters())


def test_dmd_gradient_vanishes_when_the_critic_is_the_teacher(teacher):
    lat, cond = clip(teacher)
    f = teacher.config.chunk_frames
    x0 = lat[:, -f:].clone().requires_grad_(True)
    t, noise = torch.tensor([0.4, 0.7]), torch.randn_like(x0)
    loss = L.dmd_loss(x0, lat[:, :-f], cond, teacher, teacher, t, noise)
    loss.backward()
    assert float(loss.detach()) == 0.0 and float(x0.grad.abs().max()) == 0.0
    other = copy.deepcopy(teacher)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.01 * torch.randn_like(p))
    x0.grad = None
    L.dmd_loss(x0, lat[:, :-f], cond, teacher, other, t, noise).backward()
    assert float(x0.grad.abs().max()) > 0


def test_self_rollout_is_the_students_own_sampling_with_gradient_on_the_last_chunks(teacher):
    student = copy.deepcopy(teacher).requires_grad_(True)
    lat, cond = clip(teacher, chunks=3)
    f, S = teacher.config.chunk_frames, 2
    noise = torch.randn(2, 2, *lat[:, :f].shape[1:], generator=torch.Generator().manual_seed(2))
    gen = L.self_rollout(student, lat[:, :f], cond, 2, S, S - 1, 1, noise)
    cache = prefill(student, lat[:, :f], cond.actions, cond.c2w, cond.text)
    with torch.no_grad():
        first = sample_chunk(student, cache, noise[:, 0], S, **cond.chunk(1, f))
        student.append_chunk(first, cache, **cond.chunk(1, f))
        second = sample_chunk(student, cache, noise[:, 1], S, **cond.chunk(2, f))
    torch.testing.assert_close(gen.detach(), torch.cat([first, second], 1), atol=1e-5,
                               rtol=1e-4)
    params = list(student.parameters())
    early = torch.autograd.grad(gen[:, :f].sum(), params, allow_unused=True, retain_graph=True)
    assert all(g is None or not g.any() for g in early)  # the first chunk: no gradient
    late = torch.autograd.grad(gen[:, f:].sum(), params, allow_unused=True)
    assert any(g is not None and g.any() for g in late)


# ----------------------------------------------------------------------------------------
# Every recipe end to end
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("recipe", ["ode", "consistency", "dmd", "dmd_clip"])
def test_each_recipe_makes_a_loadable_student_world(teacher_dir, store, tmp_path, recipe):
    d = make_config("tiny", distill__recipe=recipe).distill
    run = distill(teacher_dir, store.root, d, tmp_path / recipe, device="cpu")
    assert run.state["step"] == d.steps and run.config.sample.steps == d.student_steps
    student = load_world(tmp_path / recipe, device="cpu", subfolder="ema")
    assert student.config.distill.recipe == recipe
    assert student.config.sample.steps == d.student_steps
    record = json.loads((tmp_path / recipe / "distill_run.json").read_text())
    assert record["recipe"] == recipe and record["steps"] == d.steps
    if recipe.startswith("dmd"):
        assert (tmp_path / recipe / "critic" / "checkpoints").is_dir()


def test_dmd_resumes_student_and_critic(teacher_dir, store, tmp_path):
    d = make_config("tiny", distill__recipe="dmd", distill__steps=2).distill
    distill(teacher_dir, store.root, d, tmp_path / "a", device="cpu")
    d4 = make_config("tiny", distill__recipe="dmd", distill__steps=4).distill
    resumed = distill(teacher_dir, store.root, d4, tmp_path / "a", device="cpu", resume=True)
    straight = distill(teacher_dir, store.root, d4, tmp_path / "b", device="cpu")
    for p, q in zip(resumed.student.parameters(), straight.student.parameters()):
        torch.testing.assert_close(p, q)


def test_train_distill_cli(teacher_dir, store, tmp_path, capsys):
    assert main(["train", "distill", "--teacher", str(teacher_dir), "--recipe", "ode",
                 "--data", str(store.root), "--out", str(tmp_path / "s"), "--steps", "2",
                 "--student-steps", "2", "--batch-size", "2", "--device", "cpu",
                 "--set", "distill__pairs=4", "--set", "distill__teacher_steps=4"]) == 0
    assert "2-step student" in capsys.readouterr().out
    assert load_world(tmp_path / "s", "cpu", "ema").config.sample.steps == 2


# ----------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------


def test_a_student_of_another_architecture_is_refused(teacher_dir, store, tmp_path):
    other = make_tiny_world(tmp_path / "other")
    cfg = json.loads((other / "world" / "config.json").read_text())
    cfg["width"] = 64
    model = wl.model.WorldModel(**{k: v for k, v in cfg.items() if not k.startswith("_")})
    model.save_pretrained(tmp_path / "wide")
    d = make_config("tiny", distill__recipe="ode").distill
    with pytest.raises(ValueError, match="a student of this teacher.*width=64 but the model "
                                         "has width=32"):
        distill(teacher_dir, store.root, d, tmp_path / "s", student_init=tmp_path / "wide",
                device="cpu")
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("field,value,message", [
    ("critic_lr", 0.0, "distill.critic_lr must be > 0"),
    ("lr", -1e-4, "distill.lr must be > 0"),
    ("critic_ratio", 0, "distill.critic_ratio must be >= 1"),
    ("recipe", "dmd2", "distill.recipe must be one of"),
])
def test_bad_distill_config_names_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        make_config("tiny", **{f"distill__{field}": value})


def test_recipe_checks(teacher_dir, store, tmp_path):
    with pytest.raises(ValueError, match="multiple of distill.student_steps"):
        distill(teacher_dir, store.root, make_config("tiny", distill__recipe="ode",
                                                     distill__teacher_steps=5).distill,
                tmp_path / "s", device="cpu")
    with pytest.raises(ValueError, match="recipe must be one of"):
        distill(teacher_dir, store.root, make_config("tiny").distill, tmp_path / "s",
                device="cpu")
    d = make_config("tiny", distill__recipe="ode").distill
    distill(teacher_dir, store.root, d, tmp_path / "s", device="cpu")
    student = wl.train.package(tmp_path / "s" / "autoencoder", tmp_path / "s", tmp_path / "pkg")
    with pytest.raises(ValueError, match="itself a ode student"):
        distill(student, store.root, d, tmp_path / "t", device="cpu")


def test_sampling_a_student_with_other_steps_warns(teacher_dir, store, tmp_path):
    d = make_config("tiny", distill__recipe="ode").distill
    distill(teacher_dir, store.root, d, tmp_path / "s", device="cpu")
    world = load_world(tmp_path / "s", "cpu", "ema")
    with pytest.warns(UserWarning, match="2-step student .*steps=5"):
        wl.play.WorldSession(world, steps=5, twin=False)


@pytest.mark.parametrize("spec", ["teacher", "=data", "a=dir,steps=0", "a=dir,fast"])
def test_bad_model_spec(spec):
    with pytest.raises(ValueError):
        parse_model(spec)
