"""Loading is all-or-nothing and every error names the file: training checkpoints, packaged
worlds, world configs, caption tables and action scripts, against a hostile user (corrupt,
truncated, missing and random-bytes files, bad config values, kill -9 mid-save)."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import multiprocessing
import random
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

import worldlab.config as config
from worldlab.config import PRESETS, RULES, WorldConfig, make_config
from worldlab.model.autoencoder import VideoAutoencoder
from worldlab.model.dit import CONTROLS, WorldModel
from worldlab.model.sampler import SOLVERS
from worldlab.model.textenc import CaptionTable, TextEncoder, check_prompt
from worldlab.paths import ROOT
from worldlab.play.script import load_script
from worldlab.pretrained import DEFAULT_WORLD, load_world, package_world
from worldlab.train import checkpoints as C
from worldlab.train.losses import FORCINGS, TIME_SCHEDULES

CFG = make_config("tiny")
WEIGHTS = "diffusion_pytorch_model.safetensors"
# derandomize: hypothesis draws the same examples on every run, like a fixed seed
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def trained(seed: int):
    """A tiny world model, its AdamW after one step (so it has state) and an EMA copy."""
    torch.manual_seed(seed)
    model = WorldModel.from_config_dataclass(CFG.model, 4, 4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sum(p.square().sum() for p in model.parameters()).backward()
    opt.step()
    ema = copy.deepcopy(model).requires_grad_(False)
    with torch.no_grad():
        for p in ema.parameters():
            p.mul_(0.5)
    return model, opt, ema


def snapshot(model, opt, ema) -> list[torch.Tensor]:
    """Every tensor a load could change: weights, EMA, optimizer state, the torch RNG."""
    state = opt.state_dict()["state"]
    return ([p.detach().clone() for p in [*model.parameters(), *ema.parameters()]]
            + [v.clone() for i in sorted(state) for _, v in sorted(state[i].items())]
            + [torch.get_rng_state()])


def assert_unchanged(before: list[torch.Tensor], after: list[torch.Tensor]) -> None:
    assert len(before) == len(after)
    assert all(torch.equal(a, b) for a, b in zip(before, after))


def hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def rewrite(path: Path, change) -> None:
    """Load a safetensors file, change(tensors) in place, save it back."""
    tensors = load_file(str(path))
    change(tensors)
    save_file(tensors, str(path))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A checkpoint of trained(0), and a caption table next to it (read-only: copy it)."""
    out = tmp_path_factory.mktemp("ckpt")
    model, opt, ema = trained(0)
    path = C.save_checkpoint(out, 1, model, opt, ema)
    CaptionTable(table={("a hall", "", ""): torch.ones(3, 384)}).save(out / "captions.st")
    return path


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory) -> Path:
    """A tiny untrained world directory (read-only: copy it)."""
    path = tmp_path_factory.mktemp("world")
    torch.manual_seed(0)
    ae = VideoAutoencoder.from_config_dataclass(CFG.autoencoder)
    model = WorldModel.from_config_dataclass(CFG.model, 4, CFG.data.size // ae.downsample)
    ae.save_pretrained(path / "autoencoder")
    model.save_pretrained(path / "world")
    (path / "world_config.json").write_text(CFG.to_json())
    return path


def copy_of(src: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(src, tmp_path / src.name))


# ----------------------------------------------------------------------------------------
# 1. load_weights into a model that load_world made
# ----------------------------------------------------------------------------------------


def test_load_weights_into_a_model_from_load_world(world_dir, tmp_path):
    """load_world's model carries diffusers' `_name_or_path` (a Path) in its config, which
    JSON cannot hold: comparing configs must skip it. A packaged world (float16, sharded)
    loads into the float32 model too."""
    world = load_world(world_dir, device="cpu")
    saved = [p.detach().clone() for p in world.model.parameters()]
    with torch.no_grad():
        for p in world.model.parameters():
            p.add_(1.0)
    C.load_weights(world.model, world_dir / "world")
    assert all(torch.equal(a, b) for a, b in zip(saved, world.model.parameters()))
    packed = package_world(world_dir / "autoencoder", world_dir / "world",
                           world_dir / "world_config.json", tmp_path / "packed",
                           max_shard_size="20KB")
    assert (packed / "world" / f"{WEIGHTS}.index.json").is_file()  # sharded
    C.load_weights(world.model, packed / "world")
    half = [p.half().float() for p in saved]
    assert all(torch.equal(a, b) for a, b in zip(half, world.model.parameters()))


# ----------------------------------------------------------------------------------------
# 2. load_checkpoint is all-or-nothing
# ----------------------------------------------------------------------------------------


def _first_key(path: Path) -> str:
    return sorted(load_file(str(path)))[0]


CORRUPTIONS = {  # name -> (change the checkpoint at c, the error names this file, message)
    "model tensor of another shape": (
        lambda c: rewrite(c / "model" / WEIGHTS, lambda t: t.update(
            {_first_key(c / "model" / WEIGHTS): torch.zeros(3)})),
        f"model/{WEIGHTS}", r"has shape \(3,\); the model expects"),
    "model tensor missing": (
        lambda c: rewrite(c / "model" / WEIGHTS, lambda t: t.pop(sorted(t)[-1])),
        f"model/{WEIGHTS}", "lacks 1 tensor"),
    "model tensor of another kind": (
        lambda c: rewrite(c / "model" / WEIGHTS, lambda t: t.update(
            {k: v.to(torch.int32) for k, v in list(t.items())[:1]})),
        f"model/{WEIGHTS}", "is torch.int32; the model expects torch.float32"),
    "EMA tensor missing": (
        lambda c: rewrite(c / "ema" / WEIGHTS, lambda t: t.pop(sorted(t)[0])),
        f"ema/{WEIGHTS}", "lacks 1 tensor"),
    "EMA weights truncated": (
        lambda c: (c / "ema" / WEIGHTS).write_bytes((c / "ema" / WEIGHTS).read_bytes()[:999]),
        f"ema/{WEIGHTS}", "not a readable safetensors file"),
    "EMA directory missing": (lambda c: shutil.rmtree(c / "ema"), "", "no EMA weights"),
    "optimizer file missing": (
        lambda c: (c / "optimizer.safetensors").unlink(), "optimizer.safetensors",
        "cannot read"),
    "optimizer file truncated": (
        lambda c: (c / "optimizer.safetensors").write_bytes(
            (c / "optimizer.safetensors").read_bytes()[:-10]),
        "optimizer.safetensors", "not a readable safetensors file"),
    "optimizer state of another shape": (
        lambda c: rewrite(c / "optimizer.safetensors",
                          lambda t: t.update({"state.0.exp_avg": torch.zeros(2)})),
        "optimizer.safetensors", "'state.0.exp_avg' is torch.float32 \\(2,\\)"),
    "optimizer state tensor missing": (
        lambda c: rewrite(c / "optimizer.safetensors", lambda t: t.pop("state.3.exp_avg_sq")),
        "optimizer.safetensors", "different optimizer state"),
    "optimizer state for no parameter": (
        lambda c: rewrite(c / "optimizer.safetensors",
                          lambda t: t.update({"state.999.exp_avg": torch.zeros(2)})),
        "optimizer.safetensors", "unexpected tensor 'state.999.exp_avg'"),
    "RNG state missing": (
        lambda c: rewrite(c / "optimizer.safetensors", lambda t: t.pop("rng.torch")),
        "optimizer.safetensors", "rng.torch"),
    "param group of another size": (
        lambda c: (c / "trainer_state.json").write_text(json.dumps(
            {**json.loads((c / "trainer_state.json").read_text()),
             "param_groups": [{"params": [0, 1]}]})),
        "trainer_state.json", "param group 0 has 2 parameters"),
    "garbage trainer state": (
        lambda c: (c / "trainer_state.json").write_bytes(b'{"step": 1,'),
        "trainer_state.json", "not valid JSON"),
    "model config not UTF-8": (
        lambda c: (c / "model" / "config.json").write_bytes(b"\xff\xfe{}"),
        "model/config.json", "not UTF-8"),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_failed_load_checkpoint_changes_nothing(checkpoint, tmp_path, name):
    corrupt, file, message = CORRUPTIONS[name]
    ckpt = copy_of(checkpoint, tmp_path)
    corrupt(ckpt)
    on_disk = hashes(ckpt)
    model, opt, ema = trained(1)
    before = snapshot(model, opt, ema)
    with pytest.raises(ValueError, match=message) as err:
        C.load_checkpoint(ckpt, model, opt, ema)
    assert str(ckpt / file).rstrip("/") in str(err.value)
    assert_unchanged(before, snapshot(model, opt, ema))
    assert hashes(ckpt) == on_disk


def test_load_checkpoint_restores_everything(checkpoint):
    """The control for the test above: an intact checkpoint does change the tensors."""
    model, opt, ema = trained(1)
    before = snapshot(model, opt, ema)
    torch.manual_seed(123)  # the RNG state differs from the saved one
    C.load_checkpoint(checkpoint, model, opt, ema)
    after, reference = snapshot(model, opt, ema), snapshot(*trained(0))
    assert all(torch.equal(a, b) for a, b in zip(after[:-1], reference[:-1]))
    assert not all(torch.equal(a, b) for a, b in zip(after[:-1], before[:-1]))
    assert torch.equal(after[-1], load_file(str(checkpoint / "optimizer.safetensors"))
                       ["rng.torch"])


def test_failed_load_weights_changes_nothing(checkpoint, tmp_path):
    ckpt = copy_of(checkpoint, tmp_path)
    rewrite(ckpt / "model" / WEIGHTS, lambda t: t.update(
        {name: torch.zeros(1) for name in sorted(t)[-2:]}))  # the last tensors are bad
    model = trained(1)[0]
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(ValueError, match=re.escape(str(ckpt / "model" / WEIGHTS))):
        C.load_weights(model, ckpt / "model")
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


# ----------------------------------------------------------------------------------------
# 3. world_config.json is validated at load
# ----------------------------------------------------------------------------------------

BAD_VALUES = [  # section, field, value, what the error says is expected
    ("sample", "solver", "rk4", r"one of \('euler', 'heun'\)"),
    ("sample", "guidance", float("nan"), "a finite number"),
    ("sample", "guidance", "2", "a finite number"),
    ("sample", "steps", 0, ">= 1"),
    ("sample", "steps", 2.5, "an int"),
    ("sample", "steps", True, "an int"),
    ("model", "width", 33, "heads=2 times an even head dim >= 6"),
    ("model", "width", 34, "heads=2 times an even head dim >= 6"),
    ("model", "heads", 0, ">= 1"),
    ("model", "control", "keys", "one of"),
    ("train", "forcing", "bogus", r"one of \('teacher', 'diffusion'\)"),
    ("train", "time_schedule", "cosine", "one of"),
    ("train", "ema_decay", 1.0, ">= 0 and < 1"),
    ("train", "mixed_precision", "fp8", "one of"),
    ("autoencoder", "block_out_channels", [8, -16, 16, 16], "a list of ints >= 1"),
    ("autoencoder", "block_out_channels", "8,16", "a non-empty list of ints"),
    ("autoencoder", "norm_num_groups", 3, "multiples of autoencoder.norm_num_groups=3"),
    ("data", "engine", " ", "non-blank"),
]


@pytest.mark.parametrize("section,name,value,expected", BAD_VALUES)
def test_load_world_rejects_a_bad_config_value(world_dir, tmp_path, section, name, value,
                                               expected):
    world = copy_of(world_dir, tmp_path)
    data = json.loads((world / "world_config.json").read_text())
    data[section][name] = value
    (world / "world_config.json").write_text(json.dumps(data))
    on_disk = hashes(world)
    with pytest.raises(ValueError, match=expected) as err:
        load_world(world, device="cpu")
    assert str(world / "world_config.json") in str(err.value)
    assert f"{section}.{name}" in str(err.value)
    assert hashes(world) == on_disk
    with pytest.raises(ValueError, match=expected):
        make_config("tiny", **{f"{section}__{name}": value})


def test_shipped_presets_and_retired_fields_validate():
    for preset in PRESETS:
        make_config(preset)  # validated as it is built
    shipped = json.loads((ROOT / DEFAULT_WORLD / "world_config.json").read_text())
    assert WorldConfig.from_dict(shipped).sample.solver == "euler"
    for section, name in config.RETIRED:  # older files carry them: dropped, not an error
        shipped[section][name] = 1
    WorldConfig.from_dict(shipped)
    with pytest.raises(ValueError, match="must be an object with the sections"):
        WorldConfig.from_dict([1, 2])


def test_rules_cover_every_field_and_agree_with_their_readers():
    sections = {f.name: f.default_factory for f in dataclasses.fields(WorldConfig)
                if f.name != "preset"}
    assert {s: set(RULES[s]) for s in RULES} == \
        {s: {f.name for f in dataclasses.fields(cls())} for s, cls in sections.items()}
    ours = (config.SOLVERS, config.FORCINGS, config.TIME_SCHEDULES, config.CONTROLS)
    spelled_once = zip(ours, (SOLVERS, FORCINGS, TIME_SCHEDULES, CONTROLS))
    assert all(a is b for a, b in spelled_once)  # the readers import the config's tuples


# ----------------------------------------------------------------------------------------
# 4. every error about a file names the file
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("blob", [b"", b"{oops", b"\xff\xfe\x00\x01", b"[" * 100_000, b"[]"])
@pytest.mark.parametrize("target", ["world_config.json", "world/config.json",
                                    "autoencoder/config.json"])
def test_garbage_json_in_a_world_names_the_file(world_dir, tmp_path, target, blob):
    world = copy_of(world_dir, tmp_path)
    (world / target).write_bytes(blob)
    on_disk = hashes(world)
    with pytest.raises(ValueError) as err:
        load_world(world, device="cpu")
    assert str(world / target) in str(err.value)
    assert hashes(world) == on_disk


def test_bad_world_files_name_the_file(world_dir, tmp_path):
    world = copy_of(world_dir, tmp_path)
    rewrite(world / "world" / WEIGHTS, lambda t: t.pop(sorted(t)[0]))  # was a meta tensor
    with pytest.raises(ValueError, match=f"{re.escape(str(world / 'world' / WEIGHTS))} "
                                         f"lacks 1 tensor"):
        load_world(world, device="cpu")
    shutil.copy(world_dir / "world" / WEIGHTS, world / "world" / WEIGHTS)
    (world / "captions.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{")
    with pytest.raises(ValueError, match=re.escape(str(world / "captions.safetensors"))):
        load_world(world, device="cpu")


@SETTINGS
@given(target=st.sampled_from(["weights", "optimizer", "captions"]), data=st.data())
def test_random_or_truncated_safetensors_name_the_file(checkpoint, target, data):
    file = {"weights": Path("model") / WEIGHTS, "optimizer": Path("optimizer.safetensors"),
            "captions": Path("captions.st")}[target]
    src = checkpoint / file if target != "captions" else checkpoint.parents[1] / file
    good = src.read_bytes()
    blob = data.draw(st.one_of(st.binary(max_size=300),
                               st.integers(0, len(good) - 1).map(lambda n: good[:n])))
    model, opt, ema = trained(1)
    before = snapshot(model, opt, ema)
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(shutil.copytree(checkpoint, Path(tmp) / "c"))
        (ckpt / file).write_bytes(blob)
        with pytest.raises(ValueError) as err:
            if target == "captions":
                CaptionTable.load(ckpt / file)
            else:
                C.load_checkpoint(ckpt, model, opt, ema)
        assert str(ckpt / file) in str(err.value)
    assert_unchanged(before, snapshot(model, opt, ema))


@pytest.mark.parametrize("blob,message", [
    (b"\xff[{}]", "not UTF-8"), (b"[{", "not valid JSON"), (b"[" * 100_000, "nests too deeply"),
    (b"{}", "non-empty JSON list"), (b'[{"prompt": "\\udfff"}]', r"\[0\]: prompt has"),
])
def test_bad_action_script_names_the_file(tmp_path, blob, message):
    path = tmp_path / "actions.json"
    path.write_bytes(blob)
    with pytest.raises(ValueError, match=message) as err:
        load_script(path)
    assert str(path) in str(err.value)
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / "none.json"))):
        load_script(tmp_path / "none.json")


