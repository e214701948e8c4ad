"""The GPU path, checked on the CPU: clips as tensors, the data wait, bf16 autocast,
gradient checkpointing, torch.compile, the memory estimate and its checks, FSDP over two
gloo ranks, and the training benchmark. Tiny and seeded."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from worldlab import train as T
from worldlab.cli import main
from worldlab.config import make_config
from worldlab.episodes import (ClipTensors, EpisodeClips, EpisodeError, LatentCache,
                               collate_clips, load_episode, load_track)
from worldlab.model.autoencoder import VideoAutoencoder, encode_store
from worldlab.model.dit import WorldModel
from worldlab.model.textenc import TEXT_DIM, CaptionTable
from worldlab.train import hardware as H

from fit_accelerate_script import RandomClips, start_model
from synthetic_episodes import synthetic_store
from test_training import CF, tiny_world

HERE = Path(__file__).resolve().parent
CONFIGS = HERE.parent / "configs" / "accelerate"


@pytest.fixture
def encoded(tmp_path):
    """A synthetic store of 3 episodes of 12 frames with its latents."""
    store = synthetic_store(tmp_path / "store", episodes=3, t=3 * CF, size=32)
    cache = LatentCache(tmp_path / "latents")
    torch.manual_seed(0)
    ae = VideoAutoencoder.from_config_dataclass(make_config("tiny").autoencoder).eval()
    encode_store(ae, store, cache)
    return store, cache


def fake_table(captions) -> CaptionTable:
    """A caption table with seeded embeddings: no text model needed."""
    g = torch.Generator().manual_seed(0)
    return CaptionTable(table={c: torch.randn(3, TEXT_DIM, generator=g) for c in captions})


# ----------------------------------------------------------------------------------------
# Clips as tensors
# ----------------------------------------------------------------------------------------


def test_clip_tensors_gather_the_batches_of_episode_clips(encoded):
    store, cache = encoded
    clips = dict(clip_frames=2 * CF, chunk_frames=CF, stride=CF)
    tensors = ClipTensors(store, cache, **clips)
    per_item = EpisodeClips(store, latents=cache, **clips)
    assert len(tensors) == len(per_item) == 6 and tensors.windows == per_item.windows
    indices = [5, 0, 3, 3]
    got = tensors.gather(indices)
    want = collate_clips([per_item[i] for i in indices])
    for key in ("latents", "c2w", "actions"):
        assert got[key].dtype == want[key].dtype and torch.equal(got[key], want[key]), key
    words = [[tensors.captions[i] for i in row] for row in got["caption_ids"].tolist()]
    assert words == want["captions"]
    # the loss sees the same text either way: looked up by id, or embedded from strings
    table, tc, model = fake_table(tensors.captions), make_config("tiny").train, tiny_world()
    by_id = T.world_model_loss(tc, CF, table, tensors.captions)
    by_text = T.world_model_loss(tc, CF, table)
    a = by_id(model, got, torch.Generator().manual_seed(1))[0]
    b = by_text(model, want, torch.Generator().manual_seed(1))[0]
    assert torch.equal(a, b)


def test_clip_tensors_never_read_pixels(encoded, tmp_path):
    store, cache = encoded
    episode_id = store.ids()[0]
    path = store.path(episode_id)
    with zipfile.ZipFile(path) as z:  # the same file with its rgb member destroyed
        members = {n: z.read(n) for n in z.namelist()}
    members["rgb.npy"] = b"not an array"
    with zipfile.ZipFile(path, "w") as z:
        for name, blob in members.items():
            z.writestr(name, blob)
    with pytest.raises(EpisodeError, match="cannot read episode file"):
        load_episode(path)
    track = load_track(path)
    assert len(track) == 3 * CF and track.caption_at(2 * CF).event == "an imp appears"
    assert len(ClipTensors(store, cache, 2 * CF, CF, stride=CF)) == 6


def test_clip_tensors_bad_input(encoded):
    store, cache = encoded
    with pytest.raises(ValueError, match="no clip of 64 frames"):
        ClipTensors(store, cache, clip_frames=64, chunk_frames=CF)
    with pytest.raises(ValueError, match="multiples of chunk_frames"):
        ClipTensors(store, cache, clip_frames=6, chunk_frames=CF)
    short = LatentCache(cache.root.parent / "short")
    for i in store.ids():
        short.put(i, cache.get(i)[:-1])
    with pytest.raises(ValueError, match="have 11 frames, the episode has 12"):
        ClipTensors(store, short, clip_frames=2 * CF, chunk_frames=CF)
    loss = T.world_model_loss(make_config("tiny").train, CF, CaptionTable())
    batch = ClipTensors(store, cache, 2 * CF, CF).gather([0])
    with pytest.raises(ValueError, match="pass the vocabulary"):
        loss(tiny_world(), batch, torch.Generator())


def test_world_recipe_trains_on_tensors_and_reports_the_wait(encoded, tmp_path):
    store, cache = encoded
    cfg = make_config("tiny", train__steps=3)
    states = []
    table = fake_table(ClipTensors(store, cache, 2 * CF, CF).captions)
    run = T.world(store, cfg, latents=cache, captions=table, device="cpu",
                  callbacks=[states.append])
    assert isinstance(run.clips, ClipTensors) and run.clips.latents.device.type == "cpu"
    assert set(run.captions.table) == set(run.clips.captions)  # embedded once, up front
    assert len(states) == 3 and all(s["data_s"] >= 0 for s in states)


# ----------------------------------------------------------------------------------------
# On-GPU switches, run on the CPU: bf16 autocast, gradient checkpointing, torch.compile
# ----------------------------------------------------------------------------------------


def loss_and_grads(model, autocast: bool = False):
    data = RandomClips(2, 2 * CF, 4, 4)
    batch = {k: getattr(data, k) for k in ("latents", "actions", "c2w")}
    loss_fn = T.world_model_loss(make_config("tiny").train, CF, captions=None)
    model.zero_grad()
    with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
        loss, _ = loss_fn(model, batch, torch.Generator().manual_seed(0))
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


def test_gradient_checkpointing_gives_the_same_gradients():
    model = tiny_world(depth=3)
    for p in model.parameters():  # move off the zero init, so every gradient is non-zero
        p.data.add_(0.02 * torch.randn_like(p))
    loss, grads = loss_and_grads(model)
    model.enable_gradient_checkpointing()
    loss_ckpt, grads_ckpt = loss_and_grads(model)
    assert torch.equal(loss, loss_ckpt)
    for g, h in zip(grads, grads_ckpt):
        torch.testing.assert_close(g, h, rtol=1e-5, atol=1e-7)
    full = saved_bytes(tiny_world(depth=3), 2)
    assert saved_bytes(model, 2) < 0.5 * full


def test_bf16_autocast_trains_within_bf16_precision():
    model = tiny_world()
    for p in model.parameters():
        p.data.add_(0.02 * torch.randn_like(p))
    loss, grads = loss_and_grads(model)
    loss16, grads16 = loss_and_grads(model, autocast=True)
    assert loss16.dtype == torch.float32  # the loss itself is taken in float32
    assert loss16.item() == pytest.approx(loss.item(), rel=2e-2)
    cos = torch.nn.functional.cosine_similarity(torch.cat([g.flatten() for g in grads]),
                                                torch.cat([g.flatten() for g in grads16]), 0)
    assert cos > 0.99


def test_compile_switch_trains_the_same_model():
    cfg = make_config("tiny", train={"steps": 2, "ema_decay": 0.0}).train
    loss_fn = T.world_model_loss(cfg, CF, captions=None)
    data = RandomClips(4, 2 * CF, 4, 4)
    runs = [T.fit(tiny_world(), data, dataclasses.replace(cfg, compile=c), loss_fn,
                  accelerator=T.make_accelerator(cfg, "cpu")) for c in (False, True)]
    assert runs[1]["loss"] == pytest.approx(runs[0]["loss"], rel=1e-4)
    for a, b in zip(runs[0]["model"].parameters(), runs[1]["model"].parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------------------
# Memory: the estimate against a measurement, and the checks that fail fast
# ----------------------------------------------------------------------------------------


def saved_bytes(model, b: int) -> int:
    """Bytes of the tensors autograd saves for the backward pass of one forward."""
    storages: dict[int, int] = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    data = RandomClips(b, 4 * CF, 4, model.config.latent_size)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(data.latents, torch.rand(b, 4), actions=data.actions, c2w=data.c2w)
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(n for ptr, n in storages.items() if ptr not in weights)


@pytest.mark.parametrize("width, depth", [(64, 2), (96, 3)])
def test_activation_estimate_matches_what_autograd_saves(width, depth):
    cfg = make_config("tiny", model={"width": width, "depth": depth, "heads": 2},
                      data={"clip_chunks": 4}, train={"batch_size": 2})
    torch.manual_seed(0)
    model = WorldModel.from_config_dataclass(cfg.model, 4, 8)
    estimate = H.train_memory(cfg, 4, 8, cuda=False)
    measured = saved_bytes(model, 2)
    assert 0.8 * measured < estimate["activations"] < 1.3 * measured
    assert estimate["parameters"] == sum(p.numel() for p in model.parameters())


def test_a_preset_too_big_fails_fast_naming_estimate_and_memory(capsys):
    assert main(["train", "check", "--preset", "tiny", "--memory-gb", "1"]) == 0
    assert "fits" in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"the base preset needs about [\d.]+ GiB .* but the "
                                         r"\w+ device \(.*\) has 1\.00 GiB"):
        main(["train", "check", "--preset", "base", "--memory-gb", "1"])
    small = H.this_machine("cpu", memory_gb=0.001)
    with pytest.raises(ValueError, match="has 0.00 GiB"):
        H.check_memory(H.train_memory(make_config("tiny"), 4, 4), small)
    cfg = make_config("base")  # checkpointing and FSDP are what make a big preset fit
    full = H.train_memory(cfg, 16, 16, cuda=True)
    assert H.train_memory(cfg, 16, 16, processes=8, sharded=True)["state"] * 8 == \
        pytest.approx(full["state"], abs=8)
    plain = make_config("base", train__grad_checkpointing=False)
    assert H.train_memory(plain, 16, 16)["activations"] > 3 * full["activations"]


def write_config(path: Path, **fields) -> Path:
    import yaml

    path.write_text(yaml.safe_dump(fields))
    return path


def test_accelerate_config_that_does_not_fit_the_machine_names_the_mismatch(tmp_path):
    cpu = H.this_machine("cpu")
    gpu_node = H.Machine("cuda", 8, 80 * H.GIB, "a GPU", True)  # the machine they are for
    for name in ("one_gpu", "ddp", "fsdp", "fsdp_2nodes"):
        H.check_accelerate_config(CONFIGS / f"{name}.yaml", gpu_node)
    with pytest.raises(ValueError, match=rf"ddp.yaml: distributed_type MULTI_GPU with "
                                         rf"num_processes=8 .* needs 8 GPU\(s\) per machine; "
                                         rf"this machine has {cpu.devices}"):
        H.check_accelerate_config(CONFIGS / "ddp.yaml", cpu)
    cases = [(dict(distributed_type="FSDP", num_processes=2, fsdp_config={"fsdp_version": 1}),
              "fsdp_version must be 2"),
             (dict(distributed_type="MULTI_GPU", num_processes=16, num_machines=2),
              "needs main_process_ip"),
             (dict(distributed_type="MULTI_GPU", num_processes=2, gpu_ids="0,9"),
              r"gpu_ids \[0, 9\] must name 2 of this machine's GPUs 0..7"),
             (dict(distributed_type="DEEPSPEED"), "distributed_type 'DEEPSPEED'"),
             (dict(distributed_type="MULTI_GPU", num_processes=2, use_cpu=True),
              "use_cpu is true")]
    for fields, message in cases:
        with pytest.raises(ValueError, match=message):
            H.check_accelerate_config(write_config(tmp_path / "c.yaml", **fields), gpu_node)
    old = H.Machine("cuda", 1, 16 * H.GIB, "an old GPU", False)
    with pytest.raises(ValueError, match="an old GPU has no bf16"):
        H.check_accelerate_config(CONFIGS / "one_gpu.yaml", old)
    with pytest.raises(ValueError, match="needs 8 GPU"):  # through the CLI too
        main(["train", "check", "--preset", "tiny", "--device", "cpu",
              "--accelerate-config", str(CONFIGS / "fsdp.yaml")])


# ----------------------------------------------------------------------------------------
# FSDP: two gloo ranks against one process doing the same arithmetic
# ----------------------------------------------------------------------------------------


def reference_run(steps: int):
    """One process replays what 2 data-parallel ranks do: each rank's batch and noise,
    gradients averaged, clipped over the whole model, AdamW at the step's lr, the EMA."""
    cfg = make_config("tiny", train={"steps": steps})
    tc = cfg.train
    model = start_model(cfg, 0)  # rank 0's start: what every rank trains from
    ema = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=tc.lr, weight_decay=tc.weight_decay)
    data = RandomClips(8, 2 * CF, 4, 4)
    loss_fn = T.world_model_loss(tc, CF, captions=None)
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = T.lr_at(step, tc)
        for rank in (0, 1):
            (idx,) = T.StepBatchSampler(8, tc.batch_size, tc.seed, step, step + 1, rank)
            batch = collate_clips([data[i] for i in idx])
            loss, _ = loss_fn(model, batch, T.step_generator(tc.seed, step, rank))
            (loss / 2).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
        opt.step()
        opt.zero_grad()
        T.ema_update(ema, model, tc.ema_decay)
    flat = lambda m: torch.cat([p.detach().flatten() for p in m.parameters()])  # noqa: E731
    return flat(model), flat(ema)


