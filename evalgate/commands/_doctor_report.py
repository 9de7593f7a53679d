"""``evalgate doctor``'s report: each check with its status and fix, and the exit code they
add up to (:mod:`evalgate.commands.doctor` runs the phases)."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from typing import Literal

from evalgate.errors import ExitCode

__all__ = ["Check", "Doctor", "DoctorReport", "Status", "dist_version", "run_command"]

Status = Literal["pass", "fail", "skip"]


@dataclass(frozen=True)
class Check:
    phase: str
    name: str
    status: Status
    detail: str = ""
    fix: str = ""
    config_error: bool = False  # a failure the user fixes in evals.yaml or the environment


@dataclass
class DoctorReport:
    config_path: str
    checks: list[Check] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        failed = [c for c in self.checks if c.status == "fail"]
        if any(c.config_error for c in failed):
            return int(ExitCode.CONFIG)
        return int(ExitCode.INFRA) if failed else int(ExitCode.PASS)

    def as_dict(self) -> dict[str, object]:
        return {
            "config": self.config_path,
            "exit_code": self.exit_code,
            "checks": [asdict(c) for c in self.checks],
        }

    def render(self) -> str:
        lines = [f"evalgate doctor: {self.config_path}"]
        for c in self.checks:
            text = f"  {c.status.upper():<4}  {c.phase:<13} {c.name}"
            if c.detail:
                text += f": {c.detail}"
            lines.append(text)
            if c.status == "fail" and c.fix:
                lines.append(f"{'':<21}fix: {c.fix}")
        counts = {s: sum(c.status == s for c in self.checks) for s in ("pass", "fail", "skip")}
        lines.append(
            f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped "
            f"(exit {self.exit_code})"
        )
        return "\n".join(lines)


class Doctor:
    """The checks so far, and which models' later phases are skipped (and why)."""

    def __init__(self, report: DoctorReport, environ: dict[str, str]) -> None:
        self.report = report
        self.environ = environ
        self.blocked: dict[str, str] = {}  # model name → why its later phases are skipped

    def add(
        self,
        phase: str,
        name: str,
        status: Status,
        detail: str = "",
        *,
        fix: str = "",
        config_error: bool = False,
    ) -> Check:
        check = Check(phase, name, status, detail, fix=fix, config_error=config_error)
        self.report.checks.append(check)
        return check

    def block(self, model: str, why: str) -> None:
        self.blocked.setdefault(model, why)

    def which(self, program: str) -> str | None:
        return shutil.which(program, path=self.environ.get("PATH", os.defpath))


def dist_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def run_command(argv: list[str], environ: dict[str, str], timeout: float = 20.0) -> tuple[int, str]:
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=environ, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()
