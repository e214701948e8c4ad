"""The events protocol: when the player prompts a character into the world, does the model
show it, and does it show characters nobody asked for?

Each held-out walk is recorded twice from the same seed, with the same actions: once with
the summon prompt at frame `p` (the start of chunk `PROMPT_CHUNK`; the engine brings an imp
ahead of the player there) and once without. The predictor generates the two chunks from
frame p on, from the same true context [0, p); only the prompt differs. The kinds probe
(`train.probes`, trained on engine frames with the engine's labels, and only if its
held-out balanced accuracy for the kind reaches `ACCURACY_BAR`) reads every frame:

    hit          the probe sees the prompted kind in any frame of the two chunks
    false alarm  the same on the walk without the prompt

The engine's own frames go through the same probe (what a perfect world scores with this
probe), and the engine's labels give the exact shares. DOOM walks have no monsters but the
summoned one (`monsters="off"`), so a false alarm is a character the model made up.

Shape legend: t frames, h w height width, K kinds.
"""

from __future__ import annotations

import numpy as np

from ..engines import engine_class
from ..engines.policies import event_prompt
from ..train.probes import Probes, record_labelled
from .stats import bootstrap
from .predictors import as_predictor
from .protocols import HELDOUT_SEED

PROMPT_CHUNK = 2  # the prompt comes with the first frame of this chunk
WINDOW_CHUNKS = 2  # chunks after the prompt in which the character must show
EVENT = "summon_monster"  # the prompted event and the kind of character it brings
EVENT_KIND = "imp"
WALK_OPTS = {"doom": {"monsters": "off", "metric_depth": False}, "procedural": {}}
WALK_MAPS = {"doom": ("MAP01", "MAP02", "MAP03")}
SEED_OFFSET = 50_000  # event walks: held-out seeds apart from the other protocols'


def prompt_frame(chunk_frames: int) -> int:
    return PROMPT_CHUNK * chunk_frames


def event_walks(engine: str, n: int, size: int, chunk_frames: int,
                seed: int = HELDOUT_SEED + SEED_OFFSET, maps=None, progress=None) -> dict:
    """`n` walk pairs {"prompted", "plain"} (each `LabelledWalks`) of seeds `seed`.., random
    starts, the summon prompt at `prompt_frame` in the prompted ones."""
    cls = engine_class(engine)
    spec = next(s for s in cls.events if s.name == EVENT)
    p = prompt_frame(chunk_frames)
    frames = p + WINDOW_CHUNKS * chunk_frames
    maps = WALK_MAPS.get(engine) if maps is None else maps
    rec = dict(policy="mix", start="random", maps=maps, progress=progress,
               **WALK_OPTS.get(engine, {}))
    seeds, prompt = range(seed, seed + n), event_prompt(spec, cls.events)
    return {"prompt": prompt, "prompt_frame": p, "seed": seed,
            "prompted": record_labelled(engine, seeds, frames, size, prompts={p: prompt},
                                        **rec),
            "plain": record_labelled(engine, seeds, frames, size, **rec)}


def _seen(probs: np.ndarray, k: int) -> bool:
    return bool((probs[:, k] > 0.5).any())


def event_scores(models: dict, walks: dict, probes: Probes, seed: int = 0) -> dict:
    """Hit and false-alarm shares with intervals for each model {name: World or
    predictor}, for the engine's frames through the probe and for the engine's labels."""
    names = probes.kinds.config.outputs
    if EVENT_KIND not in names:
        raise ValueError(f"the kinds probe has no {EVENT_KIND!r} output ({names})")
    k = names.index(EVENT_KIND)
    if not probes.usable(EVENT_KIND):
        return {"skipped": f"the kinds probe's held-out balanced accuracy for "
                           f"{EVENT_KIND!r} is below the bar "
                           f"({probes.report['kinds'].get(EVENT_KIND)})"}
    p = walks["prompt_frame"]
    prompted, plain = walks["prompted"], walks["plain"]
    window = slice(p, None)
    rows = {"engine_labels": {"hit": [bool((lab[window, k] == 1).any())
                                      for lab in prompted.kinds],
                              "false_alarm": [bool((lab[window, k] == 1).any())
                                              for lab in plain.kinds]},
            "engine_probe": {
                "hit": [_seen(probes.kinds.predict(ep.rgb[window]), k)
                        for ep in prompted.episodes],
                "false_alarm": [_seen(probes.kinds.predict(ep.rgb[window]), k)
                                for ep in plain.episodes]}}
    for name, model in models.items():
        pred = as_predictor(model)
        hit, false = [], []
        for a, b in zip(prompted.episodes, plain.episodes):
            hit.append(_seen(probes.kinds.predict(pred.predict(a, 0, p, len(a), seed=seed)), k))
            false.append(_seen(probes.kinds.predict(pred.predict(b, 0, p, len(b), seed=seed)),
                               k))
        rows[name] = {"hit": hit, "false_alarm": false}
    return {"prompt": walks["prompt"], "kind": EVENT_KIND, "prompt_frame": p,
            **({"first_seed": walks["seed"]} if "seed" in walks else {}),
            "window_frames": len(prompted.episodes[0]) - p, "walks": len(prompted.episodes),
            "rows": {name: {"hit_share": bootstrap(r["hit"]),
                            "false_alarm_share": bootstrap(r["false_alarm"])}
                     for name, r in rows.items()}}
