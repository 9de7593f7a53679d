"""Tasks that bring their own container: Terminal-Bench 2.0 / 1 folders, SWE-bench instances.

Offline: the formats load (and bad ones are one-line errors), the limits are the task's capped
by the benchmark's, SWE-bench's grading rule and the patch applier. Under the docker backend
(skipped without a daemon): every example's reference solution passes and its untouched state
fails; forged rewards (a planted reward file, fake test runners, a process left behind) fail; a
changed task is re-built; a user's agent binary runs inside the challenge container.
"""

from __future__ import annotations

import asyncio
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from evalgate.config.spec.benchmarks import AgentBenchmark
from evalgate.errors import ConfigError, InfraError
from evalgate.sandbox import SandboxConfig, Sandboxes, backend_class, open_backend
from evalgate.sandbox._docker_image import TAG_PREFIX, Images
from evalgate.sandbox.docker import CHALLENGE_CAPS, DockerSandbox
from evalgate.serve.base import Endpoint
from evalgate.suites.agent import Attempt, load_tasks, run_task
from evalgate.suites.agent import swe as swe_grading
from evalgate.suites.agent._apply_patch import apply
from evalgate.suites.agent.suite import AgentSuite
from evalgate.suites.agent.verify import challenge_config
from tests.conftest import ROOT

TB_TASKS = ROOT / "examples" / "terminal-bench" / "tasks"
SWE_FILE = ROOT / "examples" / "swe-bench" / "instances.yaml"
DOCKER = backend_class("docker").unavailable()
needs_docker = pytest.mark.skipif(DOCKER is not None, reason=f"no docker backend: {DOCKER}")
CONFIG = SandboxConfig(timeout_s=300, memory_mb=1024, disk_mb=2048)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


class ScriptAgent:
    """A scripted agent: the task's reference solution (``solve``), then ``script`` (bash)."""

    def __init__(self, script: str = "", *, solve: bool = False) -> None:
        self.script, self.solve = script, solve

    async def run(self, attempt: Attempt) -> None:
        box, task, record = attempt.box, attempt.task, attempt.record
        for text in ([task.solution] if self.solve else []) + (
            [self.script] if self.script else []
        ):
            result = await box.exec(["bash", "-s"], stdin=text, timeout_s=120)
            record.exit_code = result.exit_code
            record.log += result.stdout + result.stderr


def _run_all(tasks: list[Any], agent: Any) -> list[Any]:
    backend = open_backend("docker")

    async def go() -> list[Any]:
        return await asyncio.gather(
            *(run_task(t, agent, None, backend=backend, sandbox=CONFIG) for t in tasks)
        )

    return run(go())


# -- the formats, offline ------------------------------------------------------------------


def test_terminal_bench_2_folder() -> None:
    (task,) = load_tasks(TB_TASKS / "count-5xx")
    c = task.container
    assert c is not None and c.format == "terminal-bench"
    assert task.prompt.startswith("`/app/app.log` is a web server's access log")
    assert (task.timeout_s, task.check.timeout_s) == (180.0, 60.0)  # [agent] / [verifier]
    assert (c.cpus, c.memory_mb, c.disk_mb) == (1.0, 512, 1024)  # memory "512M", storage "1G"
    assert c.build is not None and c.build.context == str(TB_TASKS / "count-5xx" / "environment")
    assert c.command == "bash /tests/test.sh" and set(c.tests) == {"test.sh", "test_outputs.py"}
    assert task.solution is not None and "awk" in task.solution


def test_terminal_bench_1_folder() -> None:
    (task,) = load_tasks(TB_TASKS / "merge-inventory")
    c = task.container
    assert c is not None and c.format == "terminal-bench-1"
    assert task.prompt.startswith("The folder /app/data holds one CSV file per warehouse")
    assert (task.timeout_s, task.check.timeout_s) == (180.0, 60.0)
    assert c.env == {"TEST_DIR": "/tests"} and c.command == "bash /tests/run-tests.sh"
    assert set(c.tests) == {"run-tests.sh", "test_outputs.py"} and c.test_modes["run-tests.sh"] & 1
    assert c.build is not None and c.build.context == str(TB_TASKS / "merge-inventory")


