"""Ctrl-C / SIGTERM while the event loop runs: the interrupt is raised between two of the loop's
callbacks, never inside the loop's own bookkeeping, so every task can still be cancelled.

Raised at an arbitrary point, the KeyboardInterrupt could land after the loop took a task's step
off its ready queue and before it ran it; that task never ran again, and asyncio.run's final
cancellation of all tasks waited for it forever (a run of the quick set hung there, in
``asyncio.runners._cancel_all_tasks``, after SIGINT + SIGINT). The end-to-end signal tests are
in tests/test_environment_failures.py.
"""

from __future__ import annotations

import asyncio
import signal

import pytest

from evalgate.cli import _Terminate


def test_without_a_running_loop_the_interrupt_is_raised_at_once() -> None:
    handler = _Terminate()
    with pytest.raises(KeyboardInterrupt):
        handler(signal.SIGINT, None)
    handler(signal.SIGTERM, None)  # a second signal is ignored: the first one is on its way


def test_inside_a_running_loop_it_is_raised_by_the_loop_between_callbacks() -> None:
    handler = _Terminate()
    steps: list[str] = []

    async def worker(name: str) -> None:
        try:
            while True:
                await asyncio.sleep(0)  # always ready: its step sits in the ready queue
        except asyncio.CancelledError:
            steps.append(f"{name} cancelled")
            raise

    async def main() -> None:
        tasks = [asyncio.create_task(worker(f"w{i}")) for i in range(3)]
        await asyncio.sleep(0)
        handler(signal.SIGINT, None)  # as if the signal arrived here: returns, raises nothing
        steps.append("handler returned")
        await asyncio.gather(*tasks)

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(main())
    # The handler returned; the loop raised; asyncio.run then cancelled every task, and each
    # one ran its cancellation (none was left unable to run).
    assert steps[0] == "handler returned"
    assert sorted(steps[1:]) == ["w0 cancelled", "w1 cancelled", "w2 cancelled"]
    assert not handler.pending


def test_an_interrupt_the_loop_ended_before_running_is_raised_after_the_command() -> None:
    handler = _Terminate()

    async def main() -> None:
        handler(signal.SIGINT, None)
        asyncio.get_running_loop().stop()  # the loop stops before its next round of callbacks

    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(main())
        loop.run_forever()
        assert task.done()
    finally:
        loop.close()  # closed without running the handed-over interrupt
    assert handler.pending
    with pytest.raises(KeyboardInterrupt):
        handler.check()
    handler.check()  # raised once
