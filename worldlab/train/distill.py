"""Few-step students of a many-step causal teacher (`python -m worldlab train distill`).

The student is the teacher's own `WorldModel` (same config, started from its weights)
trained to be sampled with `distill.student_steps` Euler steps instead of the teacher's
`sample.steps`. Recipes (`distill.recipe`, losses in `distill_losses`):

    ode          regress the teacher's ODE: pairs sampled by the causal teacher with its KV
                 cache (CausVid's initialisation, WorldPlay's few-step init)
    consistency  causal consistency distillation: no pairs, one teacher step per sample
    dmd          distribution matching on the student's own rollouts (Self-Forcing): a
                 fake-score critic (a trainable copy of the teacher, `critic_ratio` flow
                 steps per student step) and the frozen teacher; one random exit step per
                 rollout; gradient on the last `grad_chunks` chunks
    dmd_clip     the same matching over every generated chunk of the rollout, each with its
                 own clean generated past, and gradient through all of them (clip-wise
                 DMD of Stable Forcing; its replay is this rollout, re-scored whole)

Training runs through `fit` (seeded, resumable; the critic checkpoints beside the student).
The run directory is a student world (`load_world(run, subfolder="ema")`): the student's
`world_config.json` (the teacher's, with `sample.steps` = the student's steps and the
`distill` section filled), the teacher's autoencoder and captions, and `distill_run.json`
(the recipe, the teacher, the seconds spent). `train package --autoencoder
<teacher>/autoencoder --world <run>` makes a float16 copy to ship.
"""

from __future__ import annotations

import copy
import dataclasses
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..atomic import atomic_dir, atomic_write_json, atomic_write_text
from ..config import DistillConfig, TrainConfig, WorldConfig, validate_config
from ..episodes import ClipTensors, EpisodeStore, LatentCache
from ..loading import load_module, read_model_config
from ..model.dit import WorldModel
from ..model.sampler import prefill, sample_chunk
from ..pretrained import CAPTIONS_FILE, load_world, resolve_checkpoint
from . import distill_losses as L
from .checkpoints import check_config, latest_checkpoint, load_checkpoint, save_checkpoint
from .loop import fit, make_accelerator, steps_for_budget
from .recipes import fill_latents, trained_on

RECIPES = ("ode", "consistency", "dmd", "dmd_clip")  # config.RECIPES less "none"
ARCHITECTURE_IGNORED = ("window_chunks",)  # no weight depends on it


# ----------------------------------------------------------------------------------------
# Checks
# ----------------------------------------------------------------------------------------


def _check(d: DistillConfig) -> None:
    if d.recipe not in RECIPES:
        raise ValueError(f"distill.recipe must be one of {RECIPES} to distil, got {d.recipe!r}")
    if d.recipe == "ode" and d.teacher_steps % d.student_steps:
        raise ValueError(f"distill.teacher_steps={d.teacher_steps} must be a multiple of "
                         f"distill.student_steps={d.student_steps}: the student's grid is "
                         f"read off the teacher's trajectory")


# ----------------------------------------------------------------------------------------
# Data: clips, and the teacher's trajectories on them
# ----------------------------------------------------------------------------------------


class _Text:
    """Caption ids (b, n) -> embeddings (b, n, k, e) through the teacher's caption table."""

    def __init__(self, table, vocabulary, device):
        self.embedded = table.embed([vocabulary])[0].to(device)  # (u, k, e)

    def __call__(self, batch: dict) -> torch.Tensor:
        return self.embedded[batch["caption_ids"]]


def _conditions(batch: dict, text: _Text) -> L.Conditions:
    return L.Conditions(batch["actions"].float(), batch["c2w"].float(), text(batch))


class TeacherPairs:
    """ODE pairs: for clips of a ClipTensors, the teacher's trajectory (p, S + 1, f, c, h, w)
    of the last chunk on the student's grid, sampled with its KV cache after the clip's true
    earlier chunks. `gather` gives the clip's batch plus `trajectory`."""

    def __init__(self, clips: ClipTensors, indices: torch.Tensor, trajectory: torch.Tensor):
        self.clips, self.indices, self.trajectory = clips, indices, trajectory

    def __len__(self) -> int:
        return len(self.indices)

    def gather(self, rows: list[int]) -> dict:
        r = torch.as_tensor(rows)
        return {**self.clips.gather(self.indices[r].tolist()), "trajectory": self.trajectory[r]}