def test_a_folder_mixes_formats(tmp_path: Path) -> None:
    shutil.copytree(TB_TASKS, tmp_path / "tasks")
    shutil.copytree(ROOT / "benchmarks" / "agent-basics" / "hello-file", tmp_path / "tasks" / "hf")
    tasks = {t.id: t for t in load_tasks(tmp_path / "tasks")}
    assert set(tasks) == {"count-5xx", "fix-wordfreq", "merge-inventory", "hf"}
    assert tasks["hf"].container is None and tasks["fix-wordfreq"].container is not None
    # a prebuilt image wins over the Dockerfile (Harbor's docker_image)
    toml = tmp_path / "tasks" / "count-5xx" / "task.toml"
    toml.write_text(toml.read_text() + 'docker_image = "example/count-5xx:1"\n')
    (task,) = load_tasks(tmp_path / "tasks" / "count-5xx")
    assert task.container is not None
    assert (task.container.image, task.container.build) == ("example/count-5xx:1", None)


def test_swe_instance_file() -> None:
    (task,) = load_tasks(SWE_FILE)
    c = task.container
    assert task.id == "textkit__textkit-1" and c is not None and c.swe is not None
    assert c.format == "swe-bench" and c.build is not None
    assert c.swe.fail_to_pass == (
        "test_runs_of_separators_collapse "
        "(tests.test_slug.SlugTest.test_runs_of_separators_collapse)",
    )
    assert len(c.swe.pass_to_pass) == 3 and c.swe.test_cmd == "python3 -m unittest -v"
    assert "runs of separators" in task.prompt and task.solution is not None


@pytest.mark.parametrize(
    ("where", "text", "message"),
    [
        ("task.toml", "[agent\n", r"task\.toml: invalid TOML"),
        ("task.toml", '[environment]\nmemory = "lots"\n', "environment.memory must be a size"),
        ("task.toml", "[agent]\ntimeout_sec = -1\n", "agent.timeout_sec must be a positive"),
        (
            "task.toml",
            '[environment]\ncpus = "2"\n',
            r"environment\.cpus must be a positive number, got '2'",
        ),
        ("task.toml", "[environment]\nmemory = 0\n", "environment.memory must be a positive size"),
        (
            "task.toml",
            '[environment]\nstorage = "0G"\n',
            "environment.storage must be a positive size",
        ),
        ("tests/test.sh", None, "needs tests/test.sh"),
        ("environment/Dockerfile", None, "no .*Dockerfile and no docker_image"),
        (
            "environment/docker-compose.yaml",
            "services:\n  client: {build: .}\n  db: {image: postgres:16}\n",
            "services client, db: a multi-container task is not supported",
        ),
    ],
)
def test_bad_terminal_bench_tasks_are_one_line_errors(
    tmp_path: Path, where: str, text: str | None, message: str
) -> None:
    folder = tmp_path / "count-5xx"
    shutil.copytree(TB_TASKS / "count-5xx", folder)
    if text is None:
        (folder / where).unlink()
    else:
        (folder / where).write_text(text)
    with pytest.raises(ConfigError, match=message) as err:
        load_tasks(folder)
    assert "\n" not in str(err.value) and str(folder) in str(err.value)


def test_a_single_service_compose_file_is_the_dockerfiles(tmp_path: Path) -> None:
    folder = tmp_path / "count-5xx"
    shutil.copytree(TB_TASKS / "count-5xx", folder)
    (folder / "environment" / "docker-compose.yaml").write_text("services:\n  client: {build: .}\n")
    (task,) = load_tasks(folder)
    assert task.container is not None and task.container.build is not None


def test_bad_swe_instances_are_one_line_errors(tmp_path: Path) -> None:
    good = SWE_FILE.read_text()
    cases = {
        "FAIL_TO_PASS:\n    - test_runs": (
            "FAIL_TO_PASS: 3\n    # - test_runs",
            "FAIL_TO_PASS must",
        ),
        "dockerfile: environment/Dockerfile": ("dockerfile: nope/Dockerfile", "does not exist"),
    }
    for old, (new, message) in cases.items():
        shutil.copytree(
            SWE_FILE.parent / "environment", tmp_path / "environment", dirs_exist_ok=True
        )
        path = tmp_path / "instances.yaml"
        path.write_text(good.replace(old, new, 1))
        with pytest.raises(ConfigError, match=message) as err:
            load_tasks(path)
        assert "instance 0 (textkit__textkit-1)" in str(err.value) and "\n" not in str(err.value)


