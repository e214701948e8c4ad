"""The memory issues' bars, in one place for the tables and notebook 04: what the open-loop
memory ablation (`data/results/memory.json`, `table memory`: MEMORY_BARS) and the recall
testbed (`data/results/memory_recall.json`, `table recall`: RECALL_BARS) must show.

The best variant must beat `none` on the return frames by 2 dB while losing at most 0.3 dB
over all frames; compressed tokens must read at least 8 times fewer tokens than raw
retrieval at a return PSNR at most 0.5 dB below it; no memory may make streaming grow
(chunk 100 over chunk 2 at most 1.1, also over `none`'s own growth) or cost more than 1.5
times `none`'s time per chunk.

On the recall frames (`recall_bar_values`): the best non-oracle variant beats `none` by
2 dB, paired walk by walk, the interval's lower end above +1 dB; compressed tokens read at
least 8 times fewer tokens than retrieval within 0.5 dB of it; the 3D cache with the
model's own depth within 1 dB of the cache with the engine's; no variant above 1.5 times
`none`'s time per chunk.

    wl.evaluate.print_table(bar_rows(shipped["bars"]), "the memory bars")
    wl.evaluate.print_table(bar_rows(block["bars"], RECALL_BARS), "the recall bars")
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

_OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt}


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


RECALL_BARS = {  # keys of a memory_recall.json block's "bars" (`recall_bar_values`)
    "best_minus_none_recall_db": Bar("recall PSNR: best - none, paired mean (dB)", ">=", 2.0),
    "best_minus_none_recall_lo_db": Bar("recall PSNR: best - none, interval's lower end (dB)",
                                        ">", 1.0),
    "tokens_fewer_than_retrieval_x": Bar("tokens per frame: retrieval / tokens", ">=", 8.0),
    "tokens_minus_retrieval_recall_db": Bar("recall PSNR: tokens - retrieval (dB)", ">=", -0.5),
    "own_minus_oracle_cache_recall_db": Bar("recall PSNR: cache3d_own - cache3d_oracle (dB)",
                                            ">=", -1.0),
    "ms_per_chunk_over_none_max": Bar("ms per chunk over none's, worst variant", "<=", 1.5),
}


def recall_bar_values(variants: dict, best: str, reference: str = "none") -> dict:
    """The values RECALL_BARS judge, from a recall block's `variants` (`table recall`) and
    its best non-oracle variant; a bar whose rows were not trained is left out."""
    v = variants
    out = {}
    if best != reference:
        paired = v[best][f"paired_vs_{reference}"]
        out |= {"best_minus_none_recall_db": paired["mean"],
                "best_minus_none_recall_lo_db": paired["lo"]}
    if {"tokens", "retrieval"} <= set(v):
        out |= {"tokens_fewer_than_retrieval_x": v["retrieval"]["memory_tokens_per_frame"]
                / v["tokens"]["memory_tokens_per_frame"],
                "tokens_minus_retrieval_recall_db": v["tokens"]["recall_psnr"]
                - v["retrieval"]["recall_psnr"]}
    if {"cache3d_own", "cache3d_oracle"} <= set(v):
        out["own_minus_oracle_cache_recall_db"] = (v["cache3d_own"]["recall_psnr"]
                                                   - v["cache3d_oracle"]["recall_psnr"])
    out["ms_per_chunk_over_none_max"] = max(r["ms_per_chunk"] for r in v.values()) / \
        v[reference]["ms_per_chunk"]
    return out


def bar_rows(values: dict, bars: dict[str, Bar] = MEMORY_BARS) -> list[dict]:
    """One row per bar of `bars` that `values` (a table's "bars") holds: what it measures,
    the value (3 decimals), what it needs and whether it is met. The tokens bars exist only
    where both tokens and retrieval were trained, the cost bars only where costs were
    timed, so a missing bar is left out, not failed."""
    return [{"bar": bar.what, "value": round(values[key], 3), "needs": bar.need,
             "met": bar.met(values[key])}
            for key, bar in bars.items() if key in values]
