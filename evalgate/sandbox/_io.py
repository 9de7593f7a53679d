"""Pipes read and written from the event loop, without threads, and waiting for a process.

Shared by the backends that run host processes (bubblewrap's bwrap, docker's CLI, the
subprocess reference). Readers keep at most a limit of bytes but read to the end: a writer
blocked on a full pipe would never exit.
"""

from __future__ import annotations

import asyncio
import os

__all__ = ["Drain", "Feed", "read_line", "wait_exit"]


class Drain:
    """Read a pipe to EOF in the event loop, keeping at most ``limit`` bytes."""

    def __init__(self, fd: int, limit: int) -> None:
        self.fd, self.limit = fd, limit
        self.buf = bytearray()
        self.truncated = False
        self.loop = asyncio.get_running_loop()
        self.done = self.loop.create_future()
        os.set_blocking(fd, False)
        self.loop.add_reader(fd, self._on_read)

    def _on_read(self) -> None:
        try:
            chunk = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.close()
            return
        room = self.limit - len(self.buf)
        if room > 0:
            self.buf += chunk[:room]
        if len(chunk) > room:
            self.truncated = True  # keep reading: a writer blocked on a full pipe never exits

    def close(self) -> None:
        if self.fd >= 0:
            self.loop.remove_reader(self.fd)
            os.close(self.fd)
            self.fd = -1
        if not self.done.done():
            self.done.set_result(None)


class Feed:
    """Write ``data`` to a pipe in the event loop, then close it (EPIPE just ends it)."""

    def __init__(self, fd: int, data: bytes) -> None:
        self.fd, self.view = fd, memoryview(data)
        self.loop = asyncio.get_running_loop()
        os.set_blocking(fd, False)
        if self.view:
            self.loop.add_writer(fd, self._on_write)
        else:
            self.close()

    def _on_write(self) -> None:
        try:
            n = os.write(self.fd, self.view[:65536])
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        self.view = self.view[n:]
        if not self.view:
            self.close()

    def close(self) -> None:
        if self.fd >= 0:
            self.loop.remove_writer(self.fd)
            os.close(self.fd)
            self.fd = -1


async def read_line(fd: int) -> bytes:
    """One line from a pipe, without a thread (the pipe stays open after it)."""
    loop = asyncio.get_running_loop()
    got = loop.create_future()
    buf = bytearray()
    os.set_blocking(fd, False)

    def on_read() -> None:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return
        buf.extend(chunk)
        if (not chunk or b"\n" in buf) and not got.done():
            got.set_result(bytes(buf))

    loop.add_reader(fd, on_read)
    try:
        data = await got
    finally:
        loop.remove_reader(fd)
    if b"\n" not in data:
        raise EOFError("the pipe closed before a whole line")
    return data.split(b"\n", 1)[0]


async def wait_exit(pid: int) -> None:
    """Return when process ``pid`` (our child) has exited, without reaping it.

    asyncio's ``Process.wait()`` also waits for the process's pipes to close, which a
    background grandchild can hold open for ever; a pidfd reports the exit itself.
    """
    loop = asyncio.get_running_loop()
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # exited and reaped already
    except (AttributeError, OSError):  # no pidfd (old kernel or Python): poll
        while True:
            try:
                if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    return
            except ChildProcessError:
                return  # reaped already
            await asyncio.sleep(0.01)
    exited = loop.create_future()

    def _exited() -> None:
        if not exited.done():
            exited.set_result(None)

    loop.add_reader(pidfd, _exited)
    try:
        await exited
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
