"""Results tied to the code that made them, and docs/results.md generated from them.

The document's tables must be what the committed result files give (so text and numbers cannot drift), every
result file must name the commit that made it, and a cached run must be reused only under the same code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from experiment_modules import import_experiments

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "experiments"
RESULTS = EXPERIMENTS / "results"


@pytest.fixture(scope="module")
def gen():
    """experiments/make_results.py, imported without letting the experiment modules change the environment."""
    make_results, _ = import_experiments("make_results", "sia_common")
    return make_results


def test_docs_results_is_what_the_result_files_give(gen, capsys):
    code = gen.main(["--check"])
    assert code == 0, capsys.readouterr().err


def test_every_result_file_names_the_code_that_made_it():
    """Each JSON under experiments/results/ records a commit (a clean one), the dlsched version and the
    configuration of its runs. Files written before this was recorded fail here: re-run them (`make experiments`)."""
    bad = []
    files = sorted(RESULTS.rglob("*.json"))
    assert files, "no result files"
    for path in files:
        data = json.loads(path.read_text())
        rel = path.relative_to(ROOT)
        if not isinstance(data, dict) or not re.fullmatch(r"[0-9a-f]{40}", str(data.get("commit"))):
            bad.append(f"{rel}: no commit")
        elif "dirty" not in data:
            bad.append(f"{rel}: no dirty flag")
        elif data["dirty"] is not False:
            bad.append(f"{rel}: made from a tree with uncommitted changes")
        elif not data.get("dlsched_version"):
            bad.append(f"{rel}: no dlsched_version")
        elif not (isinstance(data.get("configs"), list) and data["configs"]
                  and all(isinstance(c, dict) and c.get("policy") for c in data["configs"])):
            # measurements of one stage (placement time, Gimbal's coordinator and its search, the allocation
            # solvers of figure 4.6): no simulation runs
            if data.get("experiment") not in ("placement_time", "coordination_time", "gimbal_search", "copter_attribution"):
                bad.append(f"{rel}: no run configurations")
    assert not bad, f"{len(bad)} of {len(files)} result files lack provenance, first: " + "; ".join(bad[:5])


def test_generator_fails_naming_a_missing_or_malformed_file(gen, tmp_path, capsys):
    doc = tmp_path / "results.md"
    doc.write_text("# x\n\n<!-- generated: pal_testbed.table -->\nold\n<!-- end generated -->\n")
    results = tmp_path / "results"
    results.mkdir()
    assert gen.main(["--doc", str(doc), "--results", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "pal_testbed.json: missing" in err and "\n" not in err
    (results / "pal_testbed.json").write_text('{"summary": 3}')
    assert gen.main(["--doc", str(doc), "--results", str(results)]) == 2
    assert "pal_testbed.json: malformed" in capsys.readouterr().err
    (results / "pal_testbed.json").write_text("{")
    assert gen.main(["--doc", str(doc), "--results", str(results)]) == 2
    assert "pal_testbed.json: not readable JSON" in capsys.readouterr().err
    assert "old" in doc.read_text()  # nothing written on failure


def test_generator_renders_blocks_and_check_mode_catches_drift(gen, tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    data = {"commit": "a" * 40, "dirty": False, "dlsched_version": "9.9",
            "summary": {"world/fifo": {"tiresias_h": 2.0, "pm_first_h": 1.5, "pal_h": 1.0, "improvement": 0.5,
                                       "makespan_improvement": 0.25}},
            "runs": [{"placement": "pal", "trace": "t", "seed": 0, "avg_jct_s": 10.0},
                     {"placement": "pm-first", "trace": "t", "seed": 0, "avg_jct_s": 11.0},
                     {"placement": "pal", "trace": "t", "seed": 1, "avg_jct_s": 10.0},
                     {"placement": "pm-first", "trace": "t", "seed": 1, "avg_jct_s": 10.0}]}
    (results / "pal_testbed.json").write_text(json.dumps(data))
    doc = tmp_path / "results.md"
    doc.write_text("prose\n<!-- generated: pal_testbed.table -->\n<!-- end generated -->\n"
                   "<!-- generated: pal_testbed.pal_vs_pm_first -->\nstale\n<!-- end generated -->\nmore prose\n")
    args = ["--doc", str(doc), "--results", str(results)]
    assert gen.main([*args, "--check"]) == 1
    assert gen.main(args) == 0
    text = doc.read_text()
    assert "| simulated, world draw, fifo | 2.00 | 1.50 | 1.00 | 50% | 25% |" in re.sub(r" +", " ", text)
    assert "differs from PM-First's in 1 of 2 paired runs" in text and "stale" not in text
    assert "`experiments/results/" not in text or "commit aaaaaaa" in text
    assert "commit aaaaaaa, dlsched 9.9" in text and text.startswith("prose\n") and text.endswith("more prose\n")
    assert gen.main([*args, "--check"]) == 0
    doc.write_text(text.replace("1.50", "1.49"))
    assert gen.main([*args, "--check"]) == 1
    assert "differs from the result files" in capsys.readouterr().err


def test_unknown_table_or_unclosed_block_is_refused(gen, tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    (results / "pal_testbed.json").write_text(json.dumps({"summary": {}, "runs": []}))
    doc = tmp_path / "results.md"
    doc.write_text("<!-- generated: pal_testbed.nosuch -->\n<!-- end generated -->\n")
    assert gen.main(["--doc", str(doc), "--results", str(results)]) == 2
    assert "has no table 'nosuch'" in capsys.readouterr().err
    doc.write_text("<!-- generated: pal_testbed.table -->\nno end\n")
    assert gen.main(["--doc", str(doc), "--results", str(results)]) == 2
    assert "has no '<!-- end generated -->'" in capsys.readouterr().err


def test_same_code_requires_commit_version_and_the_same_uncommitted_changes(monkeypatch):
    from dlsched.sim import about

    clean = {"commit": "c" * 40, "dirty": False}
    monkeypatch.setattr(about, "code_state", lambda: dict(clean))
    now = about.provenance()
    assert about.same_code(now)
    assert not about.same_code({**now, "commit": "d" * 40})
    assert not about.same_code({**now, "dlsched_version": "0.0.0"})
    assert not about.same_code({**now, "dirty": True, "diff_sha": "x"})  # dirty entry, clean tree
    monkeypatch.setattr(about, "code_state", lambda: {**clean, "dirty": True, "diff_sha": "x"})
    assert not about.same_code(now)  # clean entry, dirty tree
    assert about.same_code({**now, "dirty": True, "diff_sha": "x"})
    assert not about.same_code({**now, "dirty": True, "diff_sha": "y"})
    monkeypatch.setattr(about, "code_state", lambda: {"commit": None, "dirty": None})
    assert not about.same_code(about.provenance())  # outside git nothing can be told apart: never reuse


def test_code_state_of_this_checkout_names_head():
    from dlsched.sim import about

    state = about.code_state()
    if state["commit"] is None:
        pytest.skip("not a git checkout")
    assert re.fullmatch(r"[0-9a-f]{40}", state["commit"]) and isinstance(state["dirty"], bool)
    assert ("diff_sha" in state) == state["dirty"]


def test_sia_cache_is_reused_only_for_the_same_configuration_and_code(gen, monkeypatch, tmp_path):
    import sia_common as sc

    from dlsched.sim import about

    monkeypatch.setattr(about, "code_state", lambda: {"commit": "c" * 40, "dirty": False})
    s = sc.spec("fifo", "sia-hetero-64", "synthetic:jobs=4", tag="t")
    rec = {**about.provenance([{"policy": "fifo"}]), "requested": s["config"].model_dump(mode="json"),
           "extract": None, "tag": "t", "summary": {"avg_jct_s": 1.0}}
    assert sc.valid(s, rec)
    assert not sc.valid(s, {**rec, "commit": "d" * 40})
    assert not sc.valid(s, {k: v for k, v in rec.items() if k != "commit"})
    assert not sc.valid(sc.spec("fifo", "sia-hetero-64", "synthetic:jobs=4", seed=1, tag="t"), rec)
    monkeypatch.setattr(sc, "RESULTS", tmp_path)
    sc._save(s, rec)
    assert sc.load_cached(s) == rec
    monkeypatch.setattr(about, "code_state", lambda: {"commit": "e" * 40, "dirty": False})
    assert sc.load_cached(s) is None  # another commit: re-run


def test_purge_stale_removes_only_files_not_made_by_the_current_code(gen, monkeypatch, tmp_path):
    from dlsched.sim import about

    monkeypatch.setattr(about, "code_state", lambda: {"commit": "c" * 40, "dirty": False})
    (tmp_path / "sia").mkdir()
    keep = tmp_path / "sia" / "now.json"
    keep.write_text(json.dumps(about.provenance()))
    for name, body in (("old.json", {**about.provenance(), "commit": "d" * 40}), ("none.json", {"runs": []})):
        (tmp_path / name).write_text(json.dumps(body))
    (tmp_path / "broken.json").write_text("{")
    assert gen.purge_stale(tmp_path) == 3
    assert [p.name for p in tmp_path.rglob("*.json")] == ["now.json"]
    monkeypatch.setattr(about, "code_state", lambda: {"commit": "c" * 40, "dirty": True, "diff_sha": "x"})
    with pytest.raises(gen.ResultError, match="uncommitted changes"):
        gen.purge_stale(tmp_path)
    assert keep.exists()
