"""What a training run needs and what the machine has: the memory estimate of a config,
the machine's devices, and the check of an accelerate config file against them.

A preset too big for the device fails here, before any data is read, naming the estimate
and the memory found; an accelerate config that does not fit the machine (more processes
than GPUs, FSDP version 1, several machines without a main address, bf16 on a GPU without
it) fails naming the field. `python -m worldlab train check` runs both; the world recipe
runs the memory check on the device it trains on.

The estimate, per process: parameters x 20 bytes (float32 weights, gradients, two AdamW
moments, EMA; divided by the processes under FSDP) + activations + the clip tensors when
they live on the device + CUDA's own context. Activations are counted in bytes per token
per width unit per block, measured with saved-tensor hooks on small models (the tests
measure again and hold the estimate to it): about 176 in float32, 104 under bf16 autocast;
with gradient checkpointing a block keeps only its float32 input and one block at a time
is recomputed.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from ..config import WorldConfig
from ..model.dit import WorldModel

GIB = 2**30
STATE_BYTES = {True: 20, False: 16}  # per parameter, with / without the EMA copy
ACTIVATION_BYTES = {"no": 176, "bf16": 104}  # per token, width unit and block
TRUNK_BYTES = 32  # per token and width unit: patchify, final layer, conditioning
CUDA_CONTEXT = 1 * GIB  # the CUDA context, cuBLAS / attention workspaces
GPU_TYPES = ("MULTI_GPU", "FSDP")  # accelerate distributed types that need GPUs
KNOWN_TYPES = ("NO", "MULTI_CPU", *GPU_TYPES)


@dataclasses.dataclass(frozen=True)
class Machine:
    """The device a process trains on: a GPU (memory per device) or the CPU (RAM)."""
    kind: str  # "cuda" | "cpu"
    devices: int  # CUDA devices on this machine (0 without)
    memory_bytes: int  # per device
    name: str
    bf16: bool  # bf16 tensor cores (a GPU) or autocast support


def this_machine(device: str = "auto", memory_gb: float | None = None) -> Machine:
    """This machine as `device` ("auto" | "cpu" | "cuda") sees it; `memory_gb` replaces
    the memory found (to ask what fits a smaller device)."""
    if device not in ("auto", "cpu", "cuda") and not str(device).startswith("cuda:"):
        raise ValueError(f"unknown device {device!r}; expected 'auto', 'cpu' or 'cuda'")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if str(device).startswith("cuda") and gpus == 0:
        raise ValueError(f"device {device!r} was asked for but torch sees no CUDA device")
    if device != "cpu" and gpus:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        found = Machine("cuda", gpus, props.total_memory, props.name,
                        torch.cuda.is_bf16_supported())
    else:
        import psutil

        found = Machine("cpu", gpus, psutil.virtual_memory().total, "cpu", True)
    if memory_gb is not None:
        if not memory_gb > 0:
            raise ValueError(f"memory_gb must be positive, got {memory_gb!r}")
        found = dataclasses.replace(found, memory_bytes=int(memory_gb * GIB))
    return found


# ----------------------------------------------------------------------------------------
# The estimate
# ----------------------------------------------------------------------------------------


def latent_geometry(cfg: WorldConfig) -> tuple[int, int]:
    """(latent channels, latent size) the config's autoencoder makes of data.size frames."""
    down = 2 ** (len(cfg.autoencoder.block_out_channels) - 1)
    return cfg.autoencoder.latent_channels, cfg.data.size // down


def count_parameters(cfg: WorldConfig, channels: int, size: int) -> int:
    """Parameters of the world model, built on the meta device (no memory)."""
    with torch.device("meta"):
        model = WorldModel.from_config_dataclass(cfg.model, channels, size)
    return sum(p.numel() for p in model.parameters())


def clip_tensor_bytes(frames: int, channels: int, size: int) -> int:
    """Bytes of `ClipTensors` over `frames` frames: float16 latents, float32 c2w, actions."""
    return frames * (2 * channels * size * size + 4 * 16 + 4 * 7)