def test_container_tasks_need_a_container_backend(tmp_path: Path) -> None:
    class Local:
        name = "local"
        runs_task_images = False

    spec = AgentBenchmark.model_validate(
        {"name": "tb", "kind": "agent", "tasks": str(TB_TASKS), "sandbox": {"backend": "local"}}
    )
    with pytest.raises(ConfigError, match=r"set `sandbox: \{backend: docker\}`") as err:
        AgentSuite.from_spec(spec, sandboxes=Sandboxes(lambda name: Local()))  # type: ignore[arg-type,return-value]
    assert "task 'count-5xx' brings its own container image" in str(err.value)
    assert backend_class("docker").runs_task_images and backend_class("modal").runs_task_images
    assert not backend_class("local").runs_task_images
    assert not backend_class("subprocess").runs_task_images


def test_limits_are_the_tasks_capped_by_the_benchmark() -> None:
    (task,) = load_tasks(TB_TASKS / "count-5xx")  # cpus 1, memory 512M, storage 1G
    assert task.container is not None
    roomy = challenge_config(SandboxConfig(cpus=4, memory_mb=8192, disk_mb=8192), task.container)
    assert (roomy.cpus, roomy.memory_mb, roomy.disk_mb) == (1.0, 512, 1024)
    assert roomy.challenge and roomy.build == task.container.build
    tight = challenge_config(SandboxConfig(cpus=0.5, memory_mb=256, disk_mb=100), task.container)
    assert (tight.cpus, tight.memory_mb, tight.disk_mb) == (0.5, 256, 100)
    assert tight.env["HOME"] == "/root"


def test_challenge_container_argv_is_root_with_few_capabilities() -> None:
    from evalgate.sandbox._docker_image import ImageInfo

    box = DockerSandbox(SandboxConfig(challenge=True, image="x", pids=64), "docker")
    box._image = ImageInfo(tag="img:1", workdir="/app", env={})
    argv = box.run_argv()
    assert argv[argv.index("--user") + 1] == "0:0" and "--read-only" not in argv
    assert argv[argv.index("--network") + 1] == "none" and "no-new-privileges" in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--cap-add"] == list(CHALLENGE_CAPS)
    assert "SYS_ADMIN" not in argv and "NET_RAW" not in argv and "--privileged" not in argv
    assert argv[argv.index("--entrypoint") + 1] == ""  # the image's ENTRYPOINT would eat `sleep`
    assert argv[argv.index("--pids-limit") + 1] == "64" and argv[-3:] == [
        "img:1",
        "sleep",
        "infinity",
    ]


# -- SWE-bench grading, offline ----------------------------------------------------------------


def test_swe_log_parsing_and_the_resolution_rule() -> None:
    log = (
        "test_a (pkg.tests.T.test_a) ... ok\n"
        "test_b (pkg.tests.T.test_b) ... FAIL\n"
        "test_c (pkg.tests.T.test_c) ... expected failure\n"
        "PASSED tests/test_x.py::test_one\n"
        "FAILED tests/test_x.py::test_two - AssertionError\n"
    )
    status = swe_grading.parse_log(log)
    assert status == {
        "test_a (pkg.tests.T.test_a)": "PASSED",
        "test_b (pkg.tests.T.test_b)": "FAILED",
        "test_c (pkg.tests.T.test_c)": "XFAIL",
        "tests/test_x.py::test_one": "PASSED",
        "tests/test_x.py::test_two": "FAILED",
    }
    spec = load_tasks(SWE_FILE)[0].container.swe  # type: ignore[union-attr]
    f2p, p2p = spec.fail_to_pass, spec.pass_to_pass
    all_pass = dict.fromkeys((*f2p, *p2p), "PASSED")
    assert swe_grading.resolved(spec, all_pass) == (True, [])
    assert swe_grading.resolved(spec, {**all_pass, p2p[0]: "FAILED"}) == (False, [p2p[0]])
    missing = {k: v for k, v in all_pass.items() if k != f2p[0]}  # not in the log: failed
    assert swe_grading.resolved(spec, missing) == (False, [f2p[0]])


