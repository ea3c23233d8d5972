"""``dlsched spec check``: every problem of a spec at once, one ``error:`` line each; "ok" otherwise."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from dlsched.cli import app

runner = CliRunner()


def check(path: Path):
    return runner.invoke(app, ["spec", "check", str(path)])


def test_every_problem_at_once_with_its_field_and_a_suggestion(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("name: 'bad name!'\ncomand: python train.py\ngpus: 0\ngpu_types: [a10O, h10O]\n"
                    "resources: {cpus: 2}\nworking_dir: missing\n")
    res = check(path)
    assert res.exit_code == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert all(line.startswith(f"error: {path} field '") for line in lines), lines
    by_field: dict[str, list[str]] = {}
    for line in lines:
        field = line.split("field '", 1)[1].split("'", 1)[0]
        by_field.setdefault(field, []).append(line)
    assert set(by_field) == {"working_dir", "name", "command", "gpus", "gpu_types", "resources.cpus", "comand"}
    assert "did you mean 'command'?" in by_field["comand"][0]
    assert "did you mean 'cpus_per_worker'?" in by_field["resources.cpus"][0]
    assert [("a100" in a, "h100" in b) for a, b in [by_field["gpu_types"]]] == [(True, True)]
    assert "required" in by_field["command"][0] and "not an existing folder" in by_field["working_dir"][0]


def test_the_rules_between_fields_are_all_reported(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("name: x\ncommand: 'true'\ngpus: {min: 1, max: 4}\nadaptivity: rigid\nmax_batch_size: 8\n")
    res = check(path)
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [
        f"error: {path} field 'gpus': a rigid job needs an integer GPU count",
        f"error: {path} field 'max_batch_size': only an adaptive job may give max_batch_size"]


def test_a_good_spec_and_the_shipped_examples_are_ok(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("name: train\ncommand: torchrun --nproc-per-node 2 train.py\ngpus: 2\n")
    res = check(path)
    assert (res.exit_code, res.stdout, res.stderr) == (0, "ok\n", "")
    for example in sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml")):
        assert check(example).stdout == "ok\n", example


def test_a_file_that_is_not_a_spec_is_one_error_line(tmp_path: Path) -> None:
    for name, text, words in (("yaml", "name: [unclosed\n", "not valid YAML"), ("list", "- 1\n", "mapping"),
                              ("tag", "!!python/object/apply:os.system [echo hi]\n", "not valid YAML")):
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        res = check(path)
        assert res.exit_code == 2 and len(res.stderr.splitlines()) == 1 and words in res.stderr, res.stderr
    res = check(tmp_path / "none.yaml")
    assert res.exit_code == 2 and "cannot read" in res.stderr


def test_spec_docs_prints_the_page() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "job-spec.md"
    assert runner.invoke(app, ["spec", "docs"]).stdout == page.read_text()
