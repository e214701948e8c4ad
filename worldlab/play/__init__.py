"""Play a world live. The core is headless and knows nothing of its shells:

    session   `WorldSession`: one rollout (KV cache, pose, prompt, RNG, twin engine)
    state     `SessionState`: all of a rollout's state, shared by reset, save and load
    live      `LiveLoop`: key presses coalesced while a chunk is made, frames paced
    widgets   `NotebookGame`: a thin ipywidgets shell (keys, buttons, prompt box, minimap)
    script    action files, `python -m worldlab play`, videos, baselines, `bench play`
    distill_bench   a teacher and its few-step students side by side (`bench distill`)

    session = wl.play.WorldSession.from_pretrained(wl.DATA / "checkpoints" / "doom64")
    session.reset(engine="doom", seed=0)
    wl.play.NotebookGame(session).show()
"""

from . import distill_bench
from .live import LiveLoop
from .script import (baseline_psnr, demo_script, load_script, parse_script, play_script,
                     scores, write_mp4, write_outputs)
from .pace import PacePolicy
from .session import (DEMO_PROMPT, LATENCY_POLICIES, SessionStatus, StepResult,
                      UnknownPromptWarning, WorldSession, check_action)
from .state import SessionState
from .widgets import KEYMAP, NotebookGame

__all__ = ["distill_bench", "WorldSession", "SessionState", "StepResult", "NotebookGame",
           "KEYMAP", "LiveLoop", "PacePolicy", "SessionStatus", "UnknownPromptWarning",
           "DEMO_PROMPT", "LATENCY_POLICIES", "check_action", "demo_script", "parse_script",
           "load_script", "play_script", "write_mp4", "write_outputs", "scores",
           "baseline_psnr"]