def test_swe_pytest_ids_with_spaces_and_brackets_are_whole_names() -> None:
    """Parametrize ids may hold spaces (``test_f[above hi]``); a FAILED line ends in `` - msg``."""
    log = (
        "PASSED tests/test_calc.py::test_clamp[in range]\n"
        "PASSED tests/test_calc.py::test_scale[1-2]\n"
        "FAILED tests/test_calc.py::test_clamp[above hi] - assert 20 == 10\n"
        "FAILED tests/test_calc.py::test_clamp[far  out]\n"
        "XFAIL tests/test_calc.py::test_x[a b] - known bug\n"
        "ERROR tests/test_calc.py::test_y - fixture 'db' not found\n"
        "PASSED tests/test_calc.py::test_d[x - y]\n"  # a PASSED line carries no message
    )
    assert swe_grading.parse_log(log) == {
        "tests/test_calc.py::test_clamp[in range]": "PASSED",
        "tests/test_calc.py::test_scale[1-2]": "PASSED",
        "tests/test_calc.py::test_clamp[above hi]": "FAILED",
        "tests/test_calc.py::test_clamp[far  out]": "FAILED",
        "tests/test_calc.py::test_x[a b]": "XFAIL",
        "tests/test_calc.py::test_y": "ERROR",
        "tests/test_calc.py::test_d[x - y]": "PASSED",
    }


def test_swe_a_listed_test_the_log_never_shows_is_said_to_be_missing() -> None:
    """A PASS_TO_PASS test outside the test patch's files never runs (SWE-bench passes only
    those files): the reason says it is not in the log, not that it failed."""
    status = {"tests/unit/test_hi.py::test_hi": "PASSED", "tests/test_a.py::test_b": "FAILED"}
    reason = swe_grading.unresolved_reason(
        ["tests/test_a.py::test_b", "tests/test_calc.py::test_scale[3-4]"], status
    )
    assert reason == (
        "not resolved: 2 listed test(s) did not pass: tests/test_a.py::test_b (FAILED), "
        "tests/test_calc.py::test_scale[3-4] (not in the test log: the test command ran only "
        "the test patch's files)"
    )


