"""The session save format: a folder with `session.json` (metadata, marked with FORMAT and
VERSION) and `state.safetensors` (tensors). Nothing is unpickled.

Writing never destroys what is not a session save: a save creates a new folder (or fills an
empty one) or replaces a previous save, recognised by its marker; anything else at the path
(a file, a folder with other contents, the working directory) is refused before anything is
written. Reading checks every field against the world it is loaded into before the session
changes (`check`), and every error names the file and the field.

Shape legend: h w height/width, f frames per chunk, a action width, m buffered actions,
L cached tokens, hd head width, c latent channels, s latent side, k text tokens, e text width.

Version 3 saves a world's memory too (`memory.stream.Stream.to_tensors`: the chunk bank's
latents and poses, the cameras' K, the point cache's arrays, the view sample.paint_view paints
(the engine's last frame, until the world draws one); `memory` and `memory_config`
in session.json), so a session with memory resumes bit for bit like any other. Version 2
saves a context chunk that waits for its K/V (`KVCache.pending`) as its inputs; version 1
computed its K/V before saving, in a pass of its own, whose last bits can differ from the
live session's joint pass. All three are read (versions 1 and 2 hold worlds without
memory, the only ones they could save).

Memory shapes: n chunks in the bank, p points in the 3D cache.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import torch

from ..atomic import atomic_dir
from ..camera import ACTION_WIDTH
from ..config import MemoryConfig, uses_memory
from ..engines import ENGINES
from ..memory.stream import PENDING_INPUTS, POINT_ARRAYS, VIEW_ARRAYS
from ..model.textenc import check_prompt
from .state import LOG_BYTES

FORMAT, VERSION = "worldlab.session", 3
READABLE = (1, 2, 3)  # the versions `read` accepts
NO_MEMORY = dataclasses.asdict(MemoryConfig())  # what saves before version 3 held
STATE_FILE, META_FILE = "state.safetensors", "session.json"
LATENCY_POLICIES = ("hold", "buffer")
RNG_BYTES = int(torch.Generator().get_state().numel())  # a CPU generator's state


class SaveError(ValueError):
    """A session save that cannot be written there, or read back; names the file."""


# ----------------------------------------------------------------------------------------
# Where a save may go
# ----------------------------------------------------------------------------------------


def is_session_save(path: Path) -> bool:
    """A folder holding only a session save (its files), marked as one in session.json (or
    an unmarked save of an earlier worldlab, which may be replaced but not loaded)."""
    path = Path(path)
    if not path.is_dir() or not (path / META_FILE).is_file():
        return False
    if {p.name for p in path.iterdir()} - {STATE_FILE, META_FILE}:
        return False
    try:
        meta = json.loads((path / META_FILE).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    # saves written before the format had a marker hold the same two files and these keys
    legacy = isinstance(meta, dict) and "format" not in meta and \
        {"model", "step", "policy"} <= set(meta)
    return isinstance(meta, dict) and (meta.get("format") == FORMAT or legacy)


def check_target(path) -> Path:
    """The folder a save may be written to: new, empty, or a previous session save."""
    path = Path(path)
    if path.resolve() == Path.cwd().resolve() or path.resolve() == path.resolve().parent:
        raise SaveError(f"cannot save a session to {str(path)!r}: it is the working "
                        f"directory or the root; give a new folder, e.g. runs/session")
    if path.exists() and not path.is_dir():
        raise SaveError(f"cannot save a session to {path}: a file is there; give a new "
                        f"folder or a previous session save")
    if path.is_dir() and any(path.iterdir()) and not is_session_save(path):
        raise SaveError(f"cannot save a session to {path}: the folder holds other files "
                        f"(it is not a previous session save, marked {FORMAT!r} in "
                        f"{META_FILE}); nothing was written")
    return path


def write(path, tensors: dict[str, torch.Tensor], meta: dict) -> Path:
    """Write a save atomically after `check_target`; returns the folder."""
    from safetensors.torch import save_file

    path = check_target(path)
    meta = {"format": FORMAT, "version": VERSION, **meta}

    def fill(tmp: Path) -> None:
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp / STATE_FILE))
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2))

    return atomic_dir(path, fill)


def read(path) -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors, metadata) of a save; a missing, damaged or foreign file raises SaveError."""
    from safetensors.torch import load_file

    path = Path(path)
    if not (path / STATE_FILE).is_file() or not (path / META_FILE).is_file():
        raise SaveError(f"{path} is not a saved session: expected {STATE_FILE} and "
                        f"{META_FILE}")
    try:
        meta = json.loads((path / META_FILE).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise SaveError(f"cannot read {path / META_FILE}: {e}") from None
    if is_session_save(path) and meta.get("format") is None:
        raise SaveError(f"{path / META_FILE} was written by an earlier worldlab, before saves "
                        f"had a format version; it cannot be loaded (save the session again)")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise SaveError(f"{path / META_FILE} is not a session save: expected an object with "
                        f"format {FORMAT!r}")
    if meta.get("version") not in READABLE:
        raise SaveError(f"{path / META_FILE} has version {meta.get('version')!r}; this "
                        f"worldlab reads versions {list(READABLE)}")
    try:
        tensors = load_file(str(path / STATE_FILE))
    except Exception as e:  # safetensors raises its own error types on damage
        raise SaveError(f"cannot read {path / STATE_FILE}: {e}") from None
    return tensors, meta


# ----------------------------------------------------------------------------------------
# Checking a save against the world it is loaded into
# ----------------------------------------------------------------------------------------


def _field(meta: dict, key: str, ok, expected: str, where: Path):
    value = meta.get(key, _MISSING)
    if value is _MISSING or not ok(value):
        shown = "missing" if value is _MISSING else repr(value)
        raise SaveError(f"{where}: field {key!r} is {shown}; expected {expected}")
    return value


_MISSING = object()


def _int(lo: int = 0):
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= lo


def _tensor(tensors: dict, key: str, dtype, shape: tuple, where: Path, finite: bool = True):
    """The tensor `key` with this dtype and shape (None in `shape`: any size)."""
    t = tensors.get(key)
    if t is None:
        raise SaveError(f"{where}: tensor {key!r} is missing")
    if t.dtype != dtype or t.dim() != len(shape) or any(
            s is not None and s != n for s, n in zip(shape, t.shape)):
        raise SaveError(f"{where}: tensor {key!r} is {t.dtype} {tuple(t.shape)}; expected "
                        f"{dtype} {tuple('*' if s is None else s for s in shape)}")
    if finite and t.is_floating_point() and not torch.isfinite(t).all():
        raise SaveError(f"{where}: tensor {key!r} has non-finite values")
    return t


def _check_pose(tensors: dict, key: str, where: Path) -> None:
    pose = _tensor(tensors, key, torch.float64, (4, 4), where).numpy()
    rot = pose[:3, :3]
    if not (np.allclose(rot @ rot.T, np.eye(3), atol=1e-5) and np.allclose(
            pose[3], [0, 0, 0, 1]) and math.isclose(np.linalg.det(rot), 1.0, abs_tol=1e-5)):
        raise SaveError(f"{where}: tensor {key!r} is not a camera-to-world pose (rotation "
                        f"and last row [0, 0, 0, 1] expected)")


def check_meta(meta: dict, where: Path) -> None:
    """Every metadata field's type and allowed values."""
    prompt = lambda v: v is None or (isinstance(v, str) and _valid_prompt(v))  # noqa: E731
    _field(meta, "policy", lambda v: isinstance(v, str) and v in LATENCY_POLICIES,
           f"one of {LATENCY_POLICIES}", where)
    _field(meta, "steps", _int(1), "a positive int (sampling steps)", where)
    for key in ("step", "chunks", "queue", "seed"):
        _field(meta, key, _int(0), "a non-negative int", where)
    _field(meta, "event", lambda v: isinstance(v, str) and (not v or _valid_prompt(v)),
           "a prompt str ('' for none)", where)
    _field(meta, "pending", prompt, "a prompt str or null", where)
    _field(meta, "scene", lambda v: isinstance(v, str), "a str", where)
    _field(meta, "engine", lambda v: v is None or (isinstance(v, str) and v in ENGINES),
           f"null or one of {sorted(ENGINES)}", where)
    _field(meta, "twin", lambda v: isinstance(v, bool), "true or false", where)
    _field(meta, "on_screen", lambda v: isinstance(v, str) and v in ("context", "generated"),
           "'context' or 'generated'", where)
    _field(meta, "size", _int(1), "a positive int (frame side)", where)
    _field(meta, "model", lambda v: isinstance(v, dict), "an object (model config)", where)
    _field(meta, "log_prompts", lambda v: isinstance(v, dict) and all(
        isinstance(k, str) and k.isdigit() and isinstance(p, str) and _valid_prompt(p)
        for k, p in v.items()), "an object of step index -> prompt", where)
    if meta["twin"] and meta["engine"] is None:
        raise SaveError(f"{where}: a session with a twin needs its engine name")
    if meta.get("version", VERSION) >= 3:
        _field(meta, "memory_config", lambda v: isinstance(v, dict), "an object (the world's "
               "memory section)", where)
        _field(meta, "memory", lambda v: v is None or _memory_meta(v), "null or an object of "
               "chunks, frames, last_tokens (ints >= 0), last_memory (chunk indices), with a 3D "
               "cache fuses, and view: true where the view to paint is saved", where)


def _memory_meta(v) -> bool:
    if not isinstance(v, dict):
        return False
    ints = ("chunks", "frames", "last_tokens") + (("fuses",) if "fuses" in v else ())
    return set(v) <= {*ints, "last_memory", "view"} and v.get("view", True) is True \
        and all(_int()(v.get(k)) for k in ints) \
        and isinstance(v.get("last_memory"), list) \
        and all(_int()(i) and i < v["chunks"] for i in v["last_memory"])


def check_memory(meta: dict, memory_config: dict, where: Path) -> None:
    """The save's memory section (saves before version 3: none) against the world's: a
    session resumes only with the memory it was made with."""
    theirs = meta.get("memory_config", NO_MEMORY)
    for key, value in memory_config.items():
        if theirs.get(key) != value:
            raise SaveError(f"{where}: field 'memory_config': the saved session has memory "
                            f"{key}={theirs.get(key)!r}; this world has {key}={value!r}")
    on, points = uses_memory(MemoryConfig(**memory_config)), memory_config["cache3d"] != "off"
    mem = meta.get("memory")
    if on != (mem is not None) or (on and points != ("fuses" in mem)):
        want = "null" if not on else "an object with fuses" if points else \
            "an object without fuses"
        raise SaveError(f"{where}: field 'memory' is {mem!r}; expected {want} for this "
                        f"world's memory")


def _valid_prompt(text: str) -> bool:
    try:
        check_prompt(text)
    except ValueError:
        return False
    return True


def check_tensors(tensors: dict, meta: dict, model, size: int, where: Path) -> None:
    """Every tensor's dtype and shape against the metadata and the world's model."""
    _tensor(tensors, "rng", torch.uint8, (RNG_BYTES,), where)
    for key in ("pose", "gen_pose"):
        _check_pose(tensors, key, where)
    _tensor(tensors, "last_frame", torch.uint8, (size, size, 3), where)
    if meta["twin"]:
        _tensor(tensors, "last_twin", torch.uint8, (size, size, 3), where)
    f = model.config.chunk_frames
    _tensor(tensors, "buffered", torch.float64, (None, ACTION_WIDTH), where)
    if len(tensors["buffered"]) >= f or (meta["policy"] == "hold" and len(tensors["buffered"])):
        raise SaveError(f"{where}: {len(tensors['buffered'])} buffered actions; expected "
                        f"fewer than a chunk ({f}), none under 'hold'")
    log = _tensor(tensors, "log", torch.uint8, (None,), where)
    if len(log) % LOG_BYTES or (len(log) and not meta["twin"]):
        raise SaveError(f"{where}: the replay log has {len(log)} bytes; expected a multiple "
                        f"of {LOG_BYTES}, and none without a twin")
    if any(int(k) >= len(log) // LOG_BYTES for k in meta["log_prompts"]):
        raise SaveError(f"{where}: field 'log_prompts' of {META_FILE} points past the "
                        f"replay log ({len(log) // LOG_BYTES} steps)")
    if meta["queue"] >= f:  # a chunk queues f frames and shows one at once
        raise SaveError(f"{where}: {meta['queue']} queued frames; expected fewer than {f}")
    for i in range(meta["queue"]):
        _tensor(tensors, f"queue.{i}.frame", torch.uint8, (size, size, 3), where)
        _check_pose(tensors, f"queue.{i}.c2w", where)
        if meta["twin"]:
            _tensor(tensors, f"queue.{i}.twin", torch.uint8, (size, size, 3), where)
    _check_cache(tensors, meta, model, where)
    _check_memory_tensors(tensors, meta, model, size, where)


def _check_memory_tensors(tensors: dict, meta: dict, model, size: int, where: Path) -> None:
    """The stream's memory: the bank's latents (n, f, c, s, s) and poses (n, f, 4, 4) of
    every chunk so far, the cameras' K (3, 3), with a 3D cache its arrays (p rows) and,
    with sample.paint_view, the view to paint: its frame (size, size, 3), depth and camera."""
    mem, names = meta.get("memory"), sorted(k for k in tensors if k.startswith("memory."))
    if mem is None:
        if names:
            raise SaveError(f"{where}: tensor {names[0]!r} in a save without memory")
        return
    if mem["chunks"] != meta["chunks"]:
        raise SaveError(f"{where}: the memory holds {mem['chunks']} chunks; expected every "
                        f"chunk of the cache ({meta['chunks']})")
    cfg, n = model.config, mem["chunks"]
    f, side = cfg.chunk_frames, cfg.latent_size
    if n:
        _tensor(tensors, "memory.latents", torch.float32,
                (n, f, cfg.latent_channels, side, side), where)
        _tensor(tensors, "memory.c2w", torch.float64, (n, f, 4, 4), where)
        for j in range(n):
            for i in range(f):
                _check_pose({"c2w": tensors["memory.c2w"][j, i]}, "c2w", where)
    _tensor(tensors, "memory.K", torch.float64, (3, 3), where)
    expected = {f"memory.{k}" for k in ("K",) + (("latents", "c2w") if n else ())}
    if "fuses" in mem:
        dtypes = (torch.float64, torch.uint8, torch.int64, torch.int64)
        p = _tensor(tensors, "memory.points", torch.float64, (None, 3), where).shape[0]
        for name, dtype in zip(POINT_ARRAYS, dtypes):
            _tensor(tensors, f"memory.{name}", dtype, (p, 3) if name in ("points", "colors")
                    else (p,), where)
        keys = tensors["memory.keys"]
        if len(keys) > 1 and not bool((keys[1:] > keys[:-1]).all()):
            raise SaveError(f"{where}: tensor 'memory.keys' is not strictly increasing (the "
                            f"point cache keeps its voxel keys sorted)")
        expected |= {f"memory.{k}" for k in POINT_ARRAYS}
    if mem.get("view"):
        _tensor(tensors, "memory.view_rgb", torch.uint8, (size, size, 3), where)
        depth = _tensor(tensors, "memory.view_depth", torch.float32, (size, size), where,
                        finite=False)  # inf where the view saw nothing
        if not bool((depth > 0).all()):
            raise SaveError(f"{where}: tensor 'memory.view_depth' has values that are not "
                            f"positive depths (metres, inf where nothing was seen)")
        _check_pose({"c2w": tensors["memory.view_c2w"]}, "c2w", where)
        expected |= {f"memory.{k}" for k in VIEW_ARRAYS}
    if set(names) != expected:
        raise SaveError(f"{where}: memory tensors {names}; expected {sorted(expected)}")


def _check_cache(tensors: dict, meta: dict, model, where: Path) -> None:
    """Per-layer keys and values (1, heads, L, hd), L = the committed chunks the window
    keeps, and the inputs of a chunk waiting for its K/V (`_check_pending`)."""
    cfg = model.config
    committed = meta["chunks"] - _check_pending(tensors, meta, model, where)
    kept = min(committed, cfg.window_chunks) * cfg.chunk_frames * model.grid ** 2
    shape = (1, cfg.heads, kept, cfg.width // cfg.heads)
    for i in range(cfg.depth):
        for kind in ("k", "v"):
            key = f"cache.{kind}.{i}"
            if committed == 0:
                if key in tensors:
                    raise SaveError(f"{where}: tensor {key!r} in a cache of 0 chunks")
                continue
            _tensor(tensors, key, torch.float32, shape, where)
    extra = [k for k in tensors if k.startswith("cache.") and k[6:8] in ("k.", "v.")
             and int(k.rsplit(".", 1)[1]) >= cfg.depth]
    if extra:
        raise SaveError(f"{where}: tensor {extra[0]!r} but the model has {cfg.depth} layers")
    if "cache.last_pose" in tensors:
        _tensor(tensors, "cache.last_pose", torch.float64, (1, 4, 4), where)


def _check_pending(tensors: dict, meta: dict, model, where: Path) -> int:
    """1 if the save holds a context chunk waiting for its K/V, each of its inputs
    (`PENDING_INPUTS`) present with the model's shapes; else 0."""
    names = {k.removeprefix("cache.pending.") for k in tensors if k.startswith("cache.pending.")}
    if not names:
        return 0
    if meta["version"] < 2:
        raise SaveError(f"{where}: a version-1 save holds 'cache.pending.*' tensors; version 1 "
                        f"saved none")
    unknown = sorted(names - set(PENDING_INPUTS))
    if unknown:
        raise SaveError(f"{where}: tensor 'cache.pending.{unknown[0]}' is not a chunk input; "
                        f"expected {list(PENDING_INPUTS)}")
    if meta["chunks"] == 0:
        raise SaveError(f"{where}: a waiting chunk in a cache of 0 chunks")
    cfg = model.config
    f, side = cfg.chunk_frames, cfg.latent_size
    shapes = {"x": (1, f, cfg.latent_channels, side, side), "t": (1,),
              "actions": (1, f, cfg.action_width), "c2w": (1, f, 4, 4),
              "text": (1, cfg.text_tokens, cfg.text_dim)}
    for name in PENDING_INPUTS:
        _tensor(tensors, f"cache.pending.{name}", torch.float32, shapes[name], where)
    return 1
