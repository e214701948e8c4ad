"""Play a world live: `WorldSession` (pure, headless), the scripted CLI and the benchmark.

    session = wl.play.WorldSession.from_pretrained(wl.DATA / "checkpoints" / "doom64")
    session.reset(engine="doom", seed=0)
    result = session.step(wl.camera.Action(forward=0.25), prompt="summon a monster")
    result.frame, result.twin_frame, result.stats["fps"]

The widget shell (`NotebookGame`, `KEYMAP`) lives in `worldlab.play_widgets` and is
re-exported here; the CLI is `python -m worldlab play --checkpoint DIR --script a.json`.

Latency policy (`policy=`): the model makes frames a chunk (`chunk_frames` = f) at a time,
but the player acts once per frame. Two honest ways to bridge that:

- "hold" (default, interactive): the step that opens a chunk generates it at once from its
  own action, held for all f frames; the chunk's frames are handed out one per step. The
  actions of the f - 1 other steps do not condition anything (`stats["applied"]` is False):
  a key held down is seen at the next chunk boundary (`NotebookGame.press` therefore plays a
  key's chunk out, so every key press counts). Key-to-pixel latency is the chunk's
  generation time, paid on the boundary step; the other steps cost ~nothing.
- "buffer": every action counts. Actions are buffered until f are known, then the chunk is
  generated from exactly those; its frames are handed out from that step on, so frames lag
  the keys by f - 1 steps (the first f - 1 steps after a reset repeat the last context
  frame). Key-to-pixel latency is f - 1 frame intervals plus the generation time.

`stats["key_to_pixel_ms"]`, on the step that shows the first frame of a chunk, is the wall
time from the step() call whose action was the oldest one conditioning that chunk.

Prompts: a prompt becomes the caption's event field for the first chunk generated at or
after the step() that carries it (never a chunk already made): scene and character come
from `recording.SCENES` / `recording.CHARACTER`. The twin engine receives it on that chunk's
first frame.

Poses: the model is conditioned on camera poses. With the twin (an engine stepped with the
same actions) the engine's own poses are used, since the engine's pose is the truth (it
collides with walls, clamps pitch); without it the session integrates actions with
`camera.step_pose`.

Bounded state: the KV cache keeps `window_chunks` chunks; besides it the session holds one
chunk of frames. The one thing that grows is the twin's replay log (7 floats per step,
~28 bytes: an hour at 9 frames/s is under 1 MB), kept so a saved session can rebuild its
engine: engines cannot be snapshotted, only replayed.

Shape legend: f frames per chunk, c latent channels, h w height/width, a action width.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .camera import (ACTION_WIDTH, BUTTONS, Action, actions_from_poses, check_c2w,
                     pose_from_heading, step_pose)
from .recording import CHARACTER, SCENES
from .sampler import sample_chunk
from .textenc import check_prompt

POLICIES = ("hold", "buffer")
DEFAULT_CHECKPOINT = Path("data") / "checkpoints" / "doom64"  # relative to wl.ROOT
STATE_FILE, META_FILE = "state.safetensors", "session.json"
FPS_WINDOW = 32  # steps over which `stats["fps"]` is averaged
LOG_BYTES = 8 * ACTION_WIDTH  # one float64 action vector in the twin's replay log


@dataclass
class StepResult:
    frame: np.ndarray  # (h, w, 3) uint8, the generated frame shown at this step
    c2w: np.ndarray  # (4, 4) pose of that frame
    step: int  # steps taken since reset (0 = the last context frame)
    twin_frame: np.ndarray | None  # (h, w, 3) uint8 engine frame at the same pose, or None
    stats: dict = field(default_factory=dict)


def resolve_checkpoint(path=None) -> Path:
    """A world directory: `path` (relative paths from the repository root) or the default."""
    from . import ROOT

    p = Path(path) if path is not None else DEFAULT_CHECKPOINT
    p = p if p.is_absolute() else ROOT / p
    if not (p / "world_config.json").is_file():
        hint = " (the default checkpoint is not shipped yet)" if path is None or \
            p == ROOT / DEFAULT_CHECKPOINT else ""
        raise FileNotFoundError(f"no world checkpoint at {p}{hint}: expected autoencoder/, "
                                f"world/ and world_config.json (see worldlab.pretrained)")
    return p


def check_action(action) -> Action:
    """An Action, or a dict of its fields (validated by Action itself)."""
    if isinstance(action, Action):
        return action
    if isinstance(action, dict):
        return Action.from_dict(action)
    raise ValueError(f"action must be a worldlab.camera.Action or a dict of its fields, got "
                     f"{type(action).__name__} {action!r}")


def rss_mb() -> float:
    """Resident memory of this process in MiB."""
    import psutil

    return psutil.Process().memory_info().rss / 2 ** 20


def action_vector(a: Action) -> np.ndarray:
    """(a,) float64: like Action.to_vector but exact, so a replayed action is the same."""
    return np.array([a.forward, a.right, a.yaw, a.pitch]
                    + [float(b in a.buttons) for b in BUTTONS], np.float64)


def frame_psnr(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR (dB) between two uint8 frames (h, w, 3)."""
    from .evaluate import frame_psnr as frames_psnr

    return float(frames_psnr(a[None], b[None])[0])


