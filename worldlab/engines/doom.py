"""DOOM as a ground-truth engine: ViZDoom with the Freedoom WADs shipped in its wheel.

Every step renders RGB, metric z-depth, a per-pixel instance map, the camera pose (c2w) and
intrinsics K in worldlab's conventions (`worldlab.camera`), deterministically for a seed:
the same seed and actions give bit-identical frames, depth and poses, across processes.

Camera (measured with ViZDoom 1.3.2 on freedoom2 MAP01). DOOM draws 4:3 frames W x H with a
90-degree horizontal field of view and pixels 1.2 times taller than wide. We convert map
units to metres with 32 units per metre horizontally and 32 / 1.2 = 26.67 vertically
(`doom_level.UNITS_PER_M_Z`), which makes the pixels square: fx = fy = W / 2. Looking up or
down in DOOM *shears* the image instead of rotating the camera, so the pose stays level
(pitch 0 in c2w) and the look moves the principal point: cy = H / 2 + 1.2 fx tan(pitch),
pitch in degrees above the horizon (ViZDoom's PITCH is positive looking down; the 1.2 is
the vertical scale: the shear is a slope in map units). K is therefore per frame; the look
does not appear in c2w, so poses recover no pitch: read it from K.

Square frames: the W x H render is centre-cropped to H x H (cx moves to H / 2), then resized
to `size` x `size` (box filter when shrinking). The crop keeps square pixels and gives a
73.7 x 73.7-degree view at zero pitch; K is scaled by size / H.

Depth: ray cast of the level mesh (`doom_level.LevelMesh`) with the frame's own K and c2w,
at the output resolution; sprite pixels (labels buffer value >= 2) take ViZDoom's uint8
depth buffer instead, calibrated as units = 7.16 (buffer + 1.2) (fit on static pixels; the
buffer is linear in horizontal distance). Mesh vs buffer on static pixels closer than 20 m,
60 random steps: median relative difference 3.6% (p90 13%) at 160x120, 2.8% (p90 10.5%) at
320x240, i.e. the buffer's own rounding of 7.16 units plus edge pixels. Warping frame j into
frame i (4-6 steps apart, 64 px, sprites excluded, `cache3d.reprojection_error`): median
colour error 6.0 of 255 with DOOM's light (10.3 unwarped), 1.0 with `flat_light` (5.6).
Sky: sectors whose ceiling flat is F_SKY* are left open in the mesh, so their sky pixels get
depth inf (tested in MAP01's courtyard: `reset(position=...)` there, look up). `instance` =
ViZDoom object id + 1 on sprite pixels, 0 on level geometry; `things` names the monsters
among them: "imp" (DoomImp, what a summon prompt brings) or "monster" (any other).

Actions (calibrated here, one step = `tics` game tics, default 4 = 8.75 steps per second):
- turn: TURN_LEFT_RIGHT_DELTA is degrees per tic, positive = right, so delta = -yaw / tics.
- look: LOOK_UP_DOWN_DELTA is degrees per tic, positive = up; DOOM clamps the look to
  [-56, +32] degrees (down, up).
- move: MOVE_FORWARD_BACKWARD_DELTA / MOVE_LEFT_RIGHT_DELTA set the thrust per tic; with
  DOOM's friction (0.90625 per tic) the terminal speed is delta / 3 map units per tic, so
  delta = forward_m * 32 * 3 / tics. Walking has momentum: the player reaches ~90% of the
  commanded speed after 6 steps (1 - 0.90625^(4n)) and keeps sliding after the command
  stops. The recorded pose is the ground truth; the action is only the command.

Prompts fire events through the game (`DOOM_EVENTS`): summon an imp ~56 units ahead
(`summon DoomImp`), fire the weapon (attack), open a door (use). `flat_light=True` sets
`r_visibility 0`, a ZDoom renderer setting that turns off DOOM's distance-dependent light,
so a surface has one colour from every viewpoint (warping frames then matches to the pixel).

Starts: `reset(seed, position=(x, y), yaw=deg)` starts anywhere on the map's reachable
floor (`reachable_area()`, read from the WAD by DOOM's movement rules in `doom_level`):
ZDoom's `warp` (whole map units) puts the player on the floor there, and the last settle
tic turns it to `yaw` (measured: the pose matches to 0.005 degrees). `start_options(seed)`
draws such a start at random, so a dataset covers the whole level, not only the rooms
near the player start. Monsters: "off" (`-nomonsters`), "on", or "invulnerable": monsters
as usual, but ZDoom's `god` cheat, sent after every new episode (it ends with the episode),
keeps the player's health at 100, so a long walk among monsters never dies. An episode
still ends when the player leaves the level (an exit switch or line).

Maps: TRAIN_MAPS MAP01-MAP03 of freedoom2 and HELDOUT_MAP MAP04 for generalisation. Their
reachable floors are 2810, 3203, 4035 and 3572 m^2, i.e. 78%, 97%, 60% and 99% of the
floor a player fits on (the rest lies behind switch-raised stairs and the like).

Process: ViZDoom plays in a `vizdoom` child process that ignores SIGTERM. `close()` ends it
(idempotent; `with DoomEngine(...) as e:` closes too, and so do garbage collection and
interpreter exit), and `reaper`'s watchdog kills it when this process dies without closing
(SIGKILL, a killed notebook kernel, `os._exit`), with the shared memory it leaves in
/dev/shm.

Shape names: h w height width.
"""

