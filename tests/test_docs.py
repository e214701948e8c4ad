"""The text a student reads: the README's glossary, the course's signposts, and the numbers
the README and the notebooks' prose quote from the shipped tables.

A number with a unit (dB, x, ms, frames/s) in prose must be a rounding of a number in the
shipped table the text cites (`data/results/<name>.json`, STYLE habit 13): a table that is
re-measured then fails here until the text is updated, or better, until the notebook loads the
number in a code cell instead of typing it. Only the cited tables count, and only their
single values (not their curves and per-walk lists): against every number of every table,
almost any two-decimal PSNR would match something. A notebook's citations are all of its
cells' (its code loads the table its prose quotes); a README paragraph, list or table row
must cite its own, and one that cites none is not checked here. A number that is not a
measurement (a target, a property of a metric) goes in NOT_RESULTS with the reason.
"""

import functools
import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("0*.ipynb"))
README = (ROOT / "README.md").read_text()

# Terms the README, the course table and the notebooks' printed output use without saying
# what they are; the glossary must define each (bold, at the start of its entry).
GLOSSARY_TERMS = [
    "DiT", "DMD", "DIAMOND-style peer", "probe", "sink", "oracle", "copy", "bars",
    "bootstrap", "latent", "Plücker", "FSDP2", "bf16", "DDP", "chunk", "KV cache",
    "teacher forcing", "open loop", "repeat-last", "warp-last", "return frames",
    "self-consistency", "drift", "student", "EMA", "PSNR", "SSIM", "sharpness",
    "realism distance",
]

NUM = r"[+-]?\d+(?:,\d{3})*(?:\.\d+)?"
# A number, or a range or list of them ("1.14-1.17", "17.97 / 17.70"), then a unit.
QUOTE = re.compile(rf"(?<![\w.\-/])({NUM}(?:\s*(?:-|–|/|to)\s*{NUM})*)\s*"
                   rf"(dB|x(?!\w)|ms(?!\w)|frames/s|FPS)")

# (file, the quoted text): why it is not a shipped measurement.
NOT_RESULTS = {
    ("README.md", "+6 dB"): "a property of PSNR (halving the RMS error)",
    ("README.md", "2 dB"): "the memory issue's bar, a target",
    ("00_quickstart.ipynb", "+6 dB"): "a property of PSNR (halving the RMS error)",
    ("02_autoencoder.ipynb", "30 dB"): "the world issue's bar for the autoencoder, a target",
    ("02_autoencoder.ipynb", "0.7x"): "the world issue's sharpness bar, a target",
    ("04_memory_ablations.ipynb", "2 dB"): "the memory issue's bar, a target",
    ("04_memory_ablations.ipynb", "+1 dB"): "the memory issue's bar, a target",
    ("04_memory_ablations.ipynb", "1 dB"): "the memory issue's bar, a target",
    ("04_memory_ablations.ipynb", "0.5 dB"): "the memory issue's bar, a target",
    ("06_distillation.ipynb", "0.5 dB"): "the distillation issue's tolerance, a target",
}


CITED = re.compile(r"results/([\w.+-]+\.json)")


@functools.cache  # read once: every README paragraph that cites a table asks again
def table_numbers(name: str) -> tuple[float, ...]:
    """The single values of data/results/`name`: every number outside lists longer than 4
    (curves, per-walk values), including numbers written inside its notes."""
    found: list[float] = []

    def walk(o):
        if isinstance(o, bool) or o is None:
            return
        if isinstance(o, (int, float)):
            found.append(float(o))
        elif isinstance(o, dict):
            for v in o.values():
                walk(v)
        elif isinstance(o, list) and len(o) <= 4:  # an interval, not a curve
            for v in o:
                walk(v)
        elif isinstance(o, str):
            found.extend(float(x.replace(",", "")) for x in re.findall(NUM, o))

    walk(json.loads((ROOT / "data" / "results" / name).read_text()))
    return tuple(found)


def cited_numbers(text: str) -> list[float] | None:
    """The single values of every shipped table `text` cites; None when it cites none."""
    names = sorted(n for n in set(CITED.findall(text))
                   if (ROOT / "data" / "results" / n).is_file())
    return [v for n in names for v in table_numbers(n)] if names else None


def is_rounding_of_shipped(text: str, shipped: Sequence[float]) -> bool:
    """Whether `text` ("18.62", "+0.28", "1,000") is some shipped number rounded to its
    digits (sign ignored: "+0.28 dB over none" quotes a difference stored as 0.28)."""
    digits = len(text.split(".")[1]) if "." in text else 0
    quoted = abs(float(text.replace(",", "")))
    tol = 0.5 * 10 ** -digits + 1e-9
    return any(abs(abs(v) - quoted) <= tol for v in shipped)


def quoted_numbers(text: str):
    """(the quote, its numbers) for every number with a unit; integers before "x" are scale
    factors and sizes ("8x fewer tokens", "64x64"), not measurements, and are skipped."""
    for m in QUOTE.finditer(text):
        numbers = re.split(r"\s*(?:–|/|to|(?<=\d)-)\s*", m.group(1))  # "1.14-1.17": 2
        if m.group(2) == "x" and all("." not in n for n in numbers):
            continue
        yield m.group(0), numbers


def _markdown(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]
            if c["cell_type"] == "markdown"]