# ----------------------------------------------------------------------------------------
# 5. prompts the tokenizer cannot take are rejected up front
# ----------------------------------------------------------------------------------------


def test_surrogates_are_rejected_by_check_prompt():
    for bad in ("\udfff", "a \ud83d\ude00 split pair"):
        with pytest.raises(ValueError, match="prompt has .* surrogate code point"):
            check_prompt(bad)
    assert check_prompt("a smiling imp \U0001F600") == "a smiling imp \U0001F600"
    table = CaptionTable()
    with pytest.raises(ValueError, match=r"captions\[1\]\[0\].scene has '\\udfff'"):
        table.embed([[("a hall", "", "")], [("\udfff", "", "")]])
    assert table.encoder is None and table.table == {}  # checked before anything loads


def test_text_encoder_rejects_a_surrogate_its_tokenizer_cannot_take():
    encoder = TextEncoder()
    with pytest.raises(TypeError):  # why: the tokenizer itself fails on it
        encoder.model.tokenizer("\udfff")
    with pytest.raises(ValueError, match=r"texts\[0\] has '\\udfff' at position 0"):
        encoder.encode(["\udfff"])
    assert encoder.cache == {}


# ----------------------------------------------------------------------------------------
# 6. kill -9 during a checkpoint write
# ----------------------------------------------------------------------------------------


