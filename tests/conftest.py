from __future__ import annotations

import importlib.util
import os
import resource
import shutil
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.support import zygote
from tests.support.loopback import socket_dir as loopback_socket_dir
from tests.support.private_dir import NoPrivateBase, private_base
from tests.support.second_user import User, ensure_user
from tests.support.sglang_wheel import sglang_root, sglang_site

# CPU per test, children included, when $SPARK_VALIDATE_CPU_PROFILE is set (bench/cpu_by_file.py reads it)
pytest_plugins = ["tests.support.cpu_profile"]


# Files the verdict must trust (packs, env files, attestations) go to tmp_path, so pytest's temporary tree
# lives in a private base directory whose whole chain was checked first (tests/support/private_dir.py):
# never /tmp, which is world-writable, and never the checkout's path taken on trust (a clone under /tmp).
# Tests that need a shared directory make one on purpose (the ``shared`` fixture).
@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Before any temporary directory exists; a usage error here is pytest's one ``ERROR:`` line, exit 4."""
    if "PYTEST_DEBUG_TEMPROOT" not in os.environ:
        try:
            os.environ["PYTEST_DEBUG_TEMPROOT"] = str(private_base())
        except NoPrivateBase as exc:
            raise pytest.UsageError(str(exc)) from None
    _take_sglang_env_status(config)
    # the simulator is a server to discovery only through its installed entry point: an editable install
    # made before pyproject.toml declared it has none, and every test that discovers a simulator would fail
    # as "no SGLang server process found"
    from importlib.metadata import entry_points

    if not any(ep.name == "sim" for ep in entry_points(group="spark_validate.stand_ins")):
        raise pytest.UsageError(
            "the installed spark-validate metadata declares no spark_validate.stand_ins entry point (an "
            "install older than pyproject.toml's): reinstall, e.g. .venv/bin/pip install --no-deps "
            "--no-build-isolation -e ."
        )


@pytest.fixture(scope="session")
def stock_sglang_site() -> Path:
    """site-packages-like directory holding SGLang 0.5.23's real files, unpatched."""
    return sglang_site()


@pytest.fixture(scope="session")
def stock_sglang_root() -> Path:
    return sglang_root()


