"""The inference switches (`model.inference`), the per-chunk profile (`evaluate.profile`)
and the switch benchmark (`evaluate.switches`) on an untrained tiny world. Tiny and seeded:
what is checked is the mechanism (layers replaced, errors, sums), not the speed."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from worldlab.config import SampleConfig
from worldlab.evaluate import switches
from worldlab.evaluate.profile import COMPONENTS, profile_chunks, profile_world
from worldlab.evaluate.protocols import still_conditions
from worldlab.model.inference import autocast_trunk, check_switches
from worldlab.pretrained import load_world


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def velocity(world, seed: int = 0) -> torch.Tensor:
    """The velocity (1, f, c, h, w) of a seeded noisy chunk, against an empty cache."""
    m = world.model.config
    x = torch.randn(1, m.chunk_frames, m.latent_channels, m.latent_size, m.latent_size,
                    generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return world.model.forward_chunk(x, torch.full((1,), 0.5), world.model.new_cache(1),
                                         **still_conditions(world))


def linears(module: nn.Module) -> int:
    return sum(type(m) is nn.Linear for m in module.modules())


# ----------------------------------------------------------------------------------------
# The switches
# ----------------------------------------------------------------------------------------


def test_int8_replaces_the_blocks_linear_layers_and_stays_close(world_dir, world):
    q = load_world(world_dir, device="cpu", sample={"quantize": "int8"})
    per_block = 8  # qkv, out; q, kv, out; the MLP's two; ada
    n = per_block * world.model.config.depth
    assert linears(world.model.blocks) == n and linears(q.model.blocks) == 0
    assert sum(isinstance(m, torch.ao.nn.quantized.dynamic.Linear)
               for m in q.model.blocks.modules()) == n
    assert linears(q.model.time_embed) == linears(world.model.time_embed) > 0  # stay float
    v, vq = velocity(world), velocity(q)
    assert 0 < (v - vq).abs().max() < 0.02 * v.abs().max()


def test_switches_off_change_nothing_on_the_cpu(world_dir, world):
    assert "_trunk" not in vars(world.model)  # no switch on: the class's own trunk
    again = load_world(world_dir, device="cpu", sample={"autocast": "no", "quantize": "none"})
    assert torch.equal(velocity(world), velocity(again))


def test_bf16_autocast_runs_the_trunk_in_bf16_and_returns_float32(world):
    seen = []
    hook = world.model.blocks[0].mlp[0].register_forward_hook(
        lambda mod, args, out: seen.append(out.dtype))
    model, plain = world.model, world.model._trunk
    try:
        model._trunk = autocast_trunk(plain, "cpu")  # the GPU's wrapper, on the CPU's autocast
        v = velocity(world)
        cache = model.new_cache(1)
        with torch.no_grad():
            model.append_chunk(v, cache, **still_conditions(world))
    finally:
        del model._trunk
        hook.remove()
    assert seen == [torch.bfloat16, torch.bfloat16]
    assert v.dtype == torch.float32 and cache.keys[0].dtype == cache.values[0].dtype == \
        torch.float32  # what a session save expects
    assert (v - velocity(world)).abs().max() < 0.05 * v.abs().max()


@pytest.mark.parametrize("sample, device, names", [
    ({"quantize": "int8"}, "cuda", ("sample.quantize='int8'", "cuda")),
    ({"quantize": "int8"}, "cuda:1", ("sample.quantize='int8'", "cuda:1")),
    ({"autocast": "bf16"}, "cpu", ("sample.autocast='bf16'", "cpu")),
])
def test_a_switch_the_device_cannot_run_names_both(sample, device, names):
    with pytest.raises(ValueError) as err:
        check_switches(SampleConfig(**sample), torch.device(device))
    assert all(n in str(err.value) for n in names)


def test_load_world_refuses_bf16_on_the_cpu(world_dir):
    with pytest.raises(ValueError, match="sample.autocast='bf16' runs on a GPU only"):
        load_world(world_dir, device="cpu", sample={"autocast": "bf16"})


def test_load_world_applies_and_validates_sample_overrides(world_dir):
    w = load_world(world_dir, device="cpu", sample={"steps": 3, "compile": True})
    assert (w.config.sample.steps, w.config.sample.compile) == (3, True)
    assert "_trunk" in vars(w.model)  # compiled lazily: nothing ran yet
    for bad, names in (({"quantize": "int4"}, ("sample.quantize", "int4")),
                       ({"compile": "yes"}, ("sample.compile", "yes")),
                       ({"quantise": "int8"}, ("sample", "quantise"))):
        with pytest.raises(ValueError) as err:
            load_world(world_dir, device="cpu", sample=bad)
        assert all(n in str(err.value) for n in names), err.value
    with pytest.raises(ValueError, match="sample overrides must be a dict"):
        load_world(world_dir, device="cpu", sample=[("quantize", "int8")])


# ----------------------------------------------------------------------------------------
# The profile and the benchmark
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("twin", [False, True])
def test_profile_has_every_component_and_they_sum_to_the_wall_time(world, twin):
    """On every chunk the components sum to its wall time (by construction, whatever else
    runs on the machine); the profile is their medians, in milliseconds."""
    rows = profile_chunks(world, chunks=2, twin=twin)
    assert len(rows) == 2 and all(set(r) == {*COMPONENTS, "wall"} for r in rows)
    for r in rows:
        assert all(r[k] >= 0 for k in COMPONENTS)
        assert sum(r[k] for k in COMPONENTS) == pytest.approx(r["wall"], rel=1e-9)
        assert r["attention"] > 0 and r["mlp"] > 0 and r["decode"] > 0
        assert r["engine"] > 0 if twin else r["engine"] < 1e-5  # no twin: no engine time
    ms = profile_world(world, chunks=1, twin=twin)
    assert set(ms) == {*COMPONENTS, "wall"} and ms["wall"] > 0


def test_profile_refuses_a_compiled_world(world_dir):
    compiled = load_world(world_dir, device="cpu", sample={"compile": True})
    with pytest.raises(ValueError, match="sample.compile=False"):
        profile_world(compiled)


def test_bench_inference_rows_against_none(world_dir, monkeypatch):
    monkeypatch.setitem(switches.SETTINGS, "cpu", {"none": {}, "int8": {"quantize": "int8"}})
    data = switches.bench_inference(str(world_dir), chunks=1, episodes=1, device="cpu")
    none, int8 = data["rows"]["none"], data["rows"]["int8"]
    assert none["psnr_loss_db"] == 0 and none["latent_max_abs_diff_rollout"] == 0
    assert none["speedup"] == 1
    assert 0 < int8["latent_max_abs_diff"] <= int8["latent_max_abs_diff_rollout"]
    assert int8["transformer_ms"] > 0 and int8["decode_ms"] > 0 and int8["cpu_ms"] > 0
    assert "--chunks 1 --episodes 1" in data["command"] and data["next_chunk_samples"] == 2
    with pytest.raises(ValueError, match="chunks must be an int >= 1, got 0"):
        switches.bench_inference(str(world_dir), chunks=0)