def test_patch_applier(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(SWE_FILE.parent / "environment" / "repo", repo)
    spec = load_tasks(SWE_FILE)[0].container.swe  # type: ignore[union-attr]
    assert swe_grading.patch_files(spec.test_patch) == ["tests/test_slug.py"]
    assert apply(spec.test_patch, str(repo)) == ["tests/test_slug.py"]
    assert "test_runs_of_separators_collapse" in (repo / "tests" / "test_slug.py").read_text()
    with pytest.raises(ValueError, match="hunk 1 does not apply"):
        apply(spec.test_patch, str(repo))  # already applied: the context no longer matches
    new_file = "--- /dev/null\n+++ b/notes/new.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"
    assert apply(new_file, str(repo)) == ["notes/new.txt"]
    assert (repo / "notes" / "new.txt").read_text() == "one\ntwo\n"


# -- under the docker backend ----------------------------------------------------------------


@needs_docker
def test_reference_solutions_pass_and_untouched_tasks_fail() -> None:
    tasks = load_tasks(TB_TASKS)
    assert {t.container.format for t in tasks} == {"terminal-bench", "terminal-bench-1"}  # type: ignore[union-attr]
    for result in _run_all(tasks, ScriptAgent(solve=True)):
        assert result.reward == 1.0, (result.task_id, result.reason, result.check_output)
    for result in _run_all(tasks, ScriptAgent("true")):
        assert result.reward == 0.0, (result.task_id, result.reason)
        assert result.reason in ("the verifier's reward is 0", "tests failed (exit 1)")


# Every way to pass without solving: the reward file where the harness reads it, fake test
# runners in the working directory and at /tests, and a process that keeps rewriting them.
FORGE = r"""
mkdir -p /logs/verifier /tests "$PWD/tests"
echo 1 > /logs/verifier/reward.txt
for f in /tests/test.sh /tests/run-tests.sh "$PWD/tests/test.sh" "$PWD/run-tests.sh"; do
    printf '#!/bin/sh\necho 1 > /logs/verifier/reward.txt\nexit 0\n' > "$f"; chmod +x "$f"
done
printf 'import sys; sys.exit(0)\n' > "$PWD/unittest.py"
nohup sh -c 'while :; do echo 1 > /logs/verifier/reward.txt; sleep 0.2; done' >/dev/null 2>&1 &
echo forged
"""


@needs_docker
def test_forged_rewards_fail() -> None:
    tasks = load_tasks(TB_TASKS)
    for result in _run_all(tasks, ScriptAgent(FORGE)):
        assert result.agent.exit_code == 0 and "forged" in result.agent.log, result.agent.log
        assert result.reward == 0.0, (result.task_id, result.reason, result.check_output)


@needs_docker
def test_a_terminal_bench_2_verifier_that_writes_no_reward_fails(tmp_path: Path) -> None:
    """Harbor reads the reward file; a test.sh that writes it only on success and always exits
    0 must not pass an untouched task (no reward file is no reward)."""
    folder = tmp_path / "count-5xx"
    shutil.copytree(TB_TASKS / "count-5xx", folder)
    (folder / "tests" / "test.sh").write_text(
        "#!/bin/bash\npython3 -I /tests/test_outputs.py && echo 1 > /logs/verifier/reward.txt\n"
        "exit 0\n"
    )
    tasks = load_tasks(folder)
    (solved,) = _run_all(tasks, ScriptAgent(solve=True))
    (untouched,) = _run_all(tasks, ScriptAgent("true"))
    assert solved.reward == 1.0, (solved.reason, solved.check_output)
    assert untouched.reward == 0.0, untouched.reason
    assert untouched.reason == "the verifier wrote no reward to /logs/verifier/reward.txt (exit 0)"


@needs_docker
def test_the_agent_works_as_root_in_the_workdir_without_the_tests() -> None:
    probe = 'echo "$(id -u) $PWD $HOME"; ls /tests 2>&1 | head -1; ls /solution 2>&1 | head -1'
    (result,) = _run_all(load_tasks(TB_TASKS / "count-5xx"), ScriptAgent(probe))
    first, tests, solution = result.agent.log.splitlines()[:3]
    assert first == "0 /app /root", result.agent.log
    assert "No such file" in tests and "No such file" in solution


@needs_docker
def test_a_changed_task_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "count-5xx"
    shutil.copytree(TB_TASKS / "count-5xx", folder)
    (old,) = load_tasks(folder)
    dockerfile = folder / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "ENV EVALGATE_TEST_CHANGED=1\n")
    (new,) = load_tasks(folder)
    assert old.container and new.container and old.container.build and new.container.build
    assert old.container.digest != new.container.digest
    assert load_tasks(folder)[0].container.digest == new.container.digest  # type: ignore[union-attr]
    docker = shutil.which("docker") or "docker"
    images = Images(docker)
    # The tag keys the build context and the base images' ids (a rebuilt FROM image rebuilds).
    tag = run(images._tag(new.container.build))
    assert tag.startswith(f"{TAG_PREFIX}:")
    subprocess.run([docker, "rmi", "-f", tag], capture_output=True, check=False)
    builds: list[str] = []
    real = Images._build

    async def counted(self: Images, build: Any, tag: str) -> None:
        builds.append(tag)
        await real(self, build, tag)

    monkeypatch.setattr(Images, "_build", counted)
    try:

        async def resolve_twice() -> tuple[Any, Any]:
            return await asyncio.gather(*(images.resolve(new.container.build, None) for _ in "ab"))  # type: ignore[union-attr]

        first, second = run(resolve_twice())
        assert builds == [tag] and first == second and first.workdir == "/app"
        assert first.env["EVALGATE_TEST_CHANGED"] == "1"
        run(Images(docker).resolve(new.container.build, None))  # a later run: no new build
        assert builds == [tag]
    finally:
        subprocess.run([docker, "rmi", "-f", tag], capture_output=True, check=False)