def _section(text: str, heading: str) -> str:
    """The body of the markdown section `heading` (up to the next heading of its level)."""
    level = heading.split(" ")[0]
    m = re.search(rf"^{re.escape(heading)}\n(.*?)(?=^{level} |\Z)", text, re.S | re.M)
    assert m, f"no section {heading!r}"
    return m.group(1)


# ----------------------------------------------------------------------------------------


def test_glossary_defines_every_term():
    glossary = _section(README, "## Glossary")
    defined = {t.lower() for t in re.findall(r"\*\*([^*]+)\*\*", glossary)}
    missing = [t for t in GLOSSARY_TERMS if t.lower() not in defined]
    assert not missing, f"README's glossary does not define {missing}"


def test_glossary_comes_before_the_numbers():
    """The default world and the words are introduced before any table of measurements."""
    order = [README.index(h) for h in ("## The default worlds", "## Glossary",
                                        "## Benchmarks")]
    assert order == sorted(order), "README: default worlds, glossary, then benchmarks"


def test_quickstart_where_next_names_every_notebook():
    cells = [c for c in _markdown(ROOT / "notebooks" / "00_quickstart.ipynb")
             if c.startswith("## Where next")]
    assert len(cells) == 1, "the quickstart has one 'Where next' cell"
    missing = [p.stem for p in NOTEBOOKS[1:] if p.stem not in cells[0]]
    assert not missing, f"the quickstart's 'Where next' does not name {missing}"


def test_readme_course_table_links_every_notebook():
    course = _section(README, "## The course")
    missing = [p.name for p in NOTEBOOKS if f"(notebooks/{p.name})" not in course]
    assert not missing, f"README's course table does not link {missing}"


def _readme_units(text: str) -> list[str]:
    """The README's paragraphs and lists (blank-line separated), each table row on its own."""
    units = []
    for block in re.split(r"\n\s*\n", text):
        rows = [line for line in block.splitlines() if line.startswith("|")]
        units += rows or [block]
    return units


def _unchecked_quotes(name: str, units: list[tuple[str, Sequence[float] | None]]) -> list[str]:
    """The quotes of `units` (text, the numbers it may quote; None: not checked) that are no
    rounding of those numbers and not in NOT_RESULTS."""
    return [quote for text, allowed in units if allowed is not None
            for quote, numbers in quoted_numbers(text)
            if (name, quote) not in NOT_RESULTS
            and not all(is_rounding_of_shipped(n, allowed) for n in numbers)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_quotes_come_from_the_tables_it_loads(path):
    cells = json.loads(path.read_text())["cells"]
    allowed = cited_numbers("\n".join("".join(c["source"]) for c in cells)) or []
    wrong = _unchecked_quotes(path.name, [(md, allowed) for md in _markdown(path)])
    assert not wrong, (f"{path.name} quotes {wrong}, found in no data/results table it loads: "
                       f"load the number in a code cell, or add it to NOT_RESULTS with why")


def test_readme_quotes_come_from_the_tables_it_cites():
    units = [(u, cited_numbers(u)) for u in _readme_units(README)]
    assert sum(a is not None for _, a in units) >= 8, "the README cites its tables"
    wrong = _unchecked_quotes("README.md", units)
    assert not wrong, f"README.md quotes {wrong}, found in no data/results table cited beside"


def test_not_results_entries_are_still_quoted():
    """An allow-list entry whose text is gone is dead; remove it with the text."""
    texts = {p.name: "\n".join(_markdown(p)) for p in NOTEBOOKS} | {"README.md": README}
    stale = [k for k in NOT_RESULTS if k[1] not in texts.get(k[0], "")]
    assert not stale, f"NOT_RESULTS entries no longer quoted: {stale}"


def test_the_number_check_itself():
    """Golden cases: rounding is accepted to the quoted digits only, ranges need both ends,
    scale factors are skipped, curves do not count, citations scope the tables."""
    shipped = [18.26520347595215, 0.2803967793782576, 1.1422176827428094]
    assert is_rounding_of_shipped("18.27", shipped) and is_rounding_of_shipped("18.3", shipped)
    assert not is_rounding_of_shipped("18.28", shipped)
    assert is_rounding_of_shipped("+0.28", shipped) and not is_rounding_of_shipped("0.29", shipped)
    quotes = list(quoted_numbers("1.14-1.17x slower, 8x fewer tokens, 64x64 px, 18.27 dB, "
                                 "162 ms"))
    assert quotes == [("1.14-1.17x", ["1.14", "1.17"]), ("18.27 dB", ["18.27"]),
                      ("162 ms", ["162"])]
    memory = table_numbers("memory.json")  # none's return PSNR is a single value there
    assert is_rounding_of_shipped("18.27", memory)
    assert cited_numbers("no table named here") is None
    assert cited_numbers("see `data/results/memory.json`") == list(memory)
    assert cited_numbers("see data/results/no_such_table.json") is None
    bad = [("[`memory.json`](data/results/memory.json): no memory 18.33 dB", memory)]
    assert _unchecked_quotes("README.md", bad) == ["18.33 dB"]
    distill = table_numbers("distill.json")  # the student's first open-loop frame: a curve
    assert not is_rounding_of_shipped("27.38", distill)
    assert is_rounding_of_shipped("21.47", distill)  # its rollout mean: a single value
