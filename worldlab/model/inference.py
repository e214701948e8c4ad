"""Inference switches: what `config.SampleConfig` asks of a loaded world, applied once.

    world = wl.pretrained.load_world(path, sample={"quantize": "int8"})  # calls the below

`load_world` ends with `prepare_for_inference(world)`, which applies `world.config.sample`:

    quantize  "int8": dynamic int8 Linear layers of the transformer blocks (weights int8,
              activations quantized per call; torch.ao.quantization.quantize_dynamic). The
              blocks hold 91% of the shipped world's weights and nearly all of its per-token
              compute; the conditioning embedders run once per frame and read their own
              weight's dtype, so they stay float. CPU kernels only.
    compile   torch.compile of the trunk (the blocks and the final layer, the whole cost of a
              sampling step) and of the decoders (the autoencoder's, the fast one if any).
    autocast  "bf16": the trunk runs under bf16 autocast on a GPU; what it returns (velocity,
              keys and values for the KV cache) is cast back to float32, so the sampler and a
              session's saved cache see the same dtypes as without it.

The trunk is `WorldModel._trunk`, which `forward_chunk` and `append_chunk` (every forward
pass of sampling) call; both switches replace it on the instance, never on the class. A
combination that cannot run on the world's device is a ValueError naming the switch and the
device; nothing is silently skipped. The measured speed and quality of each switch:
`python -m worldlab bench inference` (data/results/inference.json).
"""

from __future__ import annotations

import functools
import warnings

import torch
import torch.nn as nn

from ..config import WorldConfig


def with_overrides(cfg: WorldConfig, sample: dict | None = None, memory: dict | None = None
                   ) -> WorldConfig:
    """`cfg` with the fields of its sample section in `sample` (and of its memory section in
    `memory`) replaced, validated like a world_config.json (an unknown field or a bad value
    is a ValueError naming it)."""
    d = cfg.to_dict()
    for section, fields, example in (("sample", sample, "{'quantize': 'int8'}"),
                                     ("memory", memory, "{'cache3d': 'own'}")):
        if fields is None:
            continue
        if not isinstance(fields, dict):
            raise ValueError(f"{section} overrides must be a dict of {section} fields, e.g. "
                             f"{example}; got {fields!r}")
        d = {**d, section: {**d[section], **fields}}
    return cfg if sample is None and memory is None else WorldConfig.from_dict(d)


def check_switches(sample, device: torch.device) -> None:
    """Raise ValueError if a switch of `sample` (a SampleConfig) cannot run on `device`."""
    if sample.quantize == "int8" and device.type != "cpu":
        raise ValueError(f"sample.quantize='int8' runs on the CPU only (dynamic int8 "
                         f"kernels), but the world is on {device}; on a GPU use "
                         f"sample.autocast='bf16'")
    if sample.autocast == "bf16" and device.type != "cuda":
        raise ValueError(f"sample.autocast='bf16' runs on a GPU only, but the world is on "
                         f"{device}; on the CPU use sample.quantize='int8'")


def prepare_for_inference(world):
    """Apply the switches of `world.config.sample` to a freshly loaded `World` (in place:
    call it once) and return it."""
    sample, model = world.config.sample, world.model
    check_switches(sample, world.device)
    if sample.quantize == "int8":
        quantize_int8(model.blocks)
    if sample.compile:  # lazily: each compiles on its first call
        model._trunk = torch.compile(model._trunk)
        world.ae.vae.decoder.compile()
        if world.fast_decoder is not None:
            world.fast_decoder.compile()
    if sample.autocast == "bf16":
        model._trunk = autocast_trunk(model._trunk, world.device.type)
    return world


def quantize_int8(module: nn.Module) -> nn.Module:
    """Replace every nn.Linear of `module` in place by a dynamic int8 one."""
    from torch.ao.quantization import quantize_dynamic

    with warnings.catch_warnings():  # torch.ao's notices that torchao will replace it
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*")
        return quantize_dynamic(module, {nn.Linear}, dtype=torch.qint8, inplace=True)


def autocast_trunk(trunk, device_type: str):
    """`trunk` run under bf16 autocast on `device_type`, its velocity and K/V cast back to
    float32 (the trunk returns v (b, t, c, h, w), None for a cache append, and per layer
    (K, V))."""
    @functools.wraps(trunk)
    def run(*args, **kwargs):
        with torch.autocast(device_type, dtype=torch.bfloat16):
            v, kvs = trunk(*args, **kwargs)
        return None if v is None else v.float(), [(k.float(), val.float()) for k, val in kvs]
    return run