@torch.no_grad()
def teacher_pairs(teacher, clips: ClipTensors, text: _Text, d: DistillConfig, device,
                  batch: int = 64, progress: Callable[[int], None] | None = None
                  ) -> TeacherPairs:
    """`d.pairs` trajectories of the teacher (Euler, `d.teacher_steps`), kept at every
    teacher_steps / student_steps-th step."""
    g = torch.Generator().manual_seed(d.seed)
    indices = torch.randint(len(clips), (d.pairs,), generator=g)
    every, f, out = d.teacher_steps // d.student_steps, teacher.config.chunk_frames, []
    for lo in range(0, d.pairs, batch):
        b = {k: v.to(device) for k, v in clips.gather(indices[lo:lo + batch].tolist()).items()}
        cond = _conditions(b, text)
        lat = b["latents"]  # (b, t, c, h, w)
        context, n = lat[:, :-f], lat.shape[1] // f
        cache = prefill(teacher, context, cond.actions, cond.c2w, cond.text)
        noise = torch.randn(lat[:, -f:].shape, generator=g).to(device)
        states = [noise]
        sample_chunk(teacher, cache, noise, d.teacher_steps, on_step=lambda x, t: (
            states.append(x) if round(float(1 - t) * d.teacher_steps) % every == 0 else None),
            **cond.chunk(n - 1, f))
        out.append(torch.stack(states, 1).cpu())  # (b, S + 1, f, c, h, w)
        if progress is not None:
            progress(min(lo + batch, d.pairs))
    return TeacherPairs(clips, indices, torch.cat(out))


# ----------------------------------------------------------------------------------------
# The losses as fit's loss_fn(model, batch, generator)
# ----------------------------------------------------------------------------------------


def _ode_loss(d: DistillConfig, text: _Text, f: int):
    def loss_fn(student, batch, g):
        traj = batch["trajectory"].to(batch["latents"].device)
        k = torch.randint(d.student_steps, (traj.shape[0],), generator=g).to(traj.device)
        grid = L.student_grid(d.student_steps, traj.device)
        return L.ode_regression_loss(student, batch["latents"][:, :-f], traj,
                                     _conditions(batch, text), k, grid), {}
    return loss_fn


def _consistency_loss(d: DistillConfig, teacher, text: _Text, f: int):
    def loss_fn(student, batch, g):
        lat = batch["latents"]
        i = torch.randint(1, d.teacher_steps + 1, (lat.shape[0],), generator=g).to(lat.device)
        noise = torch.randn(lat[:, -f:].shape, generator=g).to(lat.device)
        return L.consistency_loss(student, teacher, lat[:, :-f], lat[:, -f:],
                                  _conditions(batch, text), noise, i.float(),
                                  d.teacher_steps), {}
    return loss_fn


class Critic:
    """DMD's fake score: a trainable copy of the teacher and its optimizer."""

    def __init__(self, teacher, d: DistillConfig):
        self.model = copy.deepcopy(teacher).train().requires_grad_(True)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=d.critic_lr,
                                     weight_decay=0.0)

    def step(self, loss: torch.Tensor) -> float:
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        return float(loss.detach())


def _uniform_t(b: int, g, device) -> torch.Tensor:
    return (0.02 + 0.96 * torch.rand(b, generator=g)).to(device)  # (b,), away from 0 and 1


