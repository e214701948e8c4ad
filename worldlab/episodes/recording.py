"""Record episodes from an engine with a scripted player (the `data` command is in
`episodes.cli`).

`record_episode` is the pure core (no progress bars). `record_many` shards seeds over worker
processes, one engine per process: episode k uses seed `seed + k` and is stored as
`<engine>-<seed>`, so the same command gives the same episodes whatever the worker count.

Starts (`STARTS`): "player" resets the engine at its own start (DOOM: the map's player
start), "random" at `engine.start_options(seed)`, a start drawn from the seed anywhere on
the level, so a dataset covers the level and not only the rooms near the player start.
With several maps, the seed picks one (`map_of`). Everything an episode is, its map, start
and path, follows from the seed: the same seed gives the same episode.

Shape names: t time, a action width.
"""

from __future__ import annotations

import inspect
import multiprocessing as mp
import multiprocessing.util
import signal
from collections import Counter

import numpy as np

from ..camera import ACTION_FIELDS, ACTION_WIDTH, heading_from_pose, wrap_degrees
from ..config import STARTS
from ..engines import Engine, Event, engine_class, make_engine
from ..engines.coverage import coverage
from ..engines.policies import (MIX_SCHEDULE, POLICIES, WithPrompts, check_event_schedule,
                                make_policy, with_events)
from .schema import Episode, make_meta, prompts_from_steps
from .store import EpisodeStore

DOOM_TICS_PER_SECOND = 35.0  # DOOM's fixed game clock
DEFAULT_FPS = 8.75  # DOOM's pace at its default 4 tics per step
CHARACTER = "a first-person player"  # the caption's character field for every engine
SCENES = {"doom": "a DOOM level (Freedoom): corridors, rooms, stairs and doors",
          "procedural": "a grid of furnished rooms joined by corridors, each room with its "
                        "own wall and floor colours"}  # the caption's scene field


def game_fps(engine: Engine) -> float:
    """Steps per second of game time: the engine's `fps` if it has one, else DOOM's 35 tics
    per second over its tics per step, else DEFAULT_FPS (the procedural engine has no clock;
    its 0.25 m steps at this rate are a walking pace of ~2 m/s)."""
    if hasattr(engine, "fps"):
        return float(engine.fps)
    if hasattr(engine, "tics"):
        return DOOM_TICS_PER_SECOND / engine.tics
    return DEFAULT_FPS


# ----------------------------------------------------------------------------------------
# Recording one episode
# ----------------------------------------------------------------------------------------


def _episode_end_error(engine: Engine) -> tuple[type, ...]:
    """The exception an engine raises when its game ends early (DOOM: `EpisodeFinished`,
    the player died or left the map); `()` for engines whose episodes never end."""
    error = getattr(inspect.getmodule(engine), "EpisodeFinished", None)
    return (error,) if isinstance(error, type) else ()


def _check_start(start: str) -> str:
    if start not in STARTS:
        raise ValueError(f"unknown start {start!r}; expected one of {STARTS}")
    return start


def _check_policy(policy: str) -> str:
    if policy != "mix" and policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; expected one of {sorted(POLICIES)} "
                         f"or 'mix'")
    return policy