from __future__ import annotations

import math
import os
import weakref
from pathlib import Path

import numpy as np
import psutil
import vizdoom as vzd
from PIL import Image

from ..camera import Action, pose_from_heading
from ..config import MONSTERS
from . import reaper
from .base import START_STREAM, Event, EventSpec, Observation, match_event
from .coverage import ReachableArea
from .doom_level import (PLAYER_RADIUS, UNITS_PER_M_XY, UNITS_PER_M_Z, LevelMesh, MapData,
                         map_names, random_start, reachable_area, read_map)

WAD_DIR = Path(vzd.__file__).resolve().parent
SHARED_MEMORY = Path("/dev/shm")  # where ViZDoom's shared memory and queues live (Linux)
FRICTION_SPEED = 3.0  # terminal speed = delta / 3 map units per tic (friction 0.90625)
DEPTH_BUFFER_UNITS = 7.16  # map units per uint8 depth-buffer step (measured, see above)
DEPTH_BUFFER_OFFSET = 1.2  # buffer steps to add before scaling (fit on static pixels)
SETTLE_TICS = 8  # input is ignored until ~7 tics into an episode (measured: 8 and 12 agree)
TRAIN_MAPS = ("MAP01", "MAP02", "MAP03")  # freedoom2 maps to train on (areas: module doc)
HELDOUT_MAP = "MAP04"  # a freedoom2 map no training episode visits, for generalisation

DOOM_EVENTS: tuple[EventSpec, ...] = (
    EventSpec("summon_monster", ("imp", "monster", "summon", "demon", "enemy"),
              "an imp appears about 1.75 m ahead of the player"),
    EventSpec("attack", ("fire", "shoot", "attack"),
              "the player fires the weapon (from the second step of a level on)"),
    EventSpec("use", ("open", "door", "use", "switch"), "the player presses use (doors)"),
)

# the characters of `Observation.things`: the imp (what a summon prompt brings) and every
# other monster of DOOM II (Freedoom's MAP01-04 have zombies, demons and imps)
CHARACTERS = {"DoomImp": "imp"}
MONSTER_NAMES = frozenset({
    "DoomImp", "Zombieman", "ShotgunGuy", "ChaingunGuy", "Demon", "Spectre", "LostSoul",
    "Cacodemon", "HellKnight", "BaronOfHell", "Arachnotron", "PainElemental", "Revenant",
    "Fatso", "Archvile", "SpiderMastermind", "Cyberdemon", "WolfensteinSS"})

_BUTTONS = (vzd.Button.MOVE_FORWARD_BACKWARD_DELTA, vzd.Button.MOVE_LEFT_RIGHT_DELTA,
            vzd.Button.TURN_LEFT_RIGHT_DELTA, vzd.Button.LOOK_UP_DOWN_DELTA,
            vzd.Button.ATTACK, vzd.Button.USE, vzd.Button.JUMP)
_VARIABLES = (vzd.GameVariable.CAMERA_POSITION_X, vzd.GameVariable.CAMERA_POSITION_Y,
              vzd.GameVariable.CAMERA_POSITION_Z, vzd.GameVariable.ANGLE,
              vzd.GameVariable.PITCH)


class EpisodeFinished(RuntimeError):
    """The DOOM episode ended (the player died or left the level); call reset()."""


