"""The memory issue's bars: what the memory ablation (`data/results/memory.json`, written
by `python -m worldlab table memory`) must show, in one place for it and notebook 04.

The best variant must beat `none` on the return frames by 2 dB while losing at most 0.3 dB
over all frames; compressed tokens must read at least 8 times fewer tokens than raw
retrieval at a return PSNR at most 0.5 dB below it; no memory may make streaming grow
(chunk 100 over chunk 2 at most 1.1, also over `none`'s own growth) or cost more than 1.5
times `none`'s time per chunk.

    wl.evaluate.print_table(bar_rows(shipped["bars"]), "the memory bars")
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

_OPS = {">=": operator.ge, "<=": operator.le}


@dataclass(frozen=True)
class Bar:
    """`what` is met when the measured value `op` `value` holds."""

    what: str
    op: str
    value: float

    def __post_init__(self):
        if self.op not in _OPS:
            raise ValueError(f"a bar's op must be one of {sorted(_OPS)}, got {self.op!r}")

    @property
    def need(self) -> str:
        return f"{self.op} {self.value:g}"

    def met(self, x: float) -> bool:
        return bool(_OPS[self.op](x, self.value))


MEMORY_BARS = {  # keys of memory.json's "bars" (`memory_table.bars`)
    "best_minus_none_return_db": Bar("return PSNR: best - none (dB)", ">=", 2.0),
    "best_minus_none_all_frames_db": Bar("all-frames PSNR: best - none (dB)", ">=", -0.3),
    "tokens_fewer_than_retrieval_x": Bar("tokens per frame: retrieval / tokens", ">=", 8.0),
    "tokens_minus_retrieval_return_db": Bar("return PSNR: tokens - retrieval (dB)", ">=",
                                            -0.5),
    "cost_ratio_max": Bar("cost chunk 100 / chunk 2, worst variant", "<=", 1.1),
    "ms_per_chunk_over_none_max": Bar("ms per chunk over none's, worst variant", "<=", 1.5),
    "growth_vs_none_max": Bar("chunk 100 / chunk 2 over none's, worst variant", "<=", 1.1),
}


def bar_rows(values: dict) -> list[dict]:
    """One row per bar that `values` (memory.json's "bars") holds: what it measures, the
    value (3 decimals), what it needs and whether it is met. The tokens bars exist only
    where both tokens and retrieval were trained, the cost bars only where costs were
    timed, so a missing bar is left out, not failed."""
    return [{"bar": bar.what, "value": round(values[key], 3), "needs": bar.need,
             "met": bar.met(values[key])}
            for key, bar in MEMORY_BARS.items() if key in values]