@needs_docker
def test_an_image_with_an_entrypoint_still_runs_the_task(tmp_path: Path) -> None:
    """Many images set an ENTRYPOINT; the task's container must still be the task's, not exit."""
    folder = tmp_path / "count-5xx"
    shutil.copytree(TB_TASKS / "count-5xx", folder)
    dockerfile = folder / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + 'ENTRYPOINT ["python3", "-c", "print(1)"]\n')
    (solved,) = _run_all(load_tasks(folder), ScriptAgent(solve=True))
    assert solved.reward == 1.0, (solved.reason, solved.check_output)


@needs_docker
@pytest.mark.parametrize("tool", ["tar", "timeout"])
def test_an_image_without_a_needed_tool_is_an_infra_error_not_a_failed_agent(
    tmp_path: Path, tool: str
) -> None:
    """Every exec is wrapped in the image's `timeout`, and the verifier restores the agent's copy
    with its sh, find and tar: an image that lacks one cannot run or judge any agent; that is
    the task's defect, said once by name, never the agent's 0."""
    folder = tmp_path / "count-5xx"
    shutil.copytree(TB_TASKS / "count-5xx", folder)
    dockerfile = folder / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + f"RUN rm -f /bin/{tool} /usr/bin/{tool}\n")
    with pytest.raises(InfraError, match=rf"lacks {tool}: a task image needs sh, find, tar") as err:
        _run_all(load_tasks(folder), ScriptAgent(solve=True))
    assert "\n" not in str(err.value) and "count-5xx/environment/Dockerfile" in str(err.value)


