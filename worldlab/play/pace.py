"""`PacePolicy`: what play does when chunks come slower than the game shows them.

A chunk of f frames is f / fps seconds of game time (DOOM: 4 frames at 8.75 frames/s, 457 ms).
When making a chunk takes longer than that, play cannot keep pace with the keys. On a 2-core
laptop that mostly means another job has the cores: the quickstart, idle at ~80 ms a chunk,
measured 5,045 ms a chunk beside one training job. Without a word the game just feels broken,
so the session watches the time of every chunk it makes:

- a chunk is *slow* when it took longer than `budget_ms` (default: the chunk's own game time);
- after `patience` slow chunks in a row the session says so (`WorldSession.status().notes`,
  the widget's status line): how slow, against what budget, and the load average, which tells
  a busy machine (load above the cores) from a world too big for this one;
- with `switch_steps=n` (on) it then also switches the session to n sampling steps, the faster
  student setting (fewer network evaluations per chunk: the 16-step teacher at 4 steps made
  a chunk in 57 ms instead of 207 ms in `data/results/distill.json`), once, and says so.
  Off (`switch_steps=None`, the default) it only reports: nothing about the chunks changes
  unless asked, because fewer steps also means other frames (a world distilled for n steps
  warns when sampled at fewer: `config.check_sampling_steps`). `set_steps` switches back.

The policy is pure: `observe(chunk_ms, budget_ms, load)` takes the measured numbers and
returns what to do, so it is tested with any clock; the session feeds it its own timings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PaceVerdict:
    """What the policy decided after one chunk."""

    slow: bool  # this chunk took longer than its budget
    note: str | None  # a sentence for the player once `patience` chunks in a row were slow
    switch_to: int | None  # sampling steps to switch to now, or None


@dataclass
class PacePolicy:
    switch_steps: int | None = None  # None: report only (off); n: switch to n steps (on)
    budget_ms: float | None = None  # None: the chunk's game time, f / fps
    patience: int = 2  # slow chunks in a row before it speaks (and switches)
    slow_run: int = field(default=0, init=False)  # slow chunks in a row so far
    switched_from: int | None = field(default=None, init=False)  # steps before the switch

    @property
    def switched(self) -> bool:
        return self.switched_from is not None

    def __post_init__(self):
        s = self.switch_steps
        if s is not None and (isinstance(s, bool) or not isinstance(s, int) or s < 1):
            raise ValueError(f"switch_steps must be None (report only) or a positive int "
                             f"(sampling steps of the faster setting), got {s!r}")
        b = self.budget_ms
        if b is not None and (isinstance(b, bool) or not isinstance(b, (int, float))
                              or not b > 0):
            raise ValueError(f"budget_ms must be None (the chunk's game time) or a positive "
                             f"number of milliseconds, got {b!r}")
        p = self.patience
        if isinstance(p, bool) or not isinstance(p, int) or p < 1:
            raise ValueError(f"patience must be a positive int (slow chunks in a row), got "
                             f"{p!r}")

    def observe(self, chunk_ms: float, budget_ms: float, steps: int,
                load: tuple[float, int] | None = None) -> PaceVerdict:
        """One made chunk: `chunk_ms` it took, `budget_ms` it may take (the policy's own
        `budget_ms` wins when set), at `steps` sampling steps; `load` is (1-minute load
        average, cores), default `machine_load()`."""
        budget = self.budget_ms if self.budget_ms is not None else budget_ms
        if not chunk_ms > budget:
            self.slow_run = 0
            return PaceVerdict(False, None, None)
        self.slow_run += 1
        if self.slow_run < self.patience:
            return PaceVerdict(True, None, None)
        note = slow_note(chunk_ms, budget, self.slow_run, load or machine_load())
        switch = self.switch_steps is not None and not self.switched and \
            self.switch_steps < steps
        if switch:
            self.switched_from = steps
        if self.switched:
            note += (f"; switched from {self.switched_from} to {self.switch_steps} sampling "
                     f"steps per chunk to keep up")
        return PaceVerdict(True, note, self.switch_steps if switch else None)


def machine_load() -> tuple[float, int]:
    """(1-minute load average, CPU cores) of this machine."""
    return os.getloadavg()[0], os.cpu_count() or 1


def slow_note(chunk_ms: float, budget_ms: float, run: int, load: tuple[float, int]) -> str:
    """The sentence the player reads: how slow, and whether the machine looks busy."""
    avg, cores = load
    why = (f"the machine is busy (load average {avg:.1f} on {cores} cores): another job is "
           f"using the CPU") if avg > cores else \
        f"load average {avg:.1f} on {cores} cores: this machine is slow for this world"
    return (f"slow: {run} chunks in a row took longer than the {budget_ms:.0f} ms of game "
            f"time they show (the last {chunk_ms:.0f} ms); {why}")