def map_of(seed: int, maps: tuple[str, ...]) -> str:
    """The map episode `seed` plays: consecutive seeds take the maps in turn, shifted by one
    every len(MIX_SCHEDULE) seeds, so that with policy "mix" every policy visits every map
    (seed % len(maps) alone would never send turn_around to MAP01 of two maps)."""
    cycle = len(MIX_SCHEDULE)
    return maps[(seed % cycle + seed // cycle) % len(maps)]


def _reset_options(engine: Engine, seed: int, start: str, map: str | None) -> dict:
    """The `engine.reset` options of an episode: `map` if given (an engine with maps has a
    `map` attribute, DOOM's), and for a random start `engine.start_options(seed)` there."""
    if map is not None and not hasattr(engine, "map"):
        raise ValueError(f"map {map!r} given, but the {engine.name!r} engine has no maps")
    options = {} if map is None else {"map": map}
    if _check_start(start) == "random":
        if not hasattr(engine, "start_options"):
            raise ValueError(f"start 'random' needs an engine with start_options(seed); "
                             f"{engine.name!r} has none, use start 'player'")
        options.update(engine.start_options(seed, **options))
    return options


def _play(engine: Engine, player, seed: int, frames: int, options: dict,
          callback) -> tuple[list, list, list, list, str | None]:
    """(observations, actions, prompts, events, why it ended early or None)."""
    obs = engine.reset(seed=seed, **options)
    observations, actions, prompts = [obs], [np.zeros(ACTION_WIDTH, np.float32)], [None]
    events = [Event(e.name, e.text, 0) for e in obs.events]
    if callback is not None:
        callback(0, obs)
    for i in range(1, frames):
        action, prompt = player.act(obs)
        try:
            obs = engine.step(action, prompt)
        except _episode_end_error(engine) as e:  # keep the frames played so far
            return observations, actions, prompts, events, str(e)
        observations.append(obs)
        actions.append(action.to_vector())
        prompts.append(prompt)
        # stamp with the frame index: the engine's own step counter may start elsewhere
        events += [Event(e.name, e.text, i) for e in obs.events]
        if callback is not None:
            callback(i, obs)
    return observations, actions, prompts, events, None


def record_with(engine: Engine, seed: int, frames: int, policy: str = "mix",
                event_rate: float = 0.0, callback=None, *, start: str = "player",
                map: str | None = None, prompts: dict[int, str] | None = None,
                event_every: int = 1, event_kinds: tuple[str, ...] | None = None) -> Episode:
    """Play `frames - 1` steps of `policy` on an open engine from `engine.reset(seed)`.

    `start` "random" starts at `engine.start_options(seed)`; `map` (engines with maps)
    switches the engine to it first; `prompts` {step: text} adds those prompts at those
    steps (scripted events). Event prompts come at `event_rate` per `event_every`-th step,
    of the events `event_kinds` only when given (`policies.with_events`). Meta records
    `start`, `map`, the engine's `monsters` and `walls` (None for an engine without them),
    `start_pose` [x, y, yaw] of frame 0 and a schedule other than every step's. If
    the game ends early (DOOM: the player died) the episode is shorter and meta `ended`
    says why. `callback(i, obs)` is called with every frame i, frame 0 too.
    """
    if not (isinstance(frames, int) and frames >= 1):
        raise ValueError(f"frames must be a positive integer, got {frames!r}")
    player = make_policy(_check_policy(policy), seed)
    options = _reset_options(engine, seed, start, map)
    if event_rate > 0:
        player = with_events(player, engine.events, event_rate, seed, event_every,
                             event_kinds)
    if prompts:
        player = WithPrompts(player, prompts)
    player.reset(seed, frames - 1)
    observations, actions, prompts, events, ended = _play(engine, player, seed, frames,
                                                          options, callback)
    stack = lambda k: np.stack([getattr(o, k) for o in observations])  # noqa: E731
    instance = None if observations[0].instance is None else stack("instance").astype(np.int32)
    position, yaw, _ = heading_from_pose(observations[0].c2w)
    meta = make_meta(engine.name, game_fps(engine), map=getattr(engine, "map", None),
                     seed=seed, policy=player.name, size=int(observations[0].rgb.shape[0]),
                     event_rate=event_rate, ended=ended, start=start,
                     monsters=getattr(engine, "monsters", None),
                     walls=getattr(engine, "walls", None),
                     start_pose=[float(position[0]), float(position[1]), float(yaw)],
                     **_event_schedule(event_every, event_kinds))
    scene = SCENES.get(engine.name, engine.name)
    episode = Episode(rgb=stack("rgb"), depth=stack("depth").astype(np.float32),
                      c2w=stack("c2w").astype(np.float64), K=stack("K").astype(np.float64),
                      actions=np.stack(actions), instance=instance,
                      prompts=prompts_from_steps(prompts, scene, CHARACTER),
                      events=events, meta=meta)
    try:
        return episode.validate()
    except ValueError as e:  # an engine bug: say which recording shows it
        where = f" of {meta['map']}" if meta.get("map") else ""
        raise ValueError(f"the {engine.name} recording of seed {seed}{where} ({policy}, start "
                         f"{start}, {len(observations)} frames): {e}") from e


def _event_schedule(every: int, kinds) -> dict:
    """The meta fields of a non-default event schedule (none for every step, all kinds:
    the meta of earlier recordings)."""
    return {**({"event_every": every} if every != 1 else {}),
            **({"event_kinds": list(kinds)} if kinds is not None else {})}


def record_episode(engine_name: str, seed: int, frames: int, size: int, policy: str = "mix",
                   event_rate: float = 0.0, *, start: str = "player", map: str | None = None,
                   prompts: dict[int, str] | None = None, callback=None,
                   **engine_opts) -> Episode:
    """Open an engine, record one episode (`record_with`), close the engine."""
    engine = make_engine(engine_name, size=size, **engine_opts)
    try:
        return record_with(engine, seed, frames, policy, event_rate, callback, start=start,
                           map=map, prompts=prompts)
    finally:
        engine.close()


# ----------------------------------------------------------------------------------------
# Many episodes over worker processes (one engine each)
# ----------------------------------------------------------------------------------------

_WORKER: dict = {}  # the engine of this worker process


def _init_worker(engine_name: str, size: int, engine_opts: dict) -> None:
    engine = _WORKER["engine"] = make_engine(engine_name, size=size, **engine_opts)
    # close the engine when the worker exits, also when the pool terminates it (SIGTERM):
    # otherwise DOOM's game process outlives the worker
    mp.util.Finalize(None, engine.close, exitpriority=10)
    signal.signal(signal.SIGTERM, _exit_worker)


def _exit_worker(signum, frame) -> None:
    raise SystemExit(0)  # unwinds to multiprocessing's exit handlers, which run Finalize


def _record_seed(job: tuple) -> tuple[int, Episode]:
    seed, frames, policy, event_rate, start, map, every, kinds = job
    return seed, record_with(_WORKER["engine"], seed, frames, policy, event_rate,
                             start=start, map=map, event_every=every, event_kinds=kinds)


def record_many(store: EpisodeStore, engine_name: str, seeds: list[int], frames: int,
                size: int, policy: str = "mix", event_rate: float = 0.0, workers: int = 1,
                callback=None, overwrite: bool = False, *, start: str = "player",
                maps: tuple[str, ...] | None = None, event_every: int = 1,
                event_kinds: tuple[str, ...] | None = None, **engine_opts) -> list[str]:
    """Record one episode per seed into `store` as `<engine>-<seed>`; return the ids.

    `start`, `event_every` and `event_kinds` as in `record_with` (a bad schedule fails
    before anything is written); with `maps` (engines with maps), seed s plays
    `map_of(s, maps)`. Unless `overwrite`, fails before recording anything if one of the
    ids exists. `callback(id)` after each write. Workers are forked (not spawned: `python
    -m worldlab` is not import-safe as a main module, and forking skips re-importing torch
    in every worker).
    """
    if not (isinstance(workers, int) and workers >= 1):
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    _check_policy(policy)
    _check_start(start)
    check_event_schedule(engine_class(engine_name).events, event_rate, event_every,
                         event_kinds)
    if maps is not None and (isinstance(maps, str) or not maps
                             or not all(isinstance(m, str) and m for m in maps)):
        raise ValueError(f"maps must be a non-empty tuple of map names, got {maps!r}")
    ids = [f"{engine_name}-{s:06d}" for s in seeds]
    taken = [i for i in ids if store.path(i).exists()]
    if taken and not overwrite:
        raise ValueError(f"episode {taken[0]!r} already exists in {store.root}; choose "
                         f"another --seed or --out")
    jobs = [(s, frames, policy, event_rate, start, None if maps is None else map_of(s, maps),
             event_every, event_kinds) for s in seeds]
    if workers == 1:
        _init_worker(engine_name, size, engine_opts)
        try:
            results = map(_record_seed, jobs)
            _write_all(store, engine_name, results, callback, overwrite)
        finally:
            _WORKER.pop("engine").close()
        return ids
    ctx = mp.get_context("fork")
    with ctx.Pool(workers, _init_worker, (engine_name, size, engine_opts)) as pool:
        _write_all(store, engine_name, pool.imap(_record_seed, jobs), callback, overwrite)
        pool.close()  # let the workers exit on their own (closing their engines)
        pool.join()
    return ids


def _write_all(store: EpisodeStore, engine_name: str, results, callback,
               overwrite: bool) -> None:
    for seed, episode in results:
        episode_id = store.write(episode, f"{engine_name}-{seed:06d}", overwrite=overwrite)
        if callback is not None:
            callback(episode_id)


# ----------------------------------------------------------------------------------------
# Statistics: action histograms, revisits
# ----------------------------------------------------------------------------------------


def revisit_pairs(c2w: np.ndarray, radius_m: float = 0.5, max_yaw_deg: float = 30.0,
                  min_gap: int = 8) -> list[tuple[int, int]]:
    """(i, j) frame pairs, j - i >= min_gap, where frame j stands within `radius_m` of frame
    i's position and faces within `max_yaw_deg` of its heading: a place seen again."""
    pos = c2w[:, :3, 3]  # (t, 3)
    yaw = np.degrees(np.arctan2(c2w[:, 1, 2], c2w[:, 0, 2]))  # (t,) forward axis heading
    dist = np.linalg.norm(pos[:, None] - pos[None], axis=-1)  # (t, t)
    turn = np.abs(wrap_degrees(yaw[:, None] - yaw[None]))  # (t, t)
    gap = np.arange(len(c2w))[None] - np.arange(len(c2w))[:, None]  # j - i
    i, j = np.nonzero((dist <= radius_m) & (turn <= max_yaw_deg) & (gap >= min_gap))
    return list(zip(i.tolist(), j.tolist()))


def dataset_stats(store: EpisodeStore, **revisit) -> dict:
    """Actions (n, a) over all steps (frame 0 excluded), revisited frames per episode,
    episodes per policy and event counts."""
    actions, revisits, policies, events = [], {}, Counter(), Counter()
    for i in store.ids():
        ep = store.read(i)
        actions.append(ep.actions[1:])
        revisits[i] = len({j for _, j in revisit_pairs(ep.c2w, **revisit)})
        policies[ep.meta.get("policy")] += 1
        events.update(e.name for e in ep.events)
    return {"actions": np.concatenate(actions) if actions else np.zeros((0, ACTION_WIDTH)),
            "fields": ACTION_FIELDS, "revisited_frames": revisits,
            "policies": dict(policies), "events": dict(events)}


def level_coverage(store: EpisodeStore, engine, radius_m: float = 1.0) -> dict[str, dict]:
    """Per map of an engine with a reachable area (DOOM): the positions the store's episodes
    visited (n, 2) metres, the map's `area` and the coverage report (`engines.coverage`:
    `share_of_reachable_area`, ...). An episode's map comes from its meta."""
    if not hasattr(engine, "reachable_area") or getattr(engine, "map", None) is None:
        raise ValueError(f"engine {engine.name!r} has no reachable area of named maps; "
                         f"expected one with reachable_area(map), e.g. doom")
    visited: dict[str, list] = {}
    for i in store.ids():
        ep = store.read(i)
        visited.setdefault(ep.meta.get("map") or engine.map, []).append(ep.c2w[:, :2, 3])
    out = {}
    for name, parts in sorted(visited.items()):
        area, xy = engine.reachable_area(name), np.concatenate(parts)
        out[name] = {"area": area, "positions": xy, **coverage(area, xy, radius_m)}
    return out


def format_index(store: EpisodeStore) -> str:
    """A human summary of a store's index."""
    index = store.index
    frames = sum(e["frames"] for e in index.values())
    lines = [f"{store.root}: {len(index)} episodes, {frames} frames"]
    for key in ("engine", "policy", "size"):
        counts = Counter(str(e.get(key)) for e in index.values())
        lines.append(f"  {key:7s} " + ", ".join(f"{k} x{n}" for k, n in sorted(counts.items())))
    events = Counter(n for e in index.values() for n in e["events"])
    lines.append("  events  " + (", ".join(f"{k} x{n}" for k, n in sorted(events.items()))
                                 or "none"))
    return "\n".join(lines)