@needs_docker
def test_a_failed_build_is_an_infra_error_with_the_log(tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    shutil.copytree(TB_TASKS / "count-5xx", folder)
    (folder / "environment" / "Dockerfile").write_text(
        "FROM python:3.11-slim\nRUN echo evalgate-broken-step && exit 7\n"
    )
    (task,) = load_tasks(folder)
    with pytest.raises(InfraError, match=r"docker build of .*Dockerfile failed") as err:
        _run_all([task], ScriptAgent("true"))
    assert "evalgate-broken-step" in str(err.value)
    docker = shutil.which("docker") or "docker"
    left = subprocess.run(
        [docker, "ps", "-a", "--filter", "status=exited", "--format", "{{.Command}}", "--no-trunc"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "evalgate-broken-step" not in left.stdout  # no failed build step left behind


@needs_docker
def test_swe_gold_patch_resolves_and_untouched_or_test_edits_do_not() -> None:
    (task,) = load_tasks(SWE_FILE)
    gold, untouched, cheat = (
        _run_all([task], agent)[0]
        for agent in (
            ScriptAgent(solve=True),
            ScriptAgent("true"),
            # "Fixes" the failing test instead of the code, in the file the test patch touches.
            ScriptAgent("printf 'import unittest\\n' > tests/test_slug.py"),
        )
    )
    assert gold.reward == 1.0, (gold.reason, gold.check_output)
    assert gold.reason == "resolved: 4 FAIL_TO_PASS/PASS_TO_PASS tests pass"
    assert untouched.reward == 0.0 and untouched.reason.startswith("not resolved: 1 listed")
    assert cheat.reward == 0.0 and cheat.reason.startswith("not resolved: 1 listed"), cheat.reason


def _fake_runner(module: str, names: list[str]) -> str:
    """An agent script that never touches the code: a module in the repository's root that
    `python -m unittest` (cwd first on sys.path) would import instead of the real one."""
    lines = "".join(f"print({n + ' ... ok'!r})\n" for n in names)
    if module.endswith("/"):  # a package
        body = f"mkdir -p {module} && touch {module}__init__.py && cat > {module}__main__.py"
    else:
        body = f"cat > {module}"
    return f"{body} <<'EOF'\nimport sys\n{lines}sys.exit(0)\nEOF\n"


@needs_docker
@pytest.mark.parametrize("module", ["unittest.py", "unittest/", "argparse.py"])
def test_swe_a_module_that_shadows_the_test_runner_fails(module: str) -> None:
    (task,) = load_tasks(SWE_FILE)
    spec = task.container.swe  # type: ignore[union-attr]
    (result,) = _run_all(
        [task], ScriptAgent(_fake_runner(module, [*spec.fail_to_pass, *spec.pass_to_pass]))
    )
    assert result.reward == 0.0, (result.reason, result.check_output)
    assert "shadows" in result.reason and module.rstrip("/").removesuffix(".py") in result.reason


@needs_docker
def test_a_users_agent_binary_runs_inside_the_challenge_container(tmp_path: Path) -> None:
    agent = tmp_path / "my-agent"
    agent.write_text(
        "#!/bin/sh\n"
        'printf "%s\\n" "$@"\n'
        'test -n "$OPENAI_BASE_URL" && echo "bridge $OPENAI_BASE_URL"\n'
        "awk '$(NF-1) ~ /^5[0-9][0-9]$/' /app/app.log | wc -l > /app/answer.txt\n"
        'echo \'{"turn": 1, "cost_usd": 0.5}\' >&2\n'
    )
    agent.chmod(agent.stat().st_mode | stat.S_IXUSR)
    spec = AgentBenchmark.model_validate(
        {
            "name": "tb",
            "kind": "agent",
            "tasks": str(TB_TASKS / "count-5xx"),
            "agent": {"type": "command", "command": [str(agent)], "max_turns": 7},
            "sandbox": {"backend": "docker", "timeout_s": 300, "memory_mb": 1024},
        }
    )
    suite = AgentSuite.from_spec(spec)
    (item,) = suite.items
    assert item.answer.startswith("bash /tests/test.sh @ ")  # the image digest is in the hash
    client = type("C", (), {"endpoint": Endpoint("http://127.0.0.1:9/v1", "m")})()
    outcome = run(suite.rollout(item, 0, client))
    assert outcome.reward == 1.0, outcome.completion
    assert outcome.cost_usd == 0.5 and "[pass] the verifier's reward is 1" in outcome.completion
    args = outcome.completion.split("--- agent's last message ---")[1]
    assert "\n-cwd\n/app\n-max-turns\n7\n" in args and "Count the requests" in args
    assert "bridge http://127.0.0.1:18080" in args  # the model bridge, inside the container
    assert suite.unenforced_limits == [
        "disk: a challenge container's writable layer has no size limit (docker)"
    ]


def test_the_containers_example_config_is_valid() -> None:
    from evalgate.cli import main
    from evalgate.config import load_config
    from tests.test_inspect import _has_inspect

    path = ROOT / "examples" / "containers" / "evals.yaml"
    # validate loads the inspect task as `local` would: it needs inspect's interpreter.
    code = main(["validate", str(path)])
    assert code == (0 if _has_inspect() else 2)
    kinds = {b.name: b.kind for b in load_config(path).benchmarks}
    assert kinds == {"inspect-arith": "inspect", "terminal-bench": "agent"}


@needs_docker
def test_a_prebuilt_image_that_cannot_be_pulled_is_an_infra_error() -> None:
    images = Images(shutil.which("docker") or "docker")
    # A registry on a closed local port: refused at once, never a wait on the network.
    with pytest.raises(InfraError, match=r"docker pull of 127\.0\.0\.1:9/evalgate/none:1 failed"):
        run(images.resolve(None, "127.0.0.1:9/evalgate/none:1"))


@needs_docker
def test_an_agent_that_kills_its_own_container_still_gets_a_verdict() -> None:
    """Root can end the container's keeper process; the working directory is judged anyway."""
    (task,) = load_tasks(TB_TASKS / "count-5xx")
    (result,) = _run_all([task], ScriptAgent("kill -9 -1", solve=True))
    assert result.agent.exit_code == 137  # its exec's own `timeout` wrapper was killed too
    assert result.reward == 1.0, (result.reason, result.agent.log)


def test_swe_dataset_rows_as_jsonl(tmp_path: Path) -> None:
    """The datasets' rows carry the test lists as JSON text; extra columns are ignored."""
    import json

    import yaml

    (row,) = yaml.safe_load(SWE_FILE.read_text())
    row |= {
        "FAIL_TO_PASS": json.dumps(row["FAIL_TO_PASS"]),
        "PASS_TO_PASS": json.dumps(row["PASS_TO_PASS"]),
        "hints_text": "",
        "created_at": "2026-01-01T00:00:00Z",
        "image": "example/textkit:1",
    }
    del row["dockerfile"]
    path = tmp_path / "verified.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, "instance_id": "second"}) + "\n")
    first, second = load_tasks(path)
    assert (first.id, second.id) == ("textkit__textkit-1", "second")
    assert first.container and first.container.image == "example/textkit:1"
    assert first.container.swe and len(first.container.swe.pass_to_pass) == 3


# -- a verifier that fetches from the network ----------------------------------------------------

FETCHING_TEST_SH = """#!/bin/bash
# as Terminal-Bench 2.0's verifiers do
apt-get update && apt-get install -y curl
curl -LsSf https://example.invalid/uv/install.sh | sh
uvx -p 3.13 -w pytest==8.4.1 pytest /tests/test_outputs.py -rA
if [ $? -eq 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""


def _suite(tasks: Path, **sandbox: Any) -> AgentSuite:
    class Docker:
        name = "docker"
        runs_task_images = True

    spec = AgentBenchmark.model_validate(
        {
            "name": "tb",
            "kind": "agent",
            "tasks": str(tasks),
            "sandbox": {"backend": "docker", **sandbox},
        }
    )
    return AgentSuite.from_spec(spec, sandboxes=Sandboxes(lambda name: Docker()))  # type: ignore[arg-type,return-value]


def test_a_verifier_that_fetches_from_the_network_is_refused_unless_allowed(
    tmp_path: Path,
) -> None:
    # Without network such a test.sh fails before the tests run and writes reward 0: every agent,
    # base and PR alike, would score 0 and the gate compare 0 with 0. Refused up front instead.
    folder = tmp_path / "count-5xx"
    shutil.copytree(TB_TASKS / "count-5xx", folder)
    (folder / "tests" / "test.sh").write_text(FETCHING_TEST_SH)
    with pytest.raises(ConfigError, match=r"verifier_network: true") as err:
        _suite(tmp_path)
    message = str(err.value)
    assert "\n" not in message and "task 'count-5xx'" in message
    assert "tests/test.sh:3" in message and "apt-get" in message  # the first fetching line
    assert _suite(tmp_path, verifier_network=True).name == "tb"
    # Comments and the shipped tasks (which fetch nothing) are not refused.
    (folder / "tests" / "test.sh").write_text("#!/bin/sh\n# curl is not used here\nexit 0\n")
    assert _suite(tmp_path).name == "tb"
    assert _suite(TB_TASKS).name == "tb"


def test_the_verifier_gets_the_network_only_when_asked() -> None:
    from evalgate.suites.agent.verify import run_container_check

    (task,) = load_tasks(TB_TASKS / "count-5xx")
    assert task.container is not None
    seen: list[SandboxConfig] = []

    class Stop(Exception):
        pass

    class Backend:
        async def create(self, cfg: SandboxConfig) -> Any:
            seen.append(cfg)
            raise Stop

    for allowed, network in ((False, "none"), (True, "internet")):
        sandbox = SandboxConfig(verifier_network=allowed)
        with pytest.raises(Stop):
            asyncio.run(run_container_check(Backend(), sandbox, task, b""))  # type: ignore[arg-type]
        assert seen[-1].network == network and seen[-1].model is None
        # The agent's own container never gets it.
        assert challenge_config(sandbox, task.container).network == "none"


def test_internet_is_for_challenge_containers_only() -> None:
    from evalgate.sandbox._docker_image import ImageInfo

    box = DockerSandbox(SandboxConfig(challenge=True, image="x", network="internet"), "docker")
    box._image = ImageInfo(tag="img:1", workdir="/app", env={})
    argv = box.run_argv()
    assert "--network" not in argv and argv[argv.index("--cap-drop") + 1] == "ALL"
    with pytest.raises(ValueError, match="challenge"):
        SandboxConfig(network="internet")
