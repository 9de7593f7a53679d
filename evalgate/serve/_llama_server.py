"""``python -m evalgate.serve._llama_server``: llama.cpp's own C++ server, from a prebuilt wheel.

``xllamacpp`` ships llama.cpp's native server (continuous batching, parallel slots, the
OpenAI-compatible ``/v1/chat/completions``) as a manylinux wheel, so nothing compiles on install.
It serves from inside the Python process that creates ``xllamacpp.Server``; evalgate runs it in
this small child process instead, so the server lives in its own process group and is stopped as
a whole, like every other backend (:func:`evalgate.serve._process.stop_group`).

Unless the config names a thread count, it runs one single-thread server (a replica) per usable
CPU, up to one per parallel slot, behind a least-connections relay on the port evalgate was
given (:mod:`evalgate.serve._balancer`): the replicas share the model file's pages and split the
slots, and no barrier ties their threads together (see :func:`replicas`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from typing import Any

from evalgate.serve._balancer import Balancer


def replicas(parallel: int) -> int:
    """Single-thread servers to run: one per CPU this process may use, at most one per slot.

    llama.cpp's threads meet at a barrier for every layer of every token: one server with a
    thread per CPU stalls whenever one of them shares its core with another process (on 2 cores,
    48 quickstart items at concurrency 4, `bench/embedded_threads.py`: one thread 17 s idle, 19 s
    beside a busy core; two threads 11 s idle but over 120 s beside a busy core, whether waiting
    threads yield or spin). Single-thread replicas have nothing to wait on but their own core:
    the quickstart's 100 requests took 12.5 s on two replicas against 22.8 s on one server, for
    the same CPU time and the same completions (`bench/embedded_replicas.py`)."""
    return max(1, min(len(os.sched_getaffinity(0)), parallel))


def _start(args: argparse.Namespace, token: str, port: int, slots: int, threads: int) -> Any:
    """One llama.cpp server on ``port`` (0: any free one) with ``slots`` parallel slots."""
    import xllamacpp  # late: argparse errors should not pay for loading the native library

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    if token:
        params.api_keys = [token]
    params.hostnames = [args.host]
    params.port = port
    params.n_parallel = slots
    # llama.cpp splits n_ctx across the slots: give every slot the context asked for.
    params.n_ctx = args.n_ctx * slots
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    # Waiting threads yield rather than spin: the machine's other work keeps its CPU.
    params.cpuparams.poll = params.cpuparams_batch.poll = args.poll
    # llama.cpp's fitting pass (a dry run that sizes the context and offload to free memory) is
    # ~0.25 s of a replica's ~0.65 s start (2 cores), for a 135M model whose context is set here.
    params.fit_params = False
    return xllamacpp.Server(params)  # loaded and serving on its own threads from here on


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evalgate.serve._llama_server")
    parser.add_argument("--model", required=True, help="GGUF file")
    parser.add_argument("--alias", required=True, help="the model name clients send")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n-ctx", type=int, required=True, help="context per slot")
    parser.add_argument("--parallel", type=int, default=4, help="parallel slots")
    parser.add_argument(
        "--threads", type=int, default=0, help="0: single-thread replicas (see replicas())"
    )
    parser.add_argument(
        "--poll", type=int, default=0, help="llama.cpp's busy-wait level, 0-100 (0: yield)"
    )
    args = parser.parse_args(argv)

    # The per-run token evalgate started this server with (from the environment, not argv, which
    # every local user can read): its health check proves it talks to this server, not to
    # another one that took the port, and no other client can use it.
    token = os.environ.pop("EVALGATE_SERVER_TOKEN", "")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.threads:  # the config's thread count: one server, on the port itself
        servers = [_start(args, token, args.port, args.parallel, args.threads)]
        print(f"evalgate: llama.cpp server listening on {servers[0].listening_address}", flush=True)
        stop.wait()
    else:
        n = replicas(args.parallel)
        slots = -(-args.parallel // n)  # every slot asked for, spread over the replicas
        # Each replica binds a free loopback port of its own; the relay listens only once all
        # are loaded, so the health check never reaches one still loading.
        servers = [_start(args, token, 0, slots, 1) for _ in range(n)]
        backends = [_host_port(s.listening_address) for s in servers]
        print(
            f"evalgate: {n} llama.cpp servers ({slots} slots, 1 thread each) on "
            f"{backends}, relayed from http://{args.host}:{args.port}",
            flush=True,
        )
        asyncio.run(_relay(Balancer(backends), args.host, args.port, stop))
    del servers  # joins the servers' threads
    return 0


def _host_port(address: str) -> tuple[str, int]:
    """("127.0.0.1", 41234) from llama.cpp's ``http://127.0.0.1:41234``."""
    host, _, port = address.rpartition("//")[2].rpartition(":")
    return host, int(port)


async def _relay(balancer: Balancer, host: str, port: int, stop: threading.Event) -> None:
    """Relay until SIGTERM or SIGINT (or one that came while the replicas loaded)."""
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    if stop.is_set():
        return
    await balancer.serve(host, port, done)


if __name__ == "__main__":
    sys.exit(main())
