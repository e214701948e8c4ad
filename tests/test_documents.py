"""The documents' result tables are made from data/results/*.json (`python -m worldlab
results render`): a shipped document whose table differs from its JSON fails here, an edit
of a JSON is caught by `check` and fixed by `render`, a missing key or an unknown marker is
an error naming it, and rendering twice changes nothing."""

import json
import re
import shutil

import pytest

from worldlab.cli import main
from worldlab.experiments import documents
from worldlab.experiments.documents import DOCUMENTS, RESULTS, TABLES, check, render
from worldlab.paths import ROOT


@pytest.fixture
def repo(tmp_path):
    """A copy of the documents and the shipped JSON (no images, no checkpoints)."""
    for doc in DOCUMENTS:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / doc, tmp_path / doc)
    (tmp_path / RESULTS).mkdir(parents=True, exist_ok=True)
    for path in (ROOT / RESULTS).glob("*.json"):
        shutil.copy(path, tmp_path / RESULTS / path.name)
    return tmp_path


def edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def marked(*names):
    return "".join(f"text\n<!-- results:{n} -->\n<!-- /results:{n} -->\n" for n in names)


# ----------------------------------------------------------------------------------------


def test_the_shipped_documents_match_their_tables():
    """The bar: render the documents' tables from the shipped JSON; fail on a difference."""
    readme = (ROOT / "README.md").read_text()
    assert "<!-- results:memory -->" in readme and "results render" in readme
    stale = check(ROOT)
    assert not stale, ("out of date (run `python -m worldlab results render`):\n"
                       + "\n".join(map(str, stale)))


def test_every_table_renders_from_the_shipped_json_and_names_its_source():
    results = ROOT / RESULTS
    for name, table in TABLES.items():
        t = table(results)
        assert t.rows and all(len(row) == len(t.header) for row in t.rows), name
        last = documents.to_markdown(t, ROOT / "README.md", results)[-1]
        for r in t.sources:
            assert f"data/results/{r.name}" in last, name
            assert all(c in last for c in r.made_by()), name
    names = [row[0] for row in documents.index(results).rows]
    assert names == sorted(f"`{p.name}`" for p in results.glob("*.json"))


def test_a_file_with_blocks_of_several_runs_names_every_run_that_made_it():
    data = {"spec": "experiments/b.yaml", "command": "python -m worldlab table loops",
            "engines": {"procedural": {"spec": "experiments/a.yaml"},
                        "doom": {"spec": "experiments/b.yaml"}}}
    assert documents.Result("x.json", data).made_by() == [
        "python -m worldlab run experiments/b.yaml", "python -m worldlab run experiments/a.yaml"]
    data = {"command": "python scripts/gpu_run.py"}  # no spec: its own command
    assert documents.Result("x.json", data).made_by() == ["python scripts/gpu_run.py"]


def test_an_edited_json_is_reported_by_check_and_fixed_by_render(repo, capsys):
    assert main(["results", "check", "--root", str(repo)]) == 0
    edit_json(repo / RESULTS / "memory.json",
              lambda d: d["variants"]["sink"].update(return_psnr=30.123))
    assert main(["results", "check", "--root", str(repo)]) == 1
    out = capsys.readouterr().out
    assert "README.md" in out and "table 'memory'" in out and "30.12" in out
    stales = check(repo)  # the memory table sits in both documents
    assert {(s.table, s.document.name) for s in stales} == {("memory", "README.md")}
    stale = next(s for s in stales if s.document == repo / "README.md")
    assert stale.expected.startswith("| sink | 30.12 [") and stale.found.startswith("| sink | ")
    assert "30.12" not in stale.found
    before = (repo / "README.md").read_text()
    assert main(["results", "render", "--root", str(repo)]) == 0
    after = (repo / "README.md").read_text()
    assert "| sink | 30.12 [" in after and check(repo) == []
    # only the table's text changed
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(before.splitlines()) == len(after.splitlines())
    assert changed == [(stale.found, stale.expected)]


def test_a_missing_key_or_file_names_it(repo):
    edit_json(repo / RESULTS / "distill.json",
              lambda d: d["models"]["student_1"].pop("decode_ms"))
    with pytest.raises(ValueError, match=r"distill\.json has no key "
                                         r"'models\.student_1\.decode_ms'"):
        check(repo)
    (repo / RESULTS / "inference.json").unlink()
    with pytest.raises(ValueError, match=r"inference\.json does not exist"):
        TABLES["inference"](repo / RESULTS)
    edit_json(repo / RESULTS / "coverage.json", lambda d: d.pop("commit"))
    with pytest.raises(ValueError, match=r"coverage\.json has no key 'commit'"):
        TABLES["index"](repo / RESULTS)


def test_an_unknown_or_broken_marker_is_an_error_naming_document_and_marker(repo):
    doc = repo / "data" / "README.md"
    doc.write_text(marked("benchmark", "no_such_table"))
    with pytest.raises(ValueError, match=r"README\.md:5: unknown table marker "
                                         r"'results:no_such_table'"):
        render(repo)
    doc.write_text("<!-- results:memory -->\n| stale |\n")
    with pytest.raises(ValueError, match=r"README\.md:1: marker results:memory is never "
                                         r"closed"):
        check(repo)
    doc.write_text("<!-- results:memory -->\n<!-- /results:distill -->\n")
    with pytest.raises(ValueError, match=r"/results:distill closes no open"):
        check(repo)


def test_render_fills_empty_markers_and_is_idempotent(repo):
    doc = repo / "data" / "README.md"
    doc.write_text(marked(*TABLES) + "the end\n")
    first = render(repo)
    assert {s.table for s in first if s.document == doc} == set(TABLES)
    text = doc.read_text()
    assert text.startswith("text\n<!-- results:index -->\n| file | spec |")
    assert text.endswith("<!-- /results:browser_play -->\nthe end\n")
    assert "[`results/memory.json`](results/memory.json)" in text  # links from data/
    assert render(repo) == [] and doc.read_text() == text and check(repo) == []


@pytest.mark.parametrize("path", sorted((ROOT / "data" / "results").glob("*.json")),
                         ids=lambda p: p.name)
def test_every_shipped_result_says_what_made_it_and_holds_no_absolute_path(path):
    data = json.loads(path.read_text())
    assert data.get("spec") and (ROOT / data["spec"]).is_file(), "no spec, or it is gone"
    assert len(data.get("commit", "")) == 40
    assert data["uncommitted_changes"] is False
    text = path.read_text()
    assert not re.search(r'"(/|[A-Za-z]:\\\\)[^"]*"|\s/(tmp|home|work|root|Users)/', text), \
        "an absolute path"