# ----------------------------------------------------------------------------------------
# Validation of the constructor's choices
# ----------------------------------------------------------------------------------------


def check_maps(names, wad: str = "freedoom2") -> None:
    """Each of names a map of the WAD, else a ValueError naming it (before an engine starts:
    `data record` checks its --maps before it writes anything)."""
    path = _wad_path(wad)
    maps = map_names(path)
    for name in names:
        _check_map(name, path, maps)


def _check_map(name: str, wad_path: Path, maps: list[str]) -> str:
    if name not in maps:
        raise ValueError(f"unknown map {name!r} in {wad_path.name}; expected one of {maps}")
    return name


def _wad_path(wad: str) -> Path:
    shipped = sorted(p.stem for p in WAD_DIR.glob("*.wad"))
    path = WAD_DIR / f"{wad}.wad" if wad in shipped else Path(wad)
    if not (path.suffix.lower() == ".wad" and path.is_file()):
        raise ValueError(f"unknown wad {wad!r}; expected one of {shipped} or a path to a "
                         f".wad file")
    return path


def _resolution(render_size, size: int):
    if render_size is None:  # the smallest 4:3 render at least `size` tall
        heights = [120, 150, 192, 240, 300, 384, 480, 600, 768, 960, 1200]
        h = next((h for h in heights if h >= size), heights[-1])
        render_size = (h * 4 // 3, h)
    w, h = render_size
    name = f"RES_{w}X{h}"
    if 3 * w != 4 * h or not hasattr(vzd.ScreenResolution, name):
        raise ValueError(f"render_size {tuple(render_size)!r} must be a 4:3 ViZDoom "
                         f"resolution such as (160, 120), (320, 240), (640, 480)")
    return (w, h), getattr(vzd.ScreenResolution, name)


def _nearest_index(size: int, h: int, offset: int) -> np.ndarray:
    """Source index (size,) of each output pixel centre in a crop of side h at `offset`."""
    return offset + np.minimum(((np.arange(size) + 0.5) * h / size).astype(int), h - 1)


# ----------------------------------------------------------------------------------------
# The engine
# ----------------------------------------------------------------------------------------


class DoomEngine:
    """ViZDoom as a worldlab `Engine` (see the module docstring for the calibration)."""

    name = "doom"
    events = DOOM_EVENTS
    character_kinds = ("imp", "monster")  # the kinds of `Observation.things`

    def __init__(self, size: int = 64, wad: str = "freedoom2", map: str = "MAP01",
                 hud: bool = False, monsters: str | bool = "on", render_size=None,
                 skill: int = 3, tics: int = 4, flat_light: bool = False,
                 metric_depth: bool = True):
        if not (isinstance(size, int) and 8 <= size <= 1200):
            raise ValueError(f"size must be an integer in [8, 1200], got {size!r}")
        if skill not in (1, 2, 3, 4, 5):
            raise ValueError(f"skill must be one of 1..5, got {skill!r}")
        if not (isinstance(tics, int) and 1 <= tics <= 35):
            raise ValueError(f"tics must be an integer in [1, 35], got {tics!r}")
        if isinstance(monsters, bool):  # the switch used to be a bool: True = "on"
            monsters = "on" if monsters else "off"
        if monsters not in MONSTERS:
            raise ValueError(f"monsters must be one of {MONSTERS} (or True / False), got "
                             f"{monsters!r}")
        self.size, self.tics, self.wad_path = size, tics, _wad_path(wad)
        self.monsters, self.skill = monsters, skill
        # metric_depth=False: depth is the coarse uint8 buffer everywhere (steps of 0.22 m)
        # and neither sectors_info nor open3d is needed (3x faster; for training data)
        self.metric_depth = metric_depth
        self._maps = map_names(self.wad_path)
        self.map = self._check_map(map)
        self.render_size, resolution = _resolution(render_size, size)
        w, h = self.render_size
        self._rows = _nearest_index(size, h, 0)
        self._cols = _nearest_index(size, h, (w - h) // 2)
        self._meshes: dict[str, LevelMesh] = {}
        self._levels: dict[str, tuple[MapData, ReachableArea]] = {}
        self._game, processes = self._make_game(resolution, hud, skill, flat_light)
        # close at garbage collection and at interpreter exit too: a notebook kernel never
        # frees its namespace, so ViZDoom's own destructor may never run
        self._finalizer = weakref.finalize(self, _close_game, self._game, processes,
                                           os.getpid())
        self._step = 0

    def _check_map(self, name: str) -> str:
        return _check_map(name, self.wad_path, self._maps)

    def _make_game(self, resolution, hud: bool, skill: int,
                   flat_light: bool) -> tuple[vzd.DoomGame, list[psutil.Process]]:
        """The initialised game and its `vizdoom` process(es), killed by `reaper` if this
        process dies without closing them."""
        game = vzd.DoomGame()
        game.set_doom_game_path(str(self.wad_path))
        game.set_doom_map(self.map)
        game.set_doom_skill(skill)
        game.set_screen_resolution(resolution)
        game.set_screen_format(vzd.ScreenFormat.RGB24)
        game.set_window_visible(False)
        game.set_mode(vzd.Mode.PLAYER)
        game.set_episode_timeout(0)
        game.set_depth_buffer_enabled(True)
        game.set_labels_buffer_enabled(True)
        game.set_sectors_info_enabled(self.metric_depth)
        game.set_render_hud(hud)
        game.set_render_crosshair(hud)
        game.set_render_weapon(hud)
        game.set_available_buttons(list(_BUTTONS))
        game.set_available_game_variables(list(_VARIABLES))
        args = "+movebob 0" + (" -nomonsters" if self.monsters == "off" else "")
        game.add_game_args(args + (" +r_visibility 0" if flat_light else ""))
        return game, reaper.start_guarded(game.init, "vizdoom", _shared_memory)

    # ---- the Engine protocol --------------------------------------------------------

    def reset(self, seed: int = 0, **options) -> Observation:
        """Start a new episode; options: `map` (a map of this WAD), `position` (x, y) in
        metres and `yaw` in degrees to start from instead of the map's player start.

        The position must lie on the map's reachable floor (`reachable_area`) at least the
        player's radius (0.5 m) from its walls; DOOM's `warp` puts the player on the floor
        there at whole map units (1/32 m). `start_options(seed)` draws such a start.
        """
        unknown = sorted(set(options) - {"map", "position", "yaw"})
        if unknown:
            raise ValueError(f"unknown reset option {unknown[0]!r}; expected 'map', "
                             f"'position' or 'yaw'")
        _check_seed(seed)
        name = self._check_map(options.get("map", self.map))
        position = _check_position(options.get("position"))
        yaw = _check_yaw(options.get("yaw"))
        if position is not None:  # the player's box must not overlap a wall
            self.reachable_area(name).check_position(
                position, PLAYER_RADIUS / UNITS_PER_M_XY, f"the reachable floor of {name}")
        # every check passed: only now change the game
        if name != self.map:
            self.map = name
            self._game.set_doom_map(name)
        self._new_episode(int(seed), position, yaw)
        self._step = 0
        return self._observe([])

    def _new_episode(self, seed: int, position, yaw) -> None:
        self._game.set_seed(seed)
        self._game.new_episode()
        if self.monsters == "invulnerable":  # god mode ends with every episode (measured)
            self._game.send_game_command("god")
        if position is not None:  # warp takes whole map units (ZDoom reads integers)
            x, y = (round(v * UNITS_PER_M_XY) for v in position)
            self._game.send_game_command(f"warp {x} {y}")
        # DOOM ignores input for the first tics of a level; idle through them so that the
        # first step acts like every other one. The last settle tic already takes input
        # (measured): it turns the player to `yaw` (a delta button: degrees per tic)
        idle = [0.0] * len(_BUTTONS)
        self._game.make_action(idle, SETTLE_TICS - 1)
        turn = idle.copy()
        if yaw is not None:
            angle = float(self._game.get_game_variable(vzd.GameVariable.ANGLE))
            turn[_BUTTONS.index(vzd.Button.TURN_LEFT_RIGHT_DELTA)] = \
                -((yaw - angle + 180.0) % 360.0 - 180.0)  # positive = right
        self._game.make_action(turn, 1)

    def step(self, action: Action, prompt: str | None = None) -> Observation:
        """Hold `action` for `tics` tics (a prompt may fire an event first)."""
        if not isinstance(action, Action):
            raise ValueError(f"action must be a worldlab.camera.Action, got {action!r}")
        if self._game.is_episode_finished():
            raise EpisodeFinished("the DOOM episode has ended; call reset() first")
        buttons, events = set(action.buttons), []
        spec = match_event(prompt, self.events)
        if spec is not None:
            events.append(Event(spec.name, prompt, self._step + 1))
            if spec.name == "summon_monster":
                self._game.send_game_command("summon DoomImp")
            else:
                buttons.add(spec.name)
        self._game.make_action(self._buttons(action, buttons), self.tics)
        if self._game.is_episode_finished():
            raise EpisodeFinished(f"the DOOM episode ended at step {self._step + 1} (the "
                                  f"player died or left {self.map}); call reset()")
        self._step += 1
        return self._observe(events)

    def close(self) -> None:
        """End the game process. Idempotent; also runs at garbage collection and at
        interpreter exit, and `reaper` ends the process if this one is killed."""
        self._finalizer()

    def __enter__(self) -> "DoomEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def variable(self, name: str) -> float:
        """A ViZDoom game variable of the current state by name, e.g. "HEALTH", "AMMO2"."""
        if not hasattr(vzd.GameVariable, name):
            raise ValueError(f"unknown game variable {name!r}; expected a vizdoom.GameVariable "
                             f"name such as 'HEALTH' or 'AMMO2'")
        return float(self._game.get_game_variable(getattr(vzd.GameVariable, name)))

    # ---- where a player can be ---------------------------------------------------------

    def reachable_area(self, map: str | None = None) -> ReachableArea:
        """The floor a player can reach from the start of `map` (default: the current
        one), in metres: `doom_level.reachable_area` of the WAD's map, cached."""
        return self._level(self.map if map is None else self._check_map(map))[1]

    def start_options(self, seed: int, map: str | None = None) -> dict:
        """Reset options {"position": (x, y), "yaw": degrees} of a random start drawn from
        `seed` alone: uniform over the reachable floor of the current map (or of `map`, then
        named in the options too), clear of walls and placed things
        (`doom_level.random_start`), at any heading: `reset(seed, **start_options(seed))`."""
        _check_seed(seed)
        name = self.map if map is None else self._check_map(map)
        rng = np.random.default_rng([START_STREAM, int(seed)])
        x, y = random_start(*self._level(name), self.skill, rng)
        options = {"position": (x, y), "yaw": float(rng.uniform(-180.0, 180.0))}
        return options if map is None else {"map": name, **options}

    def _level(self, name: str) -> tuple[MapData, ReachableArea]:
        if name not in self._levels:  # read from the WAD: the game need not be on it
            data = read_map(self.wad_path, name)
            self._levels[name] = data, reachable_area(data)
        return self._levels[name]

    # ---- conversions at the boundary -------------------------------------------------

    def _buttons(self, action: Action, buttons: set[str]) -> list[float]:
        """The canonical action as ViZDoom button values (delta buttons act per tic)."""
        move = UNITS_PER_M_XY * FRICTION_SPEED / self.tics  # delta per metre per step
        return [action.forward * move, action.right * move, -action.yaw / self.tics,
                action.pitch / self.tics] + [float(b in buttons) for b in
                                             ("attack", "use", "jump")]

    def camera(self, variables) -> tuple[np.ndarray, np.ndarray]:
        """(c2w, K) of the output frame from ViZDoom's CAMERA_POSITION_X/Y/Z, ANGLE, PITCH."""
        x, y, z, angle, pitch = (float(v) for v in variables)
        c2w = pose_from_heading(np.array([x / UNITS_PER_M_XY, y / UNITS_PER_M_XY,
                                          z / UNITS_PER_M_Z]), angle)
        w, h = self.render_size
        f = w / 2  # 90 degrees across the full 4:3 width, square pixels in metres
        # ViZDoom's PITCH is positive looking down; the shear is measured in map slope,
        # which the 1.2 vertical scale turns into 1.2 tan(pitch) in metres
        cy = h / 2 - f * math.tan(math.radians(pitch)) * 1.2
        s = self.size / h
        K = np.array([[f * s, 0.0, h / 2 * s], [0.0, f * s, cy * s], [0.0, 0.0, 1.0]])
        return c2w, K

    def _mesh(self, state) -> LevelMesh:
        if self.map not in self._meshes:  # lines never move: one topology per map
            level = self._level(self.map)[0]
            if sorted(s.id for s in state.sectors) != list(range(len(level.floor))):
                raise ValueError(f"sectors_info lists {len(state.sectors)} sectors but the "
                                 f"WAD's {self.map} has {len(level.floor)}; is the map the "
                                 f"one loaded by the game?")
            self._meshes[self.map] = LevelMesh(level)
        mesh = self._meshes[self.map]
        floor = np.zeros(len(state.sectors))
        ceiling = np.zeros(len(state.sectors))
        for s in state.sectors:  # heights change with doors and lifts
            floor[s.id], ceiling[s.id] = s.floor_height, s.ceiling_height
        mesh.update(floor, ceiling)
        return mesh

    def _observe(self, events: list[Event]) -> Observation:
        state = self._game.get_state()
        c2w, K = self.camera(state.game_variables)
        labels = state.labels_buffer[self._rows[:, None], self._cols[None, :]]  # (h, w)
        depth = self.depth_buffer(state)
        if self.metric_depth:
            mesh = self._mesh(state).depth(K, c2w, self.size, self.size)  # (h, w)
            sprite = labels >= 2  # 0 walls, 1 floors and ceilings, >= 2 things
            depth = np.where(sprite, np.minimum(depth, mesh), mesh)
        ids = np.zeros(256, np.int32)
        for label in state.labels:
            ids[label.value] = label.object_id + 1
        instance = ids[labels]
        seen = set(np.unique(instance).tolist())
        things = {label.object_id + 1: CHARACTERS.get(label.object_name, "monster")
                  for label in state.labels
                  if label.object_name in MONSTER_NAMES and label.object_id + 1 in seen}
        return Observation(rgb=self._square_rgb(state.screen_buffer), depth=depth, c2w=c2w,
                           K=K, step=self._step, instance=instance, events=events,
                           things=things)

    def depth_buffer(self, state=None) -> np.ndarray:
        """ViZDoom's uint8 depth buffer of `state` (default: the current one) in metres.

        (h, w) float32 z-depth at the output pixels (nearest sample), coarse: steps of
        7.16 map units (0.22 m). The engine uses it only on sprite pixels.
        """
        state = self._game.get_state() if state is None else state
        buffer = state.depth_buffer[self._rows[:, None], self._cols[None, :]]  # (h, w)
        return ((buffer.astype(np.float32) + DEPTH_BUFFER_OFFSET)
                * np.float32(DEPTH_BUFFER_UNITS / UNITS_PER_M_XY))

    def _square_rgb(self, screen: np.ndarray) -> np.ndarray:
        """Centre-crop the (H, W, 3) render to H x H and resize to size x size."""
        w, h = self.render_size
        crop = screen[:, (w - h) // 2:(w - h) // 2 + h]
        if h == self.size:
            return np.ascontiguousarray(crop)
        resample = Image.Resampling.BOX if self.size < h else Image.Resampling.BILINEAR
        return np.asarray(Image.fromarray(crop).resize((self.size, self.size), resample))


def _close_game(game: vzd.DoomGame, processes: list[psutil.Process], owner: int) -> None:
    if os.getpid() != owner:  # a forked child inherits this finalizer, not the game
        return
    game.close()
    reaper.release(processes)


def _shared_memory(proc: psutil.Process) -> list[str]:
    """The files ViZDoom leaves in /dev/shm when it is killed, named after the
    `+viz_instance_id` of its command line."""
    if not SHARED_MEMORY.is_dir():
        return []
    args = proc.cmdline()
    keys = [value for arg, value in zip(args, args[1:]) if arg == "+viz_instance_id"]
    return [str(SHARED_MEMORY / f"ViZDoom{kind}{key}") for key in keys
            for kind in ("SM", "MQCtr", "MQDoom")]


def _check_seed(seed) -> None:
    if isinstance(seed, bool) or not (isinstance(seed, (int, np.integer))
                                      and 0 <= seed < 2 ** 32):
        raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")


def _check_yaw(yaw) -> float | None:
    if yaw is None:
        return None
    if isinstance(yaw, bool) or not isinstance(yaw, (int, float, np.number)) \
            or not math.isfinite(yaw):
        raise ValueError(f"yaw must be a finite number of degrees, got {yaw!r}")
    return float(yaw)


def _check_position(position) -> tuple[float, float] | None:
    if position is None:
        return None
    try:
        x, y = (float(v) for v in position)
    except (TypeError, ValueError):
        x = y = float("nan")
    if not (math.isfinite(x) and math.isfinite(y)):
        raise ValueError(f"position must be two finite numbers (x, y) in metres, got "
                         f"{position!r}")
    return x, y