def _dmd_loss(d: DistillConfig, teacher, critic: Critic, text: _Text, f: int):
    """Student step: one self rollout (1 true chunk, then generated ones), `critic_ratio`
    critic steps on it with fresh noise levels, then the DMD loss on the scored chunks."""
    clip_wise = d.recipe == "dmd_clip"

    def loss_fn(student, batch, g):
        lat = batch["latents"]
        cond = _conditions(batch, text)
        first, chunks = lat[:, :f], lat.shape[1] // f - 1
        exit_step = int(torch.randint(d.student_steps, (1,), generator=g))
        noise = torch.randn((lat.shape[0], chunks, f, *lat.shape[2:]),
                            generator=g).to(lat.device)  # (b, chunks, f, c, h, w)
        grad_chunks = chunks if clip_wise else min(d.grad_chunks, chunks)
        gen = L.self_rollout(student, first, cond, chunks, d.student_steps, exit_step,
                             grad_chunks, noise)  # (b, chunks f, c, h, w)
        clip = torch.cat([first, gen.detach()], 1)
        scored = range(1, chunks + 1) if clip_wise else range(chunks, chunks + 1)
        critic_logs = []
        for _ in range(d.critic_ratio):
            loss = sum(L.critic_loss(critic.model, clip[:, :j * f], clip[:, j * f:(j + 1) * f],
                                     cond, _uniform_t(lat.shape[0], g, lat.device),
                                     torch.randn(first.shape, generator=g).to(lat.device))
                       for j in scored) / len(scored)
            critic_logs.append(critic.step(loss))
        loss = sum(L.dmd_loss(gen[:, (j - 1) * f:j * f], clip[:, :j * f], cond, teacher,
                              critic.model, _uniform_t(lat.shape[0], g, lat.device),
                              torch.randn(first.shape, generator=g).to(lat.device))
                   for j in scored) / len(scored)
        return loss, {"critic_loss": sum(critic_logs) / len(critic_logs),
                      "exit_step": exit_step}
    return loss_fn


# ----------------------------------------------------------------------------------------
# The recipe
# ----------------------------------------------------------------------------------------


@dataclass
class DistillRun:
    student: torch.nn.Module
    ema: torch.nn.Module | None
    config: WorldConfig  # the student world's
    state: dict[str, Any]
    seconds: dict[str, float]  # "pairs", "train"