# ----------------------------------------------------------------------------------------
# The session
# ----------------------------------------------------------------------------------------


class WorldSession:
    """One live rollout of a world: KV cache, pose, prompt, RNG, and an optional twin."""

    def __init__(self, world, steps: int | None = None, twin: bool = True,
                 policy: str = "hold"):
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        steps = world.config.sample.steps if steps is None else steps
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps (sampling steps) must be a positive int, got {steps!r}")
        self.world, self.steps, self.use_twin, self.policy = world, steps, bool(twin), policy
        self.f = world.chunk_frames
        self.engine = None
        self._times = collections.deque(maxlen=FPS_WINDOW)  # seconds inside step()
        self._timing: dict = {}
        self._started = False

    @classmethod
    def from_pretrained(cls, path, device: str = "auto", steps: int | None = None,
                        twin: bool = True, policy: str = "hold") -> "WorldSession":
        from .pretrained import load_world

        return cls(load_world(resolve_checkpoint(path), device), steps, twin, policy)

    # ---- reset --------------------------------------------------------------------------

    def reset(self, engine: str | None = "doom", seed: int = 0, frames=None,
              c2w=None) -> StepResult:
        """Start from an engine's first chunk, or from your own `frames` (t, h, w, 3) uint8
        (t a multiple of chunk_frames) at poses `c2w` (t, 4, 4) (default: all at the
        origin facing +x). Returns the last context frame as step 0."""
        if frames is not None:
            rgb, poses, scene, eng = self._user_context(frames, c2w)
        else:
            rgb, poses, scene, eng = self._engine_context(engine, seed)
        self.close()
        self.engine, self.engine_name, self.seed = eng, engine if frames is None else None, seed
        self.scene, self.event, self.pending = scene, "", None
        self.cache = self.world.model.new_cache(1)
        self.rng = torch.Generator().manual_seed(int(seed))
        t = len(rgb)
        actions = np.zeros((t, ACTION_WIDTH), np.float32)
        if frames is not None:  # recorded episodes pair frame 0 with a zero action too
            actions[1:] = [a.to_vector() for a in actions_from_poses(poses)]
        latents = self.world.encode(rgb)  # (1, t, c, h', w')
        text = self._text("")
        with torch.no_grad():
            for j in range(t // self.f):
                s = slice(j * self.f, (j + 1) * self.f)
                self.world.model.append_chunk(latents[:, s], self.cache, **self._cond(
                    actions[s], poses[s], text))
        self.pose, self.gen_pose, self.last_frame = poses[-1].copy(), poses[-1].copy(), \
            rgb[-1].copy()
        self.last_twin = rgb[-1].copy() if self.engine is not None else None
        self.queue = collections.deque()  # (frame, c2w, twin_frame, t_issued) to hand out
        self.buffered: list[tuple[Action, float]] = []  # "buffer" policy: actions waiting
        self.log = bytearray()  # the twin's replay log: float64 action vectors
        self.log_prompts: dict[int, str] = {}
        self.step_index, self._started, self._timing = 0, True, {}
        self.on_screen = "context"  # "context" (the engine's own frame) or "generated"
        self._times.clear()
        return StepResult(self.last_frame, self.pose, 0, self.last_twin, self.stats(None))

    def _engine_context(self, name, seed):
        """First chunk of an engine: reset + f - 1 no-op steps. Returns rgb, poses, scene,
        the engine (kept as twin) or None (closed)."""
        from .engines import make_engine

        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        engine = make_engine(name, size=self.world.size)
        obs = [engine.reset(seed=seed)] + [engine.step(Action()) for _ in range(self.f - 1)]
        if not self.use_twin:
            engine.close()
            engine = None
        return (np.stack([o.rgb for o in obs]), np.stack([o.c2w for o in obs]),
                SCENES.get(name, name), engine)

    def _user_context(self, frames, c2w):
        rgb = np.asarray(frames)
        s = self.world.size
        if rgb.dtype != np.uint8 or rgb.ndim != 4 or rgb.shape[1:] != (s, s, 3) \
                or len(rgb) == 0 or len(rgb) % self.f:
            raise ValueError(f"frames must be uint8 (t, {s}, {s}, 3) with t a positive "
                             f"multiple of chunk_frames={self.f}; got {rgb.dtype} {rgb.shape}")
        if c2w is None:
            poses = np.broadcast_to(pose_from_heading(np.zeros(3), 0.0), (len(rgb), 4, 4))
        else:
            poses = check_c2w(c2w)
            if poses.shape != (len(rgb), 4, 4):
                raise ValueError(f"c2w must be ({len(rgb)}, 4, 4), one pose per frame; got "
                                 f"{poses.shape}")
        scene = SCENES.get(self.world.config.data.engine, self.world.config.data.engine)
        return rgb, np.array(poses), scene, None

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    # ---- step ---------------------------------------------------------------------------

    def step(self, action, prompt: str | None = None) -> StepResult:
        """Advance one frame. Bad input raises ValueError and changes nothing."""
        t_call = time.perf_counter()
        if not self._started:
            raise RuntimeError("call reset() before step()")
        action = check_action(action)
        if prompt is not None:
            check_prompt(prompt)
        if self.policy == "hold":
            chunk = [action] * self.f if not self.queue else None
        else:
            chunk = [a for a, _ in self.buffered] + [action]
            chunk = chunk if len(chunk) == self.f else None
        if chunk is not None:
            fresh = prompt if prompt is not None else self.pending
            oldest = self.buffered[0][1] if self.buffered else t_call  # "buffer" only
            self._generate(chunk, fresh, oldest)  # changes nothing unless it succeeds
            self.event, self.pending = fresh or self.event, None
            self.buffered = []
        elif prompt is not None:
            self.pending = prompt
        if chunk is None and self.policy == "buffer":
            self.buffered.append((action, t_call))
        self.step_index += 1
        if self.queue:
            self.last_frame, self.pose, self.last_twin, t_issued = self.queue.popleft()
            self.on_screen = "generated"
        else:  # "buffer" before its first chunk: the last context frame stays on screen
            t_issued = None
        self._times.append(time.perf_counter() - t_call)
        stats = self.stats(t_issued)
        stats["applied"] = self.policy == "buffer" or chunk is not None
        return StepResult(self.last_frame, self.pose, self.step_index, self.last_twin, stats)

    @torch.no_grad()  # without it the cache would keep every chunk's autograd history
    def _generate(self, actions: list[Action], fresh: str | None, t_issued: float) -> None:
        """Make one chunk from f actions (with a fresh prompt or None) and queue its frames.
        Poses are computed (and may raise) before anything changes; the RNG is restored if
        sampling fails."""
        world, t0 = self.world, time.perf_counter()
        poses = None if self.engine is not None else self._integrate(actions)
        text = self._text(fresh or self.event)  # a new prompt is encoded once, then cached
        rng_state, t_text = self.rng.get_state(), time.perf_counter()
        try:
            twin = self._step_twin(actions, fresh) if self.engine is not None else None
            t1 = time.perf_counter()
            poses = twin[1] if twin is not None else poses
            vec = np.stack([a.to_vector() for a in actions])  # (f, a)
            cond = self._cond(vec, poses, text)
            noise = torch.randn((1, self.f, *self._latent_shape()), generator=self.rng)
            x0 = sample_chunk(world.model, self.cache, noise.to(world.device), self.steps,
                              world.config.sample.solver, world.config.sample.guidance, **cond)
            world.model.append_chunk(x0, self.cache, **cond)
            _sync(world.device)
            t2 = time.perf_counter()
            frames = world.decode(x0)  # (f, h, w, 3)
        except BaseException:
            self.rng.set_state(rng_state)
            raise
        t3 = time.perf_counter()
        self.gen_pose = poses[-1].copy()
        for i in range(self.f):
            self.queue.append((frames[i], poses[i], None if twin is None else twin[0][i],
                               t_issued if i == 0 else None))
        self._timing = {"text_ms": 1e3 * (t_text - t0), "engine_ms": 1e3 * (t1 - t_text),
                        "transformer_ms": 1e3 * (t2 - t1), "decode_ms": 1e3 * (t3 - t2),
                        "chunk_latency_ms": 1e3 * (t3 - t0)}

    def _integrate(self, actions: list[Action]) -> np.ndarray:
        """Poses (f, 4, 4) after each action, from the last generated pose."""
        pose, out = self.gen_pose, []
        for a in actions:
            pose = step_pose(pose, a)
            out.append(pose)
        return np.stack(out)

    def _step_twin(self, actions: list[Action], prompt: str | None):
        """Step the engine f times; a fresh prompt goes in with the chunk's first frame."""
        obs = [self.engine.step(a, prompt if i == 0 else None) for i, a in enumerate(actions)]
        if prompt is not None:
            self.log_prompts[len(self.log) // LOG_BYTES] = prompt
        for a in actions:
            self.log += action_vector(a).tobytes()
        return np.stack([o.rgb for o in obs]), np.stack([o.c2w for o in obs])

    # ---- conditioning -------------------------------------------------------------------

    def _latent_shape(self) -> tuple[int, int, int]:
        cfg = self.world.model.config
        return cfg.latent_channels, cfg.latent_size, cfg.latent_size  # (c, h', w')

    def _text(self, event: str) -> torch.Tensor:
        """The chunk's caption (scene, character, event) -> (1, k, e)."""
        return self.world.embed([(self.scene, CHARACTER, event)])[:, 0]

    def _cond(self, actions: np.ndarray, poses: np.ndarray, text: torch.Tensor) -> dict:
        dev = self.world.device
        return {"actions": torch.from_numpy(np.asarray(actions, np.float32))[None].to(dev),
                "c2w": torch.from_numpy(np.asarray(poses, np.float32))[None].to(dev),
                "text": text}

    # ---- stats --------------------------------------------------------------------------

    def cache_chunks(self) -> int:
        """Chunks held in the KV cache now (at most window_chunks)."""
        keys = self.cache.keys[0]
        tokens = self.f * self.world.model.grid ** 2
        return 0 if keys is None else keys.shape[2] // tokens

    def stats(self, t_issued: float | None = None) -> dict:
        """The stats line of the frame on screen (key_to_pixel_ms when `t_issued` is given)."""
        busy = sum(self._times)
        stats = {"step": getattr(self, "step_index", 0),
                 "fps": len(self._times) / busy if busy > 0 else float("nan"),
                 "step_ms": 1e3 * self._times[-1] if self._times else float("nan"),
                 "cache_chunks": self.cache_chunks(), "chunks": self.cache.chunks,
                 "event": self.event, "pending_prompt": self.pending,
                 "rss_mb": rss_mb(), **self._timing,
                 "key_to_pixel_ms": None if t_issued is None else
                 1e3 * (time.perf_counter() - t_issued)}
        # PSNR only scores generated frames; a context frame is the engine's own
        stats["psnr"] = frame_psnr(self.last_frame, self.last_twin) \
            if self.last_twin is not None and self.on_screen == "generated" else None
        return stats

    # ---- save / load --------------------------------------------------------------------

    def state(self) -> tuple[dict[str, torch.Tensor], dict]:
        """Everything a resumed session needs: (tensors, JSON-able metadata)."""
        if not self._started:
            raise RuntimeError("call reset() before state()/save()")
        buffered = np.array([action_vector(a) for a, _ in self.buffered])
        buffered = buffered.reshape(-1, ACTION_WIDTH)  # (m, a), also when empty
        tensors = {"rng": self.rng.get_state(), "pose": torch.from_numpy(self.pose.copy()),
                   "gen_pose": torch.from_numpy(self.gen_pose.copy()),
                   "last_frame": torch.from_numpy(self.last_frame.copy()),
                   "log": torch.from_numpy(np.frombuffer(bytes(self.log), np.uint8).copy()),
                   "buffered": torch.from_numpy(buffered)}  # (m, a) float64
        for i, (k, v) in enumerate(zip(self.cache.keys, self.cache.values)):
            if k is not None:
                tensors[f"cache.k.{i}"], tensors[f"cache.v.{i}"] = k.cpu(), v.cpu()
        if self.cache.last_pose is not None:
            tensors["cache.last_pose"] = self.cache.last_pose.cpu()
        if self.last_twin is not None:
            tensors["last_twin"] = torch.from_numpy(self.last_twin.copy())
        for i, (frame, pose, twin, _) in enumerate(self.queue):
            tensors[f"queue.{i}.frame"] = torch.from_numpy(frame.copy())
            tensors[f"queue.{i}.c2w"] = torch.from_numpy(np.asarray(pose, np.float64).copy())
            if twin is not None:
                tensors[f"queue.{i}.twin"] = torch.from_numpy(twin.copy())
        meta = {"step": self.step_index, "chunks": self.cache.chunks, "event": self.event,
                "pending": self.pending, "scene": self.scene, "engine": self.engine_name,
                "seed": self.seed, "policy": self.policy, "steps": self.steps,
                "twin": self.engine is not None, "queue": len(self.queue),
                "on_screen": self.on_screen,
                "size": self.world.size,
                "log_prompts": {str(k): v for k, v in self.log_prompts.items()},
                "model": self._model_config()}
        return tensors, meta

    def save(self, path) -> Path:
        """Write the session to a directory (state.safetensors + session.json), atomically."""
        from safetensors.torch import save_file

        from .atomic import atomic_dir

        tensors, meta = self.state()

        def write(tmp: Path) -> None:
            save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp / STATE_FILE))
            (tmp / META_FILE).write_text(json.dumps(meta, indent=2))

        return atomic_dir(Path(path), write)

    def load(self, path) -> None:
        """Restore a saved session into this one (same world). Everything is read and
        checked before anything changes; a session with a twin rebuilds its engine by
        replaying the saved log (engines cannot be snapshotted)."""
        from safetensors.torch import load_file

        path = Path(path)
        if not (path / STATE_FILE).is_file() or not (path / META_FILE).is_file():
            raise ValueError(f"{path} is not a saved session: expected {STATE_FILE} and "
                             f"{META_FILE}")
        meta = json.loads((path / META_FILE).read_text())
        mine = {**self._model_config(), "size": self.world.size}
        for key, value in {**meta["model"], "size": meta["size"]}.items():
            if mine.get(key) != value:
                raise ValueError(f"saved session has model {key}={value!r}; this world has "
                                 f"{key}={mine.get(key)!r}")
        tensors = load_file(str(path / STATE_FILE))
        engine = self._replay(meta, tensors) if meta["twin"] else None
        self.close()
        self._restore(meta, tensors, engine)

    def _model_config(self) -> dict:
        """The world model's architecture as JSON values (diffusers' own keys left out)."""
        cfg = {k: v for k, v in self.world.model.config.items() if not k.startswith("_")}
        return json.loads(json.dumps(cfg))

    def _replay(self, meta: dict, tensors: dict):
        """A fresh engine brought to the saved step by replaying the log."""
        from .engines import make_engine

        engine = make_engine(meta["engine"], size=self.world.size)
        engine.reset(seed=meta["seed"])
        for _ in range(self.f - 1):
            engine.step(Action())
        log = tensors["log"].numpy().view(np.float64)
        prompts = {int(k): v for k, v in meta["log_prompts"].items()}
        for i, vec in enumerate(log.reshape(-1, ACTION_WIDTH)):
            engine.step(Action.from_vector(vec), prompts.get(i))
        return engine

    def _restore(self, meta: dict, tensors: dict, engine) -> None:
        dev, depth = self.world.device, self.world.model.config.depth
        cache = self.world.model.new_cache(1)
        cache.chunks = meta["chunks"]
        for i in range(depth):
            if f"cache.k.{i}" in tensors:
                cache.keys[i] = tensors[f"cache.k.{i}"].to(dev)
                cache.values[i] = tensors[f"cache.v.{i}"].to(dev)
        if "cache.last_pose" in tensors:
            cache.last_pose = tensors["cache.last_pose"].to(dev)
        self.cache, self.engine, self.engine_name = cache, engine, meta["engine"]
        self.seed, self.scene, self.event = meta["seed"], meta["scene"], meta["event"]
        self.pending, self.policy, self.steps = meta["pending"], meta["policy"], meta["steps"]
        self.rng = torch.Generator()
        self.rng.set_state(tensors["rng"])
        arr = lambda k: tensors[k].numpy().copy() if k in tensors else None  # noqa: E731
        self.pose, self.gen_pose = arr("pose"), arr("gen_pose")
        self.last_frame = arr("last_frame")
        self.last_twin = arr("last_twin")
        self.queue = collections.deque((arr(f"queue.{i}.frame"), arr(f"queue.{i}.c2w"),
                                        arr(f"queue.{i}.twin"), None)
                                       for i in range(meta["queue"]))
        self.buffered = [(Action.from_vector(v), time.perf_counter())
                         for v in tensors["buffered"].numpy()]
        self.log = bytearray(tensors["log"].numpy().tobytes())
        self.log_prompts = {int(k): v for k, v in meta["log_prompts"].items()}
        self.step_index, self._started, self.on_screen = meta["step"], True, meta["on_screen"]
        self._times.clear()


# ----------------------------------------------------------------------------------------
# Front ends, loaded on first use (widgets need ipywidgets; the CLI needs imageio)
# ----------------------------------------------------------------------------------------


def configure_cli(parser) -> None:
    from .play_cli import configure_cli as configure

    configure(parser)


def bench_play(args) -> dict:
    from .play_cli import bench_play as bench

    return bench(args)


def __getattr__(name: str):
    if name in ("NotebookGame", "KEYMAP"):
        from . import play_widgets

        return getattr(play_widgets, name)
    if name in ("demo_script", "parse_script", "load_script", "play_script", "write_mp4",
                "scores", "write_outputs"):
        from . import play_cli

        return getattr(play_cli, name)
    raise AttributeError(f"module 'worldlab.play' has no attribute {name!r}")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":  # honest timings: wait for the kernels
        torch.cuda.synchronize(device)
