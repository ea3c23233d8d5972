"""One's own stages: registration, its refusals, plugin files, entry points, and composition with shipped ones."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import dlsched
from dlsched import plugins
from dlsched.core import ClusterView, InputError, JobView
from dlsched.core.ranges import ranged
from dlsched.policies import build_scheduler
from dlsched.policies.registry import STAGES
from testkit import duration_job, small_cluster

SMALL = {"cluster": "sia-hetero-64", "trace": "synthetic:rate=20,hours=1,seed=1", "jobs": 6}


@dataclasses.dataclass
class Newest:
    """Newest job first (the reverse of FIFO), to see that an ordering of one's own is the one used."""

    name: str = "newest"

    def order(self, view: ClusterView, jobs: list[JobView]) -> list[JobView]:
        return sorted(jobs, key=lambda j: (-j.spec.submit_time_s, j.job_id))


def view_of(*submits: float) -> tuple[ClusterView, list[JobView]]:
    from dlsched.core import JobStatus, Placement

    jobs = [JobView(spec=duration_job(f"j{i}", t, 1, 60.0), status=JobStatus.QUEUED, placement=Placement.empty(),
                    batch_size=None, age_s=0.0, wait_s=0.0, attained_gpu_s=0.0, attained_service_s=0.0,
                    restarts=0, progress_fraction=0.0, start_time_s=None) for i, t in enumerate(submits)]
    return ClusterView(time_s=100.0, round_s=60.0, cluster=small_cluster(), jobs=jobs), jobs


def test_a_registered_dataclass_composes_with_shipped_stages() -> None:
    dlsched.register_stage("ordering", "newest", Newest)
    scheduler = build_scheduler("fifo", ordering="newest")
    assert scheduler.stages() == {"admission": "all", "ordering": "newest", "allocation": "gang",
                                  "placement": "packed-sticky", "coordination": "none"}
    view, jobs = view_of(1.0, 3.0, 2.0)
    assert [j.job_id for j in scheduler.ordering.order(view, jobs)] == ["j1", "j2", "j0"]


def test_a_factory_s_defaulted_parameters_are_its_tunables_and_are_parsed_by_their_defaults_type() -> None:
    built: list[tuple[float, int]] = []

    def make(boost: float = 1.5, seed: int = 0) -> Newest:
        built.append((boost, seed))
        return Newest()

    dlsched.register_stage("ordering", "boosted", make)
    scheduler = build_scheduler("fifo", ordering="boosted", settings={"boost": "2.5"}, seed=7)
    assert built[-1] == (2.5, 7)  # the tunable from text, the run's seed handed over
    assert scheduler.ordering.name == "boosted"
    view, jobs = view_of(1.0, 2.0)
    assert [j.job_id for j in scheduler.ordering.order(view, jobs)] == ["j1", "j0"]  # calls reach the stage
    with pytest.raises(InputError, match="boost"):
        build_scheduler("fifo", ordering="boosted", settings={"boost": "fast"})


def test_declared_tunables_keep_their_range() -> None:
    dlsched.register_stage("ordering", "ranged-one", lambda weight=1.0: Newest(),
                           tunables={"weight": ranged(1.0, 0.0, 10.0)})
    build_scheduler("fifo", ordering="ranged-one", settings={"ordering.weight": "3"})
    with pytest.raises(InputError, match=r"weight must be .*got 11") as info:
        build_scheduler("fifo", ordering="ranged-one", settings={"ordering.weight": "11"})
    assert info.value.field == "ordering.weight"


def test_a_factory_returning_the_wrong_kind_of_object_fails_when_the_scheduler_is_built() -> None:
    class Duck:
        def place(self, view: ClusterView, plan: object) -> None:
            return None

    dlsched.register_stage("placement", "no-place", lambda: Newest())
    with pytest.raises(InputError, match="returned Newest, which has no method 'place'") as info:
        build_scheduler("fifo", placement="no-place")
    assert info.value.field == "placement"
    dlsched.register_stage("placement", "duck", lambda: Duck())
    with pytest.raises(InputError, match="returned Duck, which is not a dlsched.PlacementStage"):
        build_scheduler("fifo", placement="duck")