def _train_config(d: DistillConfig) -> TrainConfig:
    return TrainConfig(steps=d.steps, batch_size=d.batch_size, lr=d.lr, weight_decay=0.0,
                       warmup_steps=min(20, max(1, d.steps // 10)), ema_decay=d.ema_decay,
                       forcing="teacher", text_dropout=0.0, seed=d.seed,
                       checkpoint_every=max(1, min(50, d.steps)), keep_checkpoints=2)


def _student(teacher, init) -> WorldModel:
    if init is None:
        student = copy.deepcopy(teacher)
    else:
        init = Path(init)  # a student is its teacher's architecture
        check_config(read_model_config(init), teacher, f"{init} (a student of this teacher)",
                     ignore=ARCHITECTURE_IGNORED)
        student = load_module(WorldModel, init).float()
    return student.train().requires_grad_(True)


def student_config(teacher_cfg: WorldConfig, d: DistillConfig) -> WorldConfig:
    """The student world's config: the teacher's, sampled with the student's steps."""
    cfg = WorldConfig.from_dict(teacher_cfg.to_dict())
    cfg.distill = dataclasses.replace(d)
    cfg.sample.steps = d.student_steps
    return validate_config(cfg)


def distill(teacher, store, d: DistillConfig, out=None, *, latents=None,
            student_init=None, minutes: float | None = None, device: str = "auto",
            resume: bool = False, callbacks: Iterable[Callable] = (),
            on_start: Callable | None = None) -> DistillRun:
    """Distil the world directory `teacher` into a `d.student_steps`-step student on the
    clips of an episode store (latents of the teacher's autoencoder in `latents`, default
    `<store>/latents`, encoded where missing). `student_init` starts the student from other
    weights of the same architecture (e.g. an ODE student before DMD). `minutes` replaces
    d.steps by the count that fits. With `out`: resumable checkpoints, `model/`, `ema/`,
    `world_config.json`, `distill_run.json`."""
    _check(d)
    world = load_world(resolve_checkpoint(teacher), device="cpu")
    if world.config.distill.recipe != "none":
        raise ValueError(f"teacher {world.path} is itself a {world.config.distill.recipe} "
                         f"student; distil from a flow-matching world")
    store = EpisodeStore.open(store)
    acc = make_accelerator(_train_config(d), device, out)
    dev = acc.device
    tmodel = world.model.to(dev).eval().requires_grad_(False)
    cache = latents if isinstance(latents, LatentCache) else \
        LatentCache(latents if latents is not None else store.root / "latents")
    ids = sorted(store.index)
    encoded = fill_latents(store, cache, world.ae.to(dev), dev)  # those still missing
    f = tmodel.config.chunk_frames
    clips = ClipTensors(store, cache, clip_frames=f * world.config.data.clip_chunks,
                        chunk_frames=f, stride=f, ids=ids, device="cpu")  # batches move to dev
    text = _Text(world.captions, clips.captions, dev)
    student = _student(tmodel, student_init)
    data, make_loss, critic, seconds = _recipe(d, tmodel, clips, text, dev)
    tcfg = _train_config(d)
    if minutes:
        probe = {"probe": True} if critic is not None else {}
        tcfg.steps = steps_for_budget(student, data, tcfg, make_loss(**probe), minutes, acc)
    cfg = student_config(trained_on(world.config, store, ids),
                         dataclasses.replace(d, steps=tcfg.steps))
    hooks = list(callbacks)
    if out is not None:
        out = Path(out)
        _start_run_dir(out, cfg, world.path)
        if critic is not None:
            hooks.insert(0, _critic_saver(critic, out / "critic", tcfg))
            if resume:
                _restore_critic(critic, out / "critic")
    if on_start is not None:
        on_start({"encoded": encoded, "latents": str(cache.root), "clips": len(clips),
                  "pairs": len(data) if d.recipe == "ode" else 0, "steps": tcfg.steps})
    t0 = time.perf_counter()
    state = fit(student, data, tcfg, make_loss(), callbacks=hooks, out_dir=out,
                resume=resume, accelerator=acc)
    seconds["train"] = time.perf_counter() - t0
    if out is not None:
        atomic_write_json(out / "distill_run.json", {
            "recipe": d.recipe, "teacher": str(world.path), "steps": tcfg.steps,
            "student_init": None if student_init is None else str(student_init),
            "seconds": seconds, "device": str(dev), "threads": torch.get_num_threads()})
    return DistillRun(state["model"], state["ema"], cfg, state, seconds)


def _recipe(d: DistillConfig, teacher, clips: ClipTensors, text: _Text, dev):
    """(training data, make_loss(probe=False), the DMD critic or None, seconds spent)."""
    if d.recipe == "ode":
        t0 = time.perf_counter()
        pairs = teacher_pairs(teacher, clips, text, d, dev)
        seconds = {"pairs": time.perf_counter() - t0}
        return pairs, lambda: _ode_loss(d, text, teacher.config.chunk_frames), None, seconds
    f, seconds = teacher.config.chunk_frames, {"pairs": 0.0}
    if d.recipe == "consistency":
        return clips, lambda: _consistency_loss(d, teacher, text, f), None, seconds
    critic = Critic(teacher, d)
    # a budget is timed on a throwaway critic, so the real one starts untouched
    return clips, lambda probe=False: _dmd_loss(
        d, teacher, Critic(teacher, d) if probe else critic, text, f), critic, seconds


def _start_run_dir(out: Path, cfg: WorldConfig, teacher: Path) -> None:
    """The student's config, and the teacher's captions and autoencoder, so the run
    directory is a world (`load_world(out, subfolder="ema")`)."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "world_config.json", cfg.to_json())
    if (teacher / CAPTIONS_FILE).exists():
        shutil.copy(teacher / CAPTIONS_FILE, out / CAPTIONS_FILE)
    if not (out / "autoencoder").exists():
        atomic_dir(out / "autoencoder", lambda tmp: shutil.copytree(
            teacher / "autoencoder", tmp, dirs_exist_ok=True))


def _critic_saver(critic: Critic, where: Path, tcfg: TrainConfig) -> Callable:
    def save(state: dict) -> None:
        step = state["step"]
        if step % tcfg.checkpoint_every == 0 or step == tcfg.steps:
            save_checkpoint(where, step, critic.model, critic.opt, keep=tcfg.keep_checkpoints)
    return save


def _restore_critic(critic: Critic, where: Path) -> None:
    ckpt = latest_checkpoint(where)
    if ckpt is not None:
        load_checkpoint(ckpt, critic.model, critic.opt)

