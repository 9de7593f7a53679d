"""The legacy verifiers adapter closes its per-loop SDK client only inside that loop."""

from __future__ import annotations

import asyncio
import gc

from evalgate.suites._vf_legacy import _close_at_loop_end


class _Client:
    def __init__(self) -> None:
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1


def test_the_client_is_closed_when_its_loop_ends() -> None:
    client = _Client()

    async def run() -> None:
        asyncio.get_running_loop().create_task(_close_at_loop_end(client))
        await asyncio.sleep(0)

    asyncio.run(run())  # cancels the closer at loop end, which closes the client
    assert client.closed == 1


def test_a_closer_collected_after_its_loop_does_not_close_in_another_task() -> None:
    # A loop that ends without cancelling its tasks leaves the closer pending; when the garbage
    # collector closes it later (during another model's loop), closing the client there would
    # run its transport's cleanup in that other task (seen: a rollout aborted with "Attempted to
    # exit a cancel scope that isn't the current task's").
    client = _Client()
    loop = asyncio.new_event_loop()
    task = loop.create_task(_close_at_loop_end(client))
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()

    async def other() -> None:
        nonlocal task
        del task
        gc.collect()

    asyncio.run(other())
    assert client.closed == 0
