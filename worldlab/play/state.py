"""`SessionState`: everything one live rollout holds between steps, in one object.

`WorldSession.reset` builds one, `save` writes one (tensors to safetensors, the rest to
JSON) and `load` reads one back; a session swaps its whole state at once, so a failed load
or reset leaves the previous state as it was.

Shape legend: f frames per chunk, h w height/width, a action width, m buffered actions.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..camera import ACTION_WIDTH, BUTTONS, Action

LOG_BYTES = 8 * ACTION_WIDTH  # one float64 action vector in the twin's replay log


def action_vector(a: Action) -> np.ndarray:
    """(a,) float64: like Action.to_vector but exact, so a replayed action is the same."""
    return np.array([a.forward, a.right, a.yaw, a.pitch]
                    + [float(b in a.buttons) for b in BUTTONS], np.float64)


@dataclass
class SessionState:
    stream: object  # the rollout's `memory.stream.Stream`: KV cache and memory
    rng: torch.Generator  # the sampling noise
    engine_name: str | None  # the engine of the first chunk (None: the user's frames)
    seed: int
    scene: str  # the caption's scene field
    pose: np.ndarray  # (4, 4) c2w of the frame on screen
    gen_pose: np.ndarray  # (4, 4) c2w of the last generated frame
    last_frame: np.ndarray  # (h, w, 3) uint8 on screen
    last_twin: np.ndarray | None  # (h, w, 3) uint8 the twin's frame, None without a twin
    event: str = ""  # the caption's event field in force
    pending: str | None = None  # a prompt waiting for the next chunk
    # generated frames still to hand out: (frame, c2w, twin frame, time the chunk was asked)
    queue: collections.deque = field(default_factory=collections.deque)
    buffered: list = field(default_factory=list)  # "buffer" policy: (Action, time) waiting
    log: bytearray = field(default_factory=bytearray)  # the twin's replay log (float64)
    log_prompts: dict = field(default_factory=dict)  # replay-log index -> prompt
    step_index: int = 0  # steps taken since reset
    on_screen: str = "context"  # "context" (the engine's own frame) or "generated"

    # ---- to and from files ------------------------------------------------------------

    def to_tensors(self) -> tuple[dict[str, torch.Tensor], dict]:
        """(tensors, JSON-able metadata) that `from_tensors` turns back into this state."""
        buffered = np.array([action_vector(a) for a, _ in self.buffered])
        tensors = {"rng": self.rng.get_state(), "pose": torch.from_numpy(self.pose.copy()),
                   "gen_pose": torch.from_numpy(self.gen_pose.copy()),
                   "last_frame": torch.from_numpy(self.last_frame.copy()),
                   "log": torch.from_numpy(np.frombuffer(bytes(self.log), np.uint8).copy()),
                   # (m, a) float64, also when empty
                   "buffered": torch.from_numpy(buffered.reshape(-1, ACTION_WIDTH))}
        stream, meta = self.stream.to_tensors()  # "cache.*", "memory.*"; chunks, memory
        tensors.update(stream)
        if self.last_twin is not None:
            tensors["last_twin"] = torch.from_numpy(self.last_twin.copy())
        for i, (frame, pose, twin, _) in enumerate(self.queue):
            tensors[f"queue.{i}.frame"] = torch.from_numpy(frame.copy())
            tensors[f"queue.{i}.c2w"] = torch.from_numpy(np.asarray(pose, np.float64).copy())
            if twin is not None:
                tensors[f"queue.{i}.twin"] = torch.from_numpy(twin.copy())
        meta.update({"step": self.step_index, "event": self.event,
                "pending": self.pending, "scene": self.scene, "engine": self.engine_name,
                "seed": self.seed, "queue": len(self.queue), "on_screen": self.on_screen,
                "log_prompts": {str(k): v for k, v in self.log_prompts.items()}})
        return tensors, meta

    @classmethod
    def from_tensors(cls, tensors: dict, meta: dict, stream) -> "SessionState":
        """The inverse of `to_tensors`, into `stream` (a new, empty Stream of the world,
        filled by its `load_tensors`)."""
        stream.load_tensors(tensors, meta)
        rng = torch.Generator()
        rng.set_state(tensors["rng"])
        arr = lambda k: tensors[k].numpy().copy() if k in tensors else None  # noqa: E731
        queue = collections.deque((arr(f"queue.{i}.frame"), arr(f"queue.{i}.c2w"),
                                   arr(f"queue.{i}.twin"), None) for i in range(meta["queue"]))
        return cls(stream=stream, rng=rng, engine_name=meta["engine"], seed=meta["seed"],
                   scene=meta["scene"], pose=arr("pose"), gen_pose=arr("gen_pose"),
                   last_frame=arr("last_frame"), last_twin=arr("last_twin"),
                   event=meta["event"], pending=meta["pending"], queue=queue,
                   buffered=[(Action.from_vector(v), time.perf_counter())
                             for v in tensors["buffered"].numpy()],
                   log=bytearray(tensors["log"].numpy().tobytes()),
                   log_prompts={int(k): v for k, v in meta["log_prompts"].items()},
                   step_index=meta["step"], on_screen=meta["on_screen"])