@pytest.mark.parametrize(("args", "field", "message"), [
    (("orderng", "x", Newest), "kind", "did you mean 'ordering'"),
    (("ordering", "fifo", Newest), "name", "shipped stage"),
    (("ordering", "with.dot", Newest), "name", "letters, digits"),
    (("ordering", "", Newest), "name", "letters, digits"),
    (("placement", "newest-place", Newest), "stage", "no method 'place'"),
    (("ordering", "x", 42), "stage", "expected a class or a function"),
    (("ordering", "x", lambda slack: Newest()), "tunables", "'slack' .* has no default"),
    (("ordering", "x", lambda bad=[1]: Newest()), "tunables", "mutable default"),
])
def test_registration_refuses_what_cannot_work(args: tuple, field: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        dlsched.register_stage(*args)
    assert info.value.field == field


def test_an_allocation_class_must_build_on_the_contract() -> None:
    @dataclasses.dataclass
    class Loose:
        name: str = "loose"

        def allocate(self, view: ClusterView, ordered: list[JobView]) -> object:
            return None

    with pytest.raises(InputError, match="must subclass dlsched.AllocationStage"):
        dlsched.register_stage("allocation", "loose", Loose)


def test_a_dataclass_tunable_without_default_is_refused() -> None:
    @dataclasses.dataclass
    class NoDefault:
        weight: float
        name: str = "no-default"

        def order(self, view: ClusterView, jobs: list[JobView]) -> list[JobView]:
            return jobs

    with pytest.raises(InputError, match="every tunable needs a default"):
        dlsched.register_stage("ordering", "no-default", NoDefault)


def test_registering_one_s_own_name_again_replaces_it() -> None:
    dlsched.register_stage("ordering", "again", Newest)
    dlsched.register_stage("ordering", "again", lambda: Newest(), description="second")
    assert STAGES["ordering"]["again"].description == "second"
    assert ("ordering", "again") in plugins.user_stages()


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def test_a_plugin_file_registers_its_stages_once(tmp_path: Path) -> None:
    plugin = write(tmp_path / "my_stage.py", """
        import dataclasses
        import dlsched

        LOADS = []
        LOADS.append(1)

        @dataclasses.dataclass
        class Oldest:
            name: str = "oldest"

            def order(self, view, jobs):
                return sorted(jobs, key=lambda j: j.spec.submit_time_s)

        dlsched.register_stage("ordering", "oldest", Oldest)
    """)
    first = dlsched.load_plugin_file(plugin)
    again = dlsched.load_plugin_file(str(plugin))
    assert first is again and first.LOADS == [1]
    assert build_scheduler("fifo", ordering="oldest").ordering.name == "oldest"


@pytest.mark.parametrize(("text", "message"), [
    ("import no_such_module_here\n", r"plugin failed to import: ModuleNotFoundError"),
    ("def broken(:\n", r"broken_plugin\.py:1: plugin has a syntax error"),
    ("import dlsched\ndlsched.register_stage('ordering', 'fifo', object)\n", r"plugin: .*shipped stage"),
])
def test_a_plugin_that_fails_names_its_file(tmp_path: Path, text: str, message: str) -> None:
    plugin = write(tmp_path / "broken_plugin.py", text)
    with pytest.raises(InputError, match=message) as info:
        dlsched.load_plugin_file(plugin)
    assert str(plugin) in str(info.value)
    assert not any(m.startswith("dlsched_plugin_broken_plugin") for m in sys.modules)


def test_a_missing_plugin_file_says_not_found(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        dlsched.load_plugin_file(tmp_path / "absent.py")


def installed_package(root: Path, module: str = "lifo_stages") -> Path:
    """A package installed the way pip leaves it: its module and a dist-info with a dlsched.stages entry point."""
    write(root / f"{module}.py", """
        import dataclasses
        import dlsched

        @dataclasses.dataclass
        class Lifo:
            name: str = "lifo"

            def order(self, view, jobs):
                return sorted(jobs, key=lambda j: -j.spec.submit_time_s)

        def register():
            dlsched.register_stage("ordering", "lifo", Lifo)
    """)
    info = root / "lifo_stages-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lifo-stages\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[dlsched.stages]\nlifo = {module}:register\n")
    return root


def test_an_installed_package_s_entry_point_registers_its_stages(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(installed_package(tmp_path)))
    loaded = plugins.load_entry_points(again=True)
    assert "lifo = lifo_stages:register" in loaded
    assert build_scheduler("fifo", ordering="lifo").ordering.name == "lifo"


def test_a_broken_entry_point_names_its_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = installed_package(tmp_path, "half_stages")
    (root / "half_stages.py").write_text("raise RuntimeError('half installed')\n")
    monkeypatch.syspath_prepend(str(root))
    with pytest.raises(InputError, match="entry point 'lifo = half_stages:register' of package 'lifo-stages' "
                                         "failed to load: RuntimeError: half installed"):
        plugins.load_entry_points(again=True)


def test_the_cli_loads_an_installed_package_s_stages(tmp_path: Path) -> None:
    root = installed_package(tmp_path)
    src = Path(dlsched.__file__).parents[1]
    env = {"PYTHONPATH": f"{src}:{root}", "PATH": "/usr/bin:/bin", "DLSCHED_DATA": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "dlsched", "simulate", "--ordering", "lifo", "--jobs", "5",
                          "--trace", SMALL["trace"], "--format", "json"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert '"policy": "fifo+lifo"' in run.stdout


def test_one_s_own_stage_runs_in_a_simulation_and_in_worker_processes() -> None:
    dlsched.register_stage("ordering", "newest", Newest)
    one = dlsched.simulate(policy="fifo", ordering="newest", **SMALL)
    assert one.summary["policy"] == "fifo+newest"
    assert one.config.ordering == "newest"
    both = dlsched.compare("fifo", {"policy": "fifo", "ordering": "newest"}, workers=2, **SMALL)
    assert list(both.summary.index) == ["fifo", "fifo+newest"]
    assert both.summary.loc["fifo+newest", "jobs"] == 6


def test_fixed_settings_make_a_named_variant_whose_pinned_field_is_no_tunable() -> None:
    @dataclasses.dataclass
    class Windowed:
        window: int = 2
        name: str = "windowed"

        def order(self, view: ClusterView, jobs: list[JobView]) -> list[JobView]:
            return jobs[self.window:] + jobs[:self.window]

    dlsched.register_stage("ordering", "windowed-3", Windowed, window=3)
    assert build_scheduler("fifo", ordering="windowed-3").ordering.window == 3
    with pytest.raises(InputError, match="no tunable 'window'"):
        build_scheduler("fifo", ordering="windowed-3", settings={"window": "1"})
    with pytest.raises(InputError, match="fixed settings .* need a dataclass"):
        dlsched.register_stage("ordering", "lambda-fixed", lambda: Windowed(), window=3)
