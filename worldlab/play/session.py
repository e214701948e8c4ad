"""`WorldSession`: one live rollout of a world, pure and headless.

    session = wl.play.WorldSession.from_pretrained(wl.DATA / "checkpoints" / "doom64")
    session.reset(engine="doom", seed=0)
    result = session.step(wl.camera.Action(forward=0.25), prompt="summon a monster")
    result.frame, result.twin_frame, result.stats["fps"]
    session.step_chunk(action)       # one key press: the steps of the chunk it opens

Its shells import it, never the other way: the widget (`play.widgets.NotebookGame`) and
the scripted CLI (`play.script`). All of a rollout's state is one `SessionState`
(`play.state`) that reset, save and load share.

Latency policy (`policy=`): the model makes frames a chunk (`chunk_frames` = f) at a time,
but the player acts once per frame. Two honest ways to bridge that:

- "hold" (default, interactive): the step that opens a chunk generates it at once from its
  own action, held for all f frames; the chunk's frames are handed out one per step. The
  actions of the f - 1 other steps do not condition anything (`stats["applied"]` is False):
  a key held down is seen at the next chunk boundary (`step_chunk` therefore plays a key's
  chunk out, so every key press counts). Key-to-pixel latency is the chunk's
  generation time, paid on the boundary step; the other steps cost ~nothing.
- "buffer": every action counts. Actions are buffered until f are known, then the chunk is
  generated from exactly those; its frames are handed out from that step on, so frames lag
  the keys by f - 1 steps (the first f - 1 steps after a reset repeat the last context
  frame). Key-to-pixel latency is f - 1 frame intervals plus the generation time.

`stats["key_to_pixel_ms"]`, on the step that shows the first frame of a chunk, is the wall
time from the step() call whose action was the oldest one conditioning that chunk.

Pace (`pace=`, a `play.PacePolicy`): a chunk that takes longer to make than the game time it
shows (f / fps) cannot keep up with the keys, which on a laptop mostly means another job has
the cores. After a few such chunks in a row `status().notes` says so, with the load average;
with `PacePolicy(switch_steps=n)` (on) the session also switches to n sampling steps (the
faster student setting) on its own; off (the default) it only reports.

Prompts a world was not trained on (not an event field of its caption table,
`known_prompts()`) are accepted with an `UnknownPromptWarning` that lists the known ones.

Prompts: a prompt becomes the caption's event field for the first chunk generated at or
after the step() that carries it (never a chunk already made): scene and character come
from `episodes.SCENES` / `episodes.CHARACTER`. The twin engine receives it on that chunk's
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

import collections
import dataclasses
import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..camera import ACTION_WIDTH, Action, actions_from_poses, check_c2w, intrinsics_from_fov, \
    pose_from_heading, step_pose
from ..config import check_sampling_steps
from ..engines import make_engine
from ..episodes import CHARACTER, SCENES
from ..episodes.recording import DEFAULT_FPS, game_fps
from ..memory.stream import Stream, world_stream
from ..metrics import frame_psnr
from ..model.textenc import CaptionTable, check_prompt
from ..pretrained import CAPTIONS_FILE, PAINT, load_world, resolve_checkpoint
from . import saved
from .pace import PacePolicy
from .saved import LATENCY_POLICIES
from .state import LOG_BYTES, SessionState, action_vector

FPS_WINDOW = 32  # steps over which `stats["fps"]` is averaged
DEMO_PROMPT = "summon a monster"  # a keyword event in both engines


@dataclass
class StepResult:
    frame: np.ndarray  # (h, w, 3) uint8, the generated frame shown at this step
    c2w: np.ndarray  # (4, 4) pose of that frame
    step: int  # steps taken since reset (0 = the last context frame)
    twin_frame: np.ndarray | None  # (h, w, 3) uint8 engine frame at the same pose, or None
    stats: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SessionStatus:
    """What a shell shows besides the frame and its stats, as data (`WorldSession.status`)."""

    step: int  # steps taken since reset
    engine_name: str | None  # the first chunk's engine (and the twin's); None: your frames
    chunk_frames: int  # frames per chunk: one key press plays this many under "hold"
    steps: int  # sampling steps per chunk now
    frame_rate: float  # frames per second of game time
    slow: bool  # the last chunk took longer than the pace policy's budget
    switched: bool  # the pace policy switched to its faster setting
    notes: tuple[str, ...]  # sentences for the player: a slow machine, an unknown prompt


class UnknownPromptWarning(UserWarning):
    """A prompt the world was not trained on: accepted (the text encoder embeds any text),
    but the world has only learned what its trained prompts do."""


def check_action(action) -> Action:
    """An Action, or a dict of its fields (validated by Action itself)."""
    if isinstance(action, Action):
        return action
    if isinstance(action, dict):
        return Action.from_dict(action)
    raise ValueError(f"action must be a worldlab.camera.Action or a dict of its fields, got "
                     f"{type(action).__name__} {action!r}")


MAP_POINTS = 2000  # 3D-cache points a minimap draws


def rss_mb() -> float:
    """Resident memory of this process in MiB."""
    import psutil

    return psutil.Process().memory_info().rss / 2 ** 20


class WorldSession:
    """One live rollout of a world: KV cache, pose, prompt, RNG (a `SessionState`) and an
    optional twin engine."""

    def __init__(self, world, steps: int | None = None, twin: bool = True,
                 policy: str = "hold", pace: PacePolicy | None = None):
        if policy not in LATENCY_POLICIES:
            raise ValueError(f"policy must be one of {LATENCY_POLICIES}, got {policy!r}")
        steps = world.config.sample.steps if steps is None else steps
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps (sampling steps) must be a positive int, got {steps!r}")
        check_sampling_steps(world.config, steps)
        self.world, self.steps, self.use_twin, self.policy = world, steps, bool(twin), policy
        self.f = world.chunk_frames
        self.engine = None  # the twin, stepped with the same actions
        self.state: SessionState | None = None  # None until reset() or load()
        self._times = collections.deque(maxlen=FPS_WINDOW)  # seconds inside step()
        self._timing: dict = {}
        if pace is not None and not isinstance(pace, PacePolicy):
            raise ValueError(f"pace must be a play.PacePolicy or None, got {pace!r}")
        self.pace = pace if pace is not None else PacePolicy()  # off: it only reports
        self._notes: dict[str, str] = {}  # "pace" / "prompt" -> a sentence for the player
        self._slow = False  # the pace policy's verdict on the last chunk made
        self._known: tuple[str, ...] | None = None  # known_prompts(), read once

    @classmethod
    def from_pretrained(cls, path, device: str = "auto", steps: int | None = None,
                        twin: bool = True, policy: str = "hold",
                        pace: PacePolicy | None = None, paint: bool = False
                        ) -> "WorldSession":
        """A session of the world at `path`; `paint`: with its own 3D cache painting what
        it has seen (`pretrained.PAINT`; the world needs a depth head)."""
        world = load_world(resolve_checkpoint(path), device, **(PAINT if paint else {}))
        return cls(world, steps, twin, policy, pace)

    @property
    def started(self) -> bool:
        return self.state is not None

    def current(self) -> StepResult:
        """What is on screen now, as the StepResult of the last step (or of reset)."""
        s = self._require_started()
        return StepResult(s.last_frame, s.pose, s.step_index, s.last_twin, self.stats())

    def _require_started(self) -> SessionState:
        if self.state is None:
            raise RuntimeError("call reset() (or load()) first")
        return self.state

    # ---- for shells: what a widget or a script may read (never `state`'s fields) --------

    @property
    def chunk_frames(self) -> int:
        return self.f

    @property
    def engine_name(self) -> str | None:
        """The engine of the first chunk and the twin; None for your own frames or before
        reset."""
        return None if self.state is None else self.state.engine_name

    @property
    def trained_engine(self) -> str:
        """The engine the world was trained on: what a shell resets with by default."""
        return self.world.config.data.engine

    @property
    def has_twin(self) -> bool:
        return self.engine is not None

    @property
    def has_point_cache(self) -> bool:
        """Whether the world keeps a 3D point cache (its points: `memory_points`)."""
        return self.world.config.memory.cache3d != "off"

    def frame_rate(self) -> float:
        """Frames per second of game time: the twin engine's, else episodes' DEFAULT_FPS."""
        return game_fps(self.engine) if self.engine is not None else DEFAULT_FPS

    def level_area(self):
        """The twin's `ReachableArea` (DOOM's map, the procedural world's rooms) for a
        minimap, or None: no twin, an engine without a floor plan, or a map whose geometry
        cannot be read."""
        if self.engine is None or not hasattr(self.engine, "reachable_area"):
            return None
        try:
            return self.engine.reachable_area()
        except ValueError:
            return None

    def known_prompts(self) -> tuple[str, ...]:
        """The event prompts this world was trained on, sorted: the event fields of the
        caption table shipped with it (the file: the table in memory also gains every prompt
        embedded since); () for a world without one (then nothing can be told)."""
        if self._known is None:
            path = getattr(self.world, "path", None)
            file = None if path is None else Path(path) / CAPTIONS_FILE
            self._known = () if file is None or not file.is_file() else tuple(sorted(
                {cap[2] for cap in CaptionTable.load(file).table if cap[2]}))
        return self._known

    def prompt_note(self, prompt: str) -> str | None:
        """None when the world was trained on `prompt` (or cannot tell), else a sentence
        saying it was not and which prompts it knows. Not an error: the text encoder embeds
        any text, and the twin engine fires events by keyword; but the world has only
        learned what its own trained prompts do."""
        known = self.known_prompts()
        if not known or check_prompt(prompt).strip() in known:
            return None
        return (f"prompt {prompt!r} is not one this world was trained on, so it may show "
                f"nothing; it knows: {'; '.join(repr(k) for k in known)}")

    def restart(self) -> StepResult:
        """reset() again from the engine's first chunk, same seed (e.g. after the engine's
        player died); a session started from your own frames cannot: ValueError."""
        s = self._require_started()
        if s.engine_name is None:
            raise ValueError("restart needs a session reset from an engine; this one started "
                             "from your own frames: call reset(frames=...) again")
        return self.reset(engine=s.engine_name, seed=s.seed)

    def first_chunk(self) -> list:
        """The engine's observations (rgb, depth, c2w, K) of the first chunk, from opening
        the engine again at the same seed (an engine cannot be rewound): what the trivial
        baselines start from. ValueError for a session started from your own frames."""
        s = self._require_started()
        if s.engine_name is None:
            raise ValueError("first_chunk needs a session reset from an engine; this one "
                             "started from your own frames")
        engine, obs = self._open_engine(s.engine_name, s.seed)
        engine.close()
        return obs

    def set_steps(self, steps: int) -> None:
        """Sampling steps per chunk from the next chunk on (warns outside a student's)."""
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps (sampling steps) must be a positive int, got {steps!r}")
        check_sampling_steps(self.world.config, steps)
        self.steps = steps

    def status(self) -> SessionStatus:
        """The session's status as data (see `SessionStatus`)."""
        s = self._require_started()
        return SessionStatus(s.step_index, s.engine_name, self.f, self.steps,
                             self.frame_rate(), self._slow, self.pace.switched,
                             tuple(self._notes.values()))

    def _warn_unknown(self, prompt: str) -> None:
        """Warn (UnknownPromptWarning) and keep the note for `status` on an unknown prompt;
        a known one clears the note."""
        note = self.prompt_note(prompt)
        self._notes.pop("prompt", None)
        if note is not None:
            self._notes["prompt"] = note
            warnings.warn(note, UnknownPromptWarning, stacklevel=3)

    def _judge_pace(self) -> None:
        """Feed the pace policy the chunk just made: keep its note, switch if it says so."""
        verdict = self.pace.observe(self._timing.get("chunk_latency_ms", 0.0),
                                    1e3 * self.f / self.frame_rate(), self.steps)
        if verdict.switch_to is not None:
            self.set_steps(verdict.switch_to)
        if verdict.note is not None:
            self._notes["pace"] = verdict.note
        elif not verdict.slow:
            self._notes.pop("pace", None)
        self._slow = verdict.slow

    # ---- reset --------------------------------------------------------------------------

    def reset(self, engine: str | None = "doom", seed: int = 0, frames=None,
              c2w=None) -> StepResult:
        """Start from an engine's first chunk, or from your own `frames` (t, h, w, 3) uint8
        (t a multiple of chunk_frames) at poses `c2w` (t, 4, 4) (default: all at the
        origin facing +x). Returns the last context frame as step 0."""
        if frames is not None:
            rgb, poses, scene, eng, K = self._user_context(frames, c2w)
        else:
            rgb, poses, scene, eng, K = self._engine_context(engine, seed)
        stream = self._new_stream(K)
        t = len(rgb)
        actions = np.zeros((t, ACTION_WIDTH), np.float32)
        if frames is not None:  # recorded episodes pair frame 0 with a zero action too
            actions[1:] = [a.to_vector() for a in actions_from_poses(poses)]
        latents = self.world.encode(rgb)  # (1, t, c, h', w')
        text = self._text(scene, "")
        with torch.no_grad():
            for j in range(t // self.f):
                s = slice(j * self.f, (j + 1) * self.f)
                stream.append_truth(latents[:, s], self._cond(actions[s], poses[s], text),
                                    rgb[s], c2w=poses[s])
        self.close()
        self.engine = eng
        self.state = SessionState(
            stream=stream, rng=torch.Generator().manual_seed(int(seed)),
            engine_name=engine if frames is None else None, seed=seed, scene=scene,
            pose=poses[-1].copy(), gen_pose=poses[-1].copy(), last_frame=rgb[-1].copy(),
            last_twin=rgb[-1].copy() if eng is not None else None)
        self._timing = {}
        self._times.clear()
        return self.current()

    def _engine_context(self, name, seed):
        """First chunk of an engine (`_open_engine`). Returns rgb, poses, scene, the engine
        (kept as twin) or None (closed)."""
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        engine, obs = self._open_engine(name, seed)
        if not self.use_twin:
            engine.close()
            engine = None
        return (np.stack([o.rgb for o in obs]), np.stack([o.c2w for o in obs]),
                SCENES.get(name, name), engine, obs[0].K)

    def _open_engine(self, name: str, seed: int, log: bytes = b"", prompts=None):
        """An engine at its first chunk (reset + f - 1 no-op steps), then through the
        replay `log` of float64 action vectors (with `prompts` by log index); returns it and
        the first chunk's observations. Closed again if anything fails."""
        engine = make_engine(name, size=self.world.size)
        try:
            obs = [engine.reset(seed=seed)] + [engine.step(Action()) for _ in range(self.f - 1)]
            vectors = np.frombuffer(log, np.float64).reshape(-1, ACTION_WIDTH)
            for i, vec in enumerate(vectors):
                engine.step(Action.from_vector(vec), (prompts or {}).get(i))
        except BaseException:
            engine.close()
            raise
        return engine, obs

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
        return rgb, np.array(poses), scene, None, intrinsics_from_fov(s, s, 90.0)

    def _new_stream(self, K) -> Stream:
        """An empty stream of the world (with its memory, if any), cameras K (3, 3)."""
        if self.world.config.memory.cache3d == "oracle":
            raise ValueError("memory.cache3d='oracle' fuses the engine's depth, which play "
                             "does not read: play a world with cache3d='own' (its depth head)")
        return world_stream(self.world, K)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    # ---- step ---------------------------------------------------------------------------

    def step(self, action, prompt: str | None = None) -> StepResult:
        """Advance one frame. Bad input raises ValueError and changes nothing."""
        t_call = time.perf_counter()
        s = self._require_started()
        action = check_action(action)
        if prompt is not None:
            check_prompt(prompt)
            self._warn_unknown(prompt)
        if self.policy == "hold":
            chunk = [action] * self.f if not s.queue else None
        else:
            chunk = [a for a, _ in s.buffered] + [action]
            chunk = chunk if len(chunk) == self.f else None
        if chunk is not None:
            fresh = prompt if prompt is not None else s.pending
            oldest = s.buffered[0][1] if s.buffered else t_call  # "buffer" only
            self._generate(chunk, fresh, oldest)  # changes nothing unless it succeeds
            self._judge_pace()
            s.event, s.pending = fresh or s.event, None
            s.buffered = []
        elif prompt is not None:
            s.pending = prompt
        if chunk is None and self.policy == "buffer":
            s.buffered.append((action, t_call))
        s.step_index += 1
        if s.queue:
            s.last_frame, s.pose, s.last_twin, t_issued = s.queue.popleft()
            s.on_screen = "generated"
        else:  # "buffer" before its first chunk: the last context frame stays on screen
            t_issued = None
        self._times.append(time.perf_counter() - t_call)
        stats = self.stats(t_issued)
        stats["applied"] = self.policy == "buffer" or chunk is not None
        return StepResult(s.last_frame, s.pose, s.step_index, s.last_twin, stats)

    def step_chunk(self, action, prompt: str | None = None) -> list[StepResult]:
        """One key press: a step with `action`, then, under "hold", the steps that hand out
        the rest of the chunk it opened (the same action, which conditions nothing more),
        so every press plays its chunk. Under "buffer" every action counts: one step."""
        results = [self.step(action, prompt)]
        while self.policy == "hold" and self.state.queue:
            results.append(self.step(action))
        return results

    @torch.no_grad()
    def warm_up(self) -> float:
        """Make one chunk and throw it away; returns its seconds. A process's first chunk
        pays for start-up (thread pools, kernel choice, allocations), so a shell calls this
        before the first key press. Changes nothing: the chunk is sampled with its own
        noise, never appended or shown, and the cache is put back as it was (a chunk waiting
        for its K/V waits on, so the next chunk computes them as it would have); the twin is
        not stepped."""
        s, world, t0 = self._require_started(), self.world, time.perf_counter()
        before = s.stream.snapshot()
        still = np.broadcast_to(s.gen_pose, (self.f, 4, 4))  # (f, 4, 4) standing still
        cond = self._cond(np.zeros((self.f, ACTION_WIDTH), np.float32), still,
                          self._text(s.scene, s.event))
        noise = torch.randn((1, self.f, *self._latent_shape()),
                            generator=torch.Generator().manual_seed(0))
        try:
            world.decode(s.stream.generate(noise.to(world.device), cond, self.steps))
            _sync(world.device)
        finally:
            s.stream.restore(before)
        rss_mb()  # its first call imports psutil
        return time.perf_counter() - t0

    @torch.no_grad()  # without it the cache would keep every chunk's autograd history
    def _generate(self, actions: list[Action], fresh: str | None, t_issued: float) -> None:
        """Make one chunk from f actions (with a fresh prompt or None) and queue its frames.

        All or nothing: if anything fails or is interrupted (Ctrl-C) the RNG and the KV cache
        are put back, and a twin that already stepped is rebuilt at the previous step by
        replaying its log (the log grows only once the chunk is made)."""
        world, s, t0 = self.world, self.state, time.perf_counter()
        poses = None if self.engine is not None else self._integrate(actions)
        text = self._text(s.scene, fresh or s.event)  # a new prompt is encoded once, cached
        before = (s.rng.get_state(), s.stream.snapshot())
        t_text = time.perf_counter()
        try:
            twin = self._step_twin(actions, fresh) if self.engine is not None else None
            t1 = time.perf_counter()
            poses = twin[1] if twin is not None else poses
            vec = np.stack([a.to_vector() for a in actions])  # (f, a)
            cond = self._cond(vec, poses, text)
            noise = torch.randn((1, self.f, *self._latent_shape()), generator=s.rng)
            # memory read, the chunk appended (its K/V are computed with the next chunk)
            x0 = s.stream.step(noise.to(world.device), cond, self.steps, s.rng)
            _sync(world.device)
            t2 = time.perf_counter()
            frames = world.decode(x0)
            t_decoded = time.perf_counter()
            # (f, h, w, 3) into the 3D cache (and painted with it), if the world keeps one
            frames = s.stream.show(frames)
        except BaseException:
            s.rng.set_state(before[0])
            s.stream.restore(before[1])
            if self.engine is not None:
                self._rewind_twin()
            raise
        t3 = time.perf_counter()
        if twin is not None:
            self._log(actions, fresh)
        s.gen_pose = poses[-1].copy()
        for i in range(self.f):
            s.queue.append((frames[i], poses[i], None if twin is None else twin[0][i],
                            t_issued if i == 0 else None))
        self._timing = {"text_ms": 1e3 * (t_text - t0), "engine_ms": 1e3 * (t1 - t_text),
                        "transformer_ms": 1e3 * (t2 - t1), "decode_ms": 1e3 * (t_decoded - t2),
                        "memory_ms": 1e3 * (t3 - t_decoded), "chunk_latency_ms": 1e3 * (t3 - t0)}

    def _integrate(self, actions: list[Action]) -> np.ndarray:
        """Poses (f, 4, 4) after each action, from the last generated pose."""
        pose, out = self.state.gen_pose, []
        for a in actions:
            pose = step_pose(pose, a)
            out.append(pose)
        return np.stack(out)

    def _step_twin(self, actions: list[Action], prompt: str | None):
        """Step the engine f times; a fresh prompt goes in with the chunk's first frame."""
        obs = [self.engine.step(a, prompt if i == 0 else None) for i, a in enumerate(actions)]
        return np.stack([o.rgb for o in obs]), np.stack([o.c2w for o in obs])

    def _log(self, actions: list[Action], prompt: str | None) -> None:
        """Append a made chunk's actions (and its fresh prompt) to the twin's replay log."""
        s = self.state
        if prompt is not None:
            s.log_prompts[len(s.log) // LOG_BYTES] = prompt
        for a in actions:
            s.log += action_vector(a).tobytes()

    def _rewind_twin(self) -> None:
        """Rebuild the twin at the last logged step, after a chunk failed half way."""
        broken, self.engine = self.engine, None
        broken.close()
        try:
            self.engine = self._replay(self.state)
        except BaseException as e:
            raise RuntimeError("a chunk failed and its engine twin could not be rebuilt; "
                               "call reset() or load()") from e

    # ---- conditioning -------------------------------------------------------------------

    def _latent_shape(self) -> tuple[int, int, int]:
        cfg = self.world.model.config
        return cfg.latent_channels, cfg.latent_size, cfg.latent_size  # (c, h', w')

    def _text(self, scene: str, event: str) -> torch.Tensor:
        """The chunk's caption (scene, character, event) -> (1, k, e)."""
        return self.world.embed([(scene, CHARACTER, event)])[:, 0]

    def _cond(self, actions: np.ndarray, poses: np.ndarray, text: torch.Tensor) -> dict:
        """The model's conditioning (batch 1), copied into torch's own aligned memory (not
        numpy's): a kernel's last bits can depend on where its input sits, and a session
        resumed from a save must make the same numbers as the live one."""
        dev = self.world.device
        return {"actions": torch.tensor(np.asarray(actions, np.float32), device=dev)[None],
                "c2w": torch.tensor(np.asarray(poses, np.float32), device=dev)[None],
                "text": text}

    # ---- stats --------------------------------------------------------------------------

    def cache_chunks(self) -> int:
        """Chunks held in the KV cache now, a pending one included (at most window_chunks)."""
        cache = self._require_started().stream.cache
        held = 0 if cache.keys[0] is None else cache.keys[0].shape[2] // (
            self.f * self.world.model.grid ** 2)
        return min(held + (cache.pending is not None), self.world.model.config.window_chunks)

    def stats(self, t_issued: float | None = None) -> dict:
        """The stats line of the frame on screen (key_to_pixel_ms when `t_issued` is given)."""
        s = self._require_started()
        busy = sum(self._times)
        stats = {"step": s.step_index,
                 "fps": len(self._times) / busy if busy > 0 else float("nan"),
                 "step_ms": 1e3 * self._times[-1] if self._times else float("nan"),
                 "cache_chunks": self.cache_chunks(), "chunks": s.stream.cache.chunks,
                 "event": s.event, "pending_prompt": s.pending,
                 "rss_mb": rss_mb(), **self._timing,
                 "key_to_pixel_ms": None if t_issued is None else
                 1e3 * (time.perf_counter() - t_issued)}
        # PSNR only scores generated frames; a context frame is the engine's own
        stats["psnr"] = float(frame_psnr(s.last_frame[None], s.last_twin[None])[0]) \
            if s.last_twin is not None and s.on_screen == "generated" else None
        return stats

    def memory_points(self, max_points: int = MAP_POINTS) -> np.ndarray:
        """The 3D cache's points (n, 3) in world metres (every k-th, at most `max_points`),
        for a minimap; (0, 3) for a world without a 3D cache."""
        points = self._require_started().stream.points
        if points is None:
            return np.zeros((0, 3))
        pts = points.points
        return pts[::max(1, -(-len(pts) // max_points))]

    # ---- save / load --------------------------------------------------------------------

    def snapshot(self) -> tuple[dict[str, torch.Tensor], dict]:
        """Everything a resumed session needs: (tensors, JSON-able metadata). Changes
        nothing: a chunk waiting in the cache for its K/V is saved as its inputs."""
        tensors, meta = self._require_started().to_tensors()
        meta.update(policy=self.policy, steps=self.steps, twin=self.engine is not None,
                    size=self.world.size, model=self._model_config(),
                    memory_config=dataclasses.asdict(self.world.config.memory))
        return tensors, meta

    def save(self, path) -> Path:
        """Write the session to a folder (state.safetensors + session.json), atomically.
        Only a new (or empty) folder or a previous session save is written to; anything
        else at `path` is refused with `saved.SaveError` and left as it was."""
        tensors, meta = self.snapshot()
        return saved.write(path, tensors, meta)

    def load(self, path) -> None:
        """Restore a saved session into this one (same world). Every field of the save is
        read and checked before anything changes (`saved.check_meta`, `check_tensors`); a
        session with a twin rebuilds its engine by replaying the saved log (engines cannot
        be snapshotted), also before the current twin is closed."""
        path = Path(path)
        tensors, meta = saved.read(path)
        where = path / saved.META_FILE
        saved.check_meta(meta, where)
        mine = {**self._model_config(), "size": self.world.size}
        for key, value in {**meta["model"], "size": meta["size"]}.items():
            if mine.get(key) != value:
                raise saved.SaveError(f"{where}: the saved session has model {key}={value!r}; "
                                      f"this world has {key}={mine.get(key)!r}")
        saved.check_memory(meta, dataclasses.asdict(self.world.config.memory), where)
        saved.check_tensors(tensors, meta, self.world.model, self.world.size,
                            path / saved.STATE_FILE)
        K = tensors["memory.K"].numpy() if "memory.K" in tensors else None
        state = SessionState.from_tensors(tensors, meta, self._new_stream(K))
        engine = self._replay(state) if meta["twin"] else None
        self.close()
        self.engine, self.state = engine, state
        self.policy, self.steps = meta["policy"], meta["steps"]
        self._times.clear()

    def _model_config(self) -> dict:
        """The world model's architecture as JSON values (diffusers' own keys left out)."""
        cfg = {k: v for k, v in self.world.model.config.items() if not k.startswith("_")}
        return json.loads(json.dumps(cfg))

    def _replay(self, state: SessionState):
        """A fresh engine brought to the state's step by replaying its log."""
        return self._open_engine(state.engine_name, state.seed, bytes(state.log),
                                 state.log_prompts)[0]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":  # honest timings: wait for the kernels
        torch.cuda.synchronize(device)
