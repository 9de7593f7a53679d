"""A container task's reward is read as Harbor reads it: reward.txt when it exists (whatever it
is), else reward.json; a reward.txt that is not a regular file is a fail, never a fallback.

The reading runs in any sandbox (here bubblewrap, or the reference backend without it): the
logic needs no Docker daemon; the container tests run it end to end where one answers.
"""

from __future__ import annotations

import asyncio

import pytest

from evalgate.sandbox import SandboxConfig, backend_class, open_backend
from evalgate.suites.agent.verify import _reward_file

BACKEND = "local" if backend_class("local").unavailable() is None else "subprocess"

ONE = "echo '{\"reward\": 1}' > reward.json"
# (set-up in the reward folder, expected reward or None, words the reason holds)
CASES = {
    "txt": ("echo 1 > reward.txt", 1.0, "reward is 1"),
    "txt over json": ("echo 0 > reward.txt; echo '{\"reward\": 1}' > reward.json", 0.0, "is 0"),
    "json alone": ("echo '{\"reward\": 0.5}' > reward.json", 0.5, "is 0.5"),
    "none": ("true", None, "wrote no reward"),
    # The forgery: reward.txt made a folder, reward.json saying 1.
    "txt a folder": (f"mkdir reward.txt; {ONE}", None, "not a regular"),
    "txt a link": ("echo 1 > real; ln -s real reward.txt", None, "not a regular"),
    "txt dangling link": (f"ln -s nowhere reward.txt; {ONE}", None, "not a regular"),
    "txt a fifo": (f"mkfifo reward.txt; {ONE}", None, "not a regular"),
    "json a folder": ("mkdir reward.json", None, "not a regular"),
    "txt junk": ("echo one > reward.txt", None, "holds no reward"),
    "txt nan": ("echo nan > reward.txt", None, "no finite"),
    "json no key": ("echo '{\"score\": 1}' > reward.json", None, "holds no reward"),
    "json bool": ("echo '{\"reward\": true}' > reward.json", None, "holds no reward"),
    "txt huge": ("head -c 10000 /dev/zero | tr '\\0' 1 > reward.txt", None, "larger than"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_reward_file_is_read_as_harbor_reads_it(case: str) -> None:
    setup, expected, words = CASES[case]

    async def go() -> tuple[float | None, str]:
        backend = open_backend(BACKEND)
        async with await backend.create(SandboxConfig(timeout_s=60)) as box:
            folder = f"{box.workdir}/logs-verifier"
            made = await box.exec(
                ["sh", "-c", f'mkdir -p "$1" && cd "$1" && {setup}', "sh", folder]
            )
            assert made.ok, made.stderr
            return await _reward_file(box, folder)

    reward, why = asyncio.run(go())
    assert reward == expected and words in why, (case, reward, why)