def train_memory(cfg: WorldConfig, channels: int, size: int, processes: int = 1,
                 sharded: bool = False, data_bytes: int = 0, cuda: bool = True) -> dict:
    """Bytes one process needs to train `cfg` on latents (channels, size, size): a dict of
    parameters, state, activations, data, overhead and total (see the module docstring)."""
    m, t = cfg.model, cfg.train
    params = count_parameters(cfg, channels, size)
    tokens = (cfg.data.clip_chunks * m.chunk_frames * (size // m.patch_size) ** 2
              + m.memory_tokens)  # L, per clip
    precision = t.mixed_precision if cuda else "no"  # autocast runs on a GPU only
    per_block = ACTIVATION_BYTES[precision] * tokens * m.width * t.batch_size
    trunk = TRUNK_BYTES * tokens * m.width * t.batch_size + 5 * tokens ** 2  # + the mask
    if t.grad_checkpointing:  # float32 block inputs, one block recomputed at a time
        activations = 4 * tokens * m.width * t.batch_size * m.depth + per_block + trunk
    else:
        activations = per_block * m.depth + trunk
    state = STATE_BYTES[t.ema_decay > 0] * params // (processes if sharded else 1)
    overhead = CUDA_CONTEXT if cuda else 0
    return {"parameters": params, "tokens_per_clip": tokens, "state": state,
            "activations": activations, "data": data_bytes, "overhead": overhead,
            "total": state + activations + data_bytes + overhead}


def describe(estimate: dict) -> str:
    g = {k: estimate[k] / GIB for k in ("total", "state", "activations", "data")}
    return (f"{g['total']:.2f} GiB (weights + optimizer + EMA {g['state']:.2f}, activations "
            f"{g['activations']:.2f}, clip tensors {g['data']:.2f}; "
            f"{estimate['parameters'] / 1e6:.1f} M parameters, "
            f"{estimate['tokens_per_clip']} tokens per clip)")


def check_memory(estimate: dict, machine: Machine, what: str = "this config") -> dict:
    """`estimate` if it fits the machine's memory per device, else a ValueError with both."""
    if estimate["total"] > machine.memory_bytes:
        raise ValueError(f"{what} needs about {describe(estimate)} per process, but the "
                         f"{machine.kind} device ({machine.name}) has "
                         f"{machine.memory_bytes / GIB:.2f} GiB; use a smaller preset or "
                         f"batch, gradient checkpointing (train__grad_checkpointing=True), "
                         f"bf16, or FSDP over more GPUs")
    return estimate


# ----------------------------------------------------------------------------------------
# An accelerate config file against the machine
# ----------------------------------------------------------------------------------------


def read_accelerate_config(path) -> dict:
    import yaml

    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"cannot read accelerate config {path}: {e}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"accelerate config {path} must be a mapping of settings, got "
                         f"{type(doc).__name__}")
    return doc


def _gpu_ids(ids, where: str) -> list[int] | None:
    """gpu_ids as accelerate takes them: "all" (None here), "0,1" or a list of ints."""
    if ids is None or ids == "all":
        return None
    parts = str(ids).split(",") if not isinstance(ids, list) else ids
    try:
        return [int(i) for i in parts]
    except ValueError:
        raise ValueError(f"{where}: gpu_ids must be 'all' or GPU numbers, got {ids!r}") \
            from None


def check_accelerate_config(path, machine: Machine) -> dict:
    """The config at `path` if it can run on `machine` (each machine of a multi-node run
    is checked by itself), else a ValueError naming the field that does not match."""
    c, where = read_accelerate_config(path), str(path)
    kind = str(c.get("distributed_type", "NO")).upper()
    if kind not in KNOWN_TYPES:
        raise ValueError(f"{where}: distributed_type {kind!r}; worldlab runs with one of "
                         f"{KNOWN_TYPES}")
    machines, processes = int(c.get("num_machines", 1)), int(c.get("num_processes", 1))
    if machines < 1 or processes < machines or processes % machines:
        raise ValueError(f"{where}: num_processes={processes} must be a multiple of "
                         f"num_machines={machines}")
    if machines > 1 and not c.get("main_process_ip"):
        raise ValueError(f"{where}: num_machines={machines} needs main_process_ip, the "
                         f"address of machine_rank 0")
    per_machine = processes // machines
    if kind in GPU_TYPES:
        if c.get("use_cpu"):
            raise ValueError(f"{where}: distributed_type {kind} runs on GPUs but use_cpu is "
                             f"true")
        if machine.devices < per_machine:
            raise ValueError(f"{where}: distributed_type {kind} with num_processes="
                             f"{processes} on {machines} machine(s) needs {per_machine} "
                             f"GPU(s) per machine; this machine has {machine.devices}")
        ids = _gpu_ids(c.get("gpu_ids"), where)
        if ids is not None and (len(ids) != per_machine or max(ids) >= machine.devices):
            raise ValueError(f"{where}: gpu_ids {ids} must name {per_machine} of this "
                             f"machine's GPUs 0..{machine.devices - 1}")
    if kind == "FSDP" and (c.get("fsdp_config") or {}).get("fsdp_version") != 2:
        raise ValueError(f"{where}: fsdp_config.fsdp_version must be 2 (worldlab shards "
                         f"with FSDP2), got {(c.get('fsdp_config') or {}).get('fsdp_version')!r}")
    if (c.get("mixed_precision") == "bf16" and machine.kind == "cuda"
            and not machine.bf16):
        raise ValueError(f"{where}: mixed_precision bf16 but {machine.name} has no bf16; "
                         f"set mixed_precision: 'no'")
    return c


def processes_of(config: dict) -> tuple[int, bool]:
    """(processes, sharded) of an accelerate config: what the memory estimate divides by."""
    kind = str(config.get("distributed_type", "NO")).upper()
    return int(config.get("num_processes", 1)), kind == "FSDP"