def test_fsdp_two_ranks_match_one_process(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(HERE.parent)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
           "2", str(HERE / "fit_accelerate_script.py"), str(tmp_path), "fsdp"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    r0, r1 = (load_file(str(tmp_path / f"rank{i}.safetensors")) for i in (0, 1))
    assert torch.equal(r0["params"], r1["params"]) and torch.equal(r0["ema"], r1["ema"])
    params, ema = reference_run(steps=3)
    torch.testing.assert_close(r0["params"], params, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(r0["ema"], ema, rtol=1e-4, atol=1e-6)
    assert torch.equal(r0["resumed"], r0["params"])  # resumed from step 2 under FSDP
    # the checkpoint holds full tensors: one process reads it as it reads any other
    model = start_model(make_config("tiny"), 5)
    T.load_weights(model, tmp_path / "run" / "model")
    assert torch.equal(torch.cat([p.flatten() for p in model.parameters()]), r0["params"])


# ----------------------------------------------------------------------------------------
# The training benchmark
# ----------------------------------------------------------------------------------------


def test_bench_train_reports_both_loaders(encoded, tmp_path, capsys):
    store, cache = encoded
    args = ["bench", "train", "--preset", "tiny", "--steps", "2", "--device", "cpu",
            "--data", str(store.root), "--latents", str(cache.root), "--set",
            "train__batch_size=3", "--out", str(tmp_path / "bench")]
    assert main(args) == 0
    assert "training speed: tiny preset, batch 3" in capsys.readouterr().out
    data = json.loads((tmp_path / "bench" / "train.json").read_text())
    assert set(data["loaders"]) == {"tensors", "episodes"} and data["batch_size"] == 3
    assert data["sdpa_fused"] is True  # the CPU's flash kernel takes the block-causal mask
    for row in data["loaders"].values():
        assert row["steps_per_s"] > 0 and 0 <= row["data_wait_fraction"] < 1
        assert row["samples_per_s"] == pytest.approx(3 * row["steps_per_s"])
    with pytest.raises(ValueError, match="bench engines does not take --preset"):
        main(["bench", "engines", "--preset", "tiny"])
    assert np.isclose(data["steps_per_s"], data["loaders"]["tensors"]["steps_per_s"])