def _save_forever(out: Path, start: int, objects, saved) -> None:
    """Child process: save checkpoints start, start + 1, ... (keeping 2) until killed."""
    for step in range(start, start + 10_000):
        C.save_checkpoint(out, step, *objects, keep=2)
        saved.set()


def check_checkpoints(out: Path, reference) -> None:
    """Every visible entry is a complete checkpoint that loads, the latest among them."""
    visible = [p.name for p in (out / "checkpoints").iterdir() if not p.name.startswith(".")]
    assert visible and all(C.CHECKPOINT_RE.match(n) for n in visible)
    assert C.latest_checkpoint(out) == C.list_checkpoints(out)[-1]
    for path in C.list_checkpoints(out):
        model, opt, ema = trained(1)
        C.load_checkpoint(path, model, opt, ema)
        assert all(torch.equal(a, b) for a, b in zip(model.parameters(), reference))


def test_kill_9_mid_save_leaves_loadable_checkpoints(tmp_path):
    """A forked child (a fresh interpreter takes ~20 s to import torch here) saves in a
    loop and is SIGKILLed at random moments: mid-write, mid-rename or mid-prune."""
    objects = trained(0)
    reference = [p.detach().clone() for p in objects[0].parameters()]
    ctx, rng = multiprocessing.get_context("fork"), random.Random(0)
    for _ in range(6):
        latest = C.latest_checkpoint(tmp_path)
        start = 1 if latest is None else int(latest.name.removeprefix("step_")) + 1
        saved = ctx.Event()
        child = ctx.Process(target=_save_forever, args=(tmp_path, start, objects, saved))
        child.start()
        assert saved.wait(60)
        time.sleep(rng.uniform(0.0, 0.3))
        child.kill()
        child.join()
        check_checkpoints(tmp_path, reference)
    C.save_checkpoint(tmp_path, 99_999, *objects, keep=2)  # sweeps what the kills left
    assert all(p.name.startswith("step_") for p in (tmp_path / "checkpoints").iterdir())


def test_crash_mid_prune_leaves_no_half_checkpoint(tmp_path, monkeypatch):
    """Deleting an old checkpoint dies after its first file: it must not stay visible."""
    objects = trained(0)
    reference = [p.detach().clone() for p in objects[0].parameters()]
    C.save_checkpoint(tmp_path, 1, *objects, keep=1)
    real_rmtree = shutil.rmtree

    def dies_midway(path, *args, **kwargs):
        next(p for p in Path(path).rglob("*") if p.is_file()).unlink()
        raise KeyboardInterrupt  # stands in for kill -9: nothing after this runs

    monkeypatch.setattr(shutil, "rmtree", dies_midway)
    with pytest.raises(KeyboardInterrupt):
        C.save_checkpoint(tmp_path, 2, *objects, keep=1)
    monkeypatch.setattr(shutil, "rmtree", real_rmtree)
    check_checkpoints(tmp_path, reference)
    C.save_checkpoint(tmp_path, 3, *objects, keep=1)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_00000003"]