@pytest.fixture(scope="session")
def api_types(stock_sglang_root: Path) -> ModuleType:
    """SGLang's generated JSON contract (``sglang/api/v1/api_types.py``), loaded by file path: it needs only
    msgspec and never imports sglang itself."""
    path = stock_sglang_root / "api" / "v1" / "api_types.py"
    spec = importlib.util.spec_from_file_location("sglang_api_types_contract", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _no_registered_secrets_across_tests() -> Iterator[None]:
    """``redact.register_secret`` is process-wide by design (a CLI run registers its key once); in the test
    process one test's URL password or key must not change what another test's redaction shows."""
    from validator import redact

    saved = set(redact._REGISTERED)
    yield
    redact._REGISTERED.clear()
    redact._REGISTERED.update(saved)


@pytest.fixture(scope="module")
def attacker() -> User:
    """The second local account the trust tests attack as (created once, as root)."""
    return ensure_user()


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A private directory with a short path for AF_UNIX sockets (tests.support.loopback.socket_dir)."""
    with loopback_socket_dir() as path:
        yield path


@pytest.fixture
def shared() -> Iterator[Path]:
    """A real shared directory (a team's working directory, a scratch area): anyone may write it."""
    path = Path(tempfile.mkdtemp(prefix="sv-shared-", dir="/tmp"))
    os.chmod(path, 0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# ---- markers: what a test needs beyond Python, and what the quick run leaves out --------------------------
#
# One table, not a line in each file, so that the whole picture is reviewed in one place. A key is a test
# module (``test_x``) or one test in it (``test_x::test_name``, parameters ignored). Every test needing a
# marked tool is also ``slow``: ``python -m pytest -q -m "not slow"`` is the quick run, needing nothing
# outside the Python environment; CI (``.ci/run``) runs everything.
NEEDS: dict[str, tuple[str, ...]] = {
    "test_cluster_e2e": ("prometheus",),
    "test_deploy_e2e": ("prometheus",),
    "test_deploy_prometheus_rules": ("prometheus",),
    "test_alertmanager_inhibits": ("prometheus",),  # Debian's prometheus-alertmanager
    "test_partial_coverage::test_format_prom_is_valid_exposition_and_tells_unproven_from_failing": (
        "prometheus",
    ),
    "test_partial_coverage::test_preflight_format_prom_for_the_textfile_collector": ("prometheus",),
    "test_partial_coverage::test_sidecar_says_partial_on_readyz_report_verbose_and_metrics": ("prometheus",),
    "test_serve_sidecar::test_exposition_passes_promtool": ("prometheus",),
    "test_launch_refusal::test_refused_launch_is_exported_alerted_and_cleared_by_a_start": ("prometheus",),
    "test_status_page": ("chromium",),
    "test_deploy_systemd": ("systemd",),
    "test_log_follow::test_journal_failures_are_one_line_errors": ("systemd",),
    "test_log_follow::test_journal_reads_the_current_invocation_incrementally": ("systemd",),
    "test_sidecar_log::test_the_sidecar_follows_the_journal_across_a_restart": ("systemd",),
    "test_server_progress_log::test_the_journal_times_each_batch_line_by_its_entry": ("systemd",),
    "test_deploy_compose": ("compose",),
    "test_running_process": ("second_user",),
    "test_sidecar_follows": ("second_user",),
    "test_failure_not_lost": ("second_user",),  # and root: each node runs in its own PID namespace
    "test_proc_trust": ("second_user",),
    "test_redteam": ("second_user",),  # and root: unshare --net, a unit's User= that is another user
    "test_unreadable_paths": ("second_user",),
    "test_listening::test_another_users_descriptors_are_not_visible_and_say_so": ("second_user",),
    "test_deploy_kubernetes::test_both_containers_run_as_the_images_server_user": ("second_user",),
    "test_plugin_contract": ("sglang_env",),
    "test_plugin_dist": ("sglang_env",),
    "test_sglang_parity": ("sglang_env",),
    "test_sglang_table::test_generates_and_caches_the_installed_builds_table": ("sglang_env",),
    "test_sim_bench_serving": ("sglang_env",),
}
# Fixtures that mean a marker wherever a test uses them.
FIXTURE_NEEDS: dict[str, str] = {"attacker": "second_user"}
TOOL_MARKERS = ("prometheus", "chromium", "systemd", "compose", "second_user", "sglang_env")
# Slow without any tool: long differential or fuzz campaigns, builds. Every test that starts a process is
# slow too, found from its code (below), so that a new test is classified without being listed here.
SLOW: tuple[str, ...] = (
    "test_shell_differential",
    "test_hostile_fuzz",
    "test_script_scale",
    "test_packaging",
    "test_trap_physics",  # CPU torch
    "test_sim_scenarios::test_degenerate_flaky_malformed",
    "test_attestation_reader::test_a_mutated_document_is_valid_or_one_input_error",
    "test_probe_stats::test_marginal_server_is_never_passed",
    "test_probe_dspark::test_marginal_drafter_is_never_passed",
    "test_probe_dspark::test_slowest_workload_is_never_failed",
    "test_listening::test_thousands_of_processes_are_scanned_in_bounded_time",
    "test_sim_recipes::test_ring_failure_in_process_refuses_then_settles_crashed",
)
# Names whose use (a call, an attribute) means a test starts a process: an interpreter, a simulator, the
# sidecar, a tool, a child as another user. The in-process live check too (``sim_in_process``,
# ``check_in_process``): little CPU, but it waits out start-up, --wait and the probe as a process does.
PROCESS_STARTERS = frozenset(
    {
        "subprocess", "Popen", "create_subprocess_exec", "create_subprocess_shell", "fork", "run_cli",
        "run_check", "preflight_json", "sim_process", "daemon_process", "sim_on_port", "SimOnPort",
        "run_tool", "run_as", "call_as", "running_prometheus", "sim_in_process",
        "check_in_process", "preflight_in_process", "preflight_json_in_process", "cli_in_process",
    }
)  # fmt: skip


def _names(code: types.CodeType) -> set[str]:
    """Every global or attribute name a function's code uses, its nested functions and lambdas included."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _names(const)
    return found


def _starts_process(fn: object, seen: dict[object, int], depth: int = 0) -> bool:
    """Whether ``fn``, or a function of the test suite it calls (followed three levels deep), uses one
    of PROCESS_STARTERS. A function met again nearer the test is followed again (``seen`` keeps the
    nearest depth), so the answer does not hang on the order names are visited in (a set's order changes
    with each process's hash seed, and xdist's workers must classify alike)."""
    fn = getattr(fn, "__wrapped__", fn)
    code = getattr(fn, "__code__", None)
    if code is None or depth > 3 or seen.get(fn, 4) <= depth:
        return False
    seen[fn] = depth
    names = _names(code)
    if names & PROCESS_STARTERS:
        return True
    scope: dict[str, object] = getattr(fn, "__globals__", {})
    for name in sorted(names):
        called = scope.get(name)
        if str(getattr(called, "__module__", "")).startswith("tests") and _starts_process(
            called, seen, depth + 1
        ):
            return True
    return False


def _is_slow(item: pytest.Item, module: str, test: str) -> bool:
    if module in SLOW or test in SLOW:
        return True
    seen: dict[object, int] = {}
    if _starts_process(getattr(item, "function", None), seen):
        return True
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        defs = info.name2fixturedefs.get(name, ()) if info is not None else ()
        if any(_starts_process(d.func, seen) for d in defs if d.baseid.startswith("tests")):
            return True
    return False


# ---- order: the longest files first ---------------------------------------------------------------------
#
# .ci/run hands whole files to xdist workers in collection order (--dist loadfile --no-loadscope-reorder),
# so the files whose tests wait longest (timeouts, real tools, stalls) start first and no worker ends the
# run on one of them alone. WALL_BY_FILE holds each file's wall seconds from a CI run (the ``--wall-table``
# of ``python -m bench.cpu_by_file``); a file not in it runs after those that are, in collection order.
WALL_BY_FILE = Path(__file__).with_name("wall_by_file.txt")


def _walls() -> dict[str, float]:
    walls: dict[str, float] = {}
    for line in WALL_BY_FILE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            seconds, name = line.split()
            walls[name] = float(seconds)
    return walls


def _longest_first(items: list[pytest.Item]) -> None:
    walls = _walls()
    items.sort(key=lambda item: -walls.get(item.path.name, -1.0))  # stable: a file's tests keep their order


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Apply NEEDS, FIXTURE_NEEDS and SLOW (see above) to the collected tests; order the files."""
    _longest_first(items)
    for item in items:
        module = item.path.stem
        test = f"{module}::{getattr(item, 'originalname', item.name)}"
        wanted = {*NEEDS.get(module, ()), *NEEDS.get(test, ())}
        wanted.update(m for f, m in FIXTURE_NEEDS.items() if f in getattr(item, "fixturenames", ()))
        wanted.update(m for m in TOOL_MARKERS if item.get_closest_marker(m) is not None)
        if wanted or _is_slow(item, module, test):
            wanted.add("slow")
        for name in sorted(wanted):
            item.add_marker(name)


# ---- warm children: which tests' ``python -m validator`` children may be forked from a zygote -------------
#
# tests/support/zygote.py: a warm interpreter that has imported the validator forks each child, which is
# then a real process (its own PID, a child of the test process, its own descriptors, environment,
# directory and exit status) without an interpreter start or an import. Listed here (a module, or one
# test as ``test_x::test_name``) only where the subject is the verdict, the exit code or the output; a
# test whose subject is the interpreter, its imports, its environment, /proc of the child, another user
# or packaging keeps a real exec, and so does every test not listed.
WARM_CHILDREN: frozenset[str] = frozenset(
    {
        "test_check_live",  # check's report and exit code against the simulator
        "test_verdicts",  # check's and preflight's verdicts
        "test_cli_output_exits",  # exit codes and --output (its signal and pipe tests Popen, exec'd)
        "test_launch_refusal",  # launch's refusal and exit code
        "test_fleet_smalls",  # check's report on a fleet's packs
        "test_preflight",  # launch's refusal of a preflight failure
        "test_sglang_table",  # the table sglang-table writes (the server's interpreter is exec'd)
        "test_unreadable_paths",  # root's verdict on another user's unreadable paths
        "test_launch_program",  # which install the server's interpreter imports (exec'd by preflight)
        "test_attestation_trust",  # forged attestations: check's verdict (the simulators stay exec'd)
        "test_check_secrets",  # the key in check's outputs and stderr
        "test_check_selection",  # --check/--skip: reports and usage errors
        "test_cli_exits",  # exit codes and messages (not the closed-pipe test below)
        "test_kubernetes_inputs",  # preflight's report of a manifest, usage errors
        "test_log_corpus",  # check --log: the report
        "test_operator_small",  # messages and exit codes
        "test_output_registry",  # a usage error
        "test_partial_coverage",  # preflight --format prom --output: the file's content
        "test_rulepack",  # rules lint/show: problems and exit codes
        "test_rulepack_extends",  # rules lint/list of packs with extends:
        "test_rulepack_lint",  # rules lint's report and exit codes
        "test_script_scale",  # preflight --script's report (the bound is a guard, not a timing)
        "test_server_progress",  # check's verdict on a stalled simulator
        "test_server_progress_log",  # check --log's verdict
        "test_share_skipped",  # preflight's verdict on a build (not the second user's files below)
        "test_sidecar_log",  # check's report on a truncated, rotated or missing log
        "test_sidecar_readiness",  # serve's usage error (the sidecar itself stays exec'd)
        "test_sim_api_style",  # check's verdict on each API family
        "test_sim_protocol",  # check's verdict during and after start-up
        # planted packs, links and FIFOs (the second user plants with its own exec'd children; the
        # validator's children are the ones judging, as root): the verdict. A working directory holding
        # a module the zygote imported is exec'd (tests/support/zygote.py).
        "test_trust_boundaries",
        "test_trust_links",
        "test_status_page",  # check's HTML report, read by a real browser (the sidecar stays exec'd)
    }
)
# Tests of those modules that keep a real exec: a closed pipe's buffering, another user's files.
COLD_CHILDREN: frozenset[str] = frozenset(
    {
        "test_cli_exits::test_a_reader_that_closes_the_pipe_ends_quietly",
        "test_share_skipped::test_hostile_worker_files_of_another_user_are_no_pass",
    }
)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    module = item.path.stem
    test = f"{module}::{getattr(item, 'originalname', item.name)}"
    warm = (module in WARM_CHILDREN or test in WARM_CHILDREN) and test not in COLD_CHILDREN
    with zygote.opted_in(warm):
        yield


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop this process's zygotes, so that nothing is left behind and their own CPU (imports, forks) is
    counted: by ``RUSAGE_CHILDREN`` (bench/test_files_cpu.py) and as a line of the CPU profile."""

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    before = children_cpu()
    zygote.stop_all()
    recorder = session.config.pluginmanager.get_plugin("cpu-profile")
    if recorder is not None:
        recorder.record("tests/support/zygote.py::the zygotes' own CPU", children_cpu() - before)


# ---- SGLang's environment, built beside the tests ---------------------------------------------------------
#
# .ci/run starts the tests before SGLang's environment is in (it builds beside them) and names the file its
# build step writes when it ends ("EXIT_STATUS SECONDS"): a test marked sglang_env waits for that file
# (bounded: within pytest's own timeout), and fails at once, naming the build's log, if the build failed.
# A process that runs tests takes the variable out of its environment (as tests/support/cpu_profile.py
# does its own): the tests' children would carry it, and a SPARK_VALIDATE_ variable is part of what
# launch.drift compares between a running server and its declaration.
SGLANG_ENV_STATUS = "SPARK_VALIDATE_SGLANG_ENV_STATUS"
SGLANG_ENV_WAIT_S = 280.0  # within pytest-timeout's 300 s for the whole test, its setup included
_sglang_env_status: list[Path] = []


def _take_sglang_env_status(config: pytest.Config) -> None:
    """Called by pytest_configure (above)."""
    if getattr(config.option, "numprocesses", None) and "PYTEST_XDIST_WORKER" not in os.environ:
        return  # the xdist controller runs no test: its workers inherit the variable
    status = os.environ.pop(SGLANG_ENV_STATUS, "")
    if status:
        _sglang_env_status[:] = [Path(status)]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if _sglang_env_status and item.get_closest_marker("sglang_env") is not None:
        wait_for_build(_sglang_env_status[0], SGLANG_ENV_WAIT_S)


def wait_for_build(status: Path, bound_s: float) -> None:
    """Return once ``status`` says the build succeeded; fail the test if it says otherwise or never comes."""
    deadline = time.monotonic() + bound_s
    while not status.exists():
        if time.monotonic() > deadline:
            pytest.fail(
                f"SGLang's environment was not built within {bound_s:g} s ({status} missing)", pytrace=False
            )
        time.sleep(0.5)
    rc = status.read_text(encoding="utf-8").split()[:1]
    if rc != ["0"]:
        log = status.with_suffix(".log")
        pytest.fail(
            f"SGLang's environment failed to build (exit {' '.join(rc) or '?'}): see {log}", pytrace=False
        )
