"""``python -m evalgate.serve._llama_server``: llama.cpp's own C++ server, from a prebuilt wheel.

``xllamacpp`` ships llama.cpp's native server (continuous batching, parallel slots, the
OpenAI-compatible ``/v1/chat/completions``) as a manylinux wheel, so nothing compiles on install.
It serves from inside the Python process that creates ``xllamacpp.Server``; evalgate runs it in
this small child process instead, so the server lives in its own process group and is stopped as
a whole, like every other backend (:func:`evalgate.serve._process.stop_group`).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading


def default_threads() -> int:
    """Half the CPUs this process may use (llama-cpp-python's default too). llama.cpp's threads
    meet at a barrier for every layer of every token: with every CPU, one thread that shares its
    core with another process stalls them all. On 2 cores (48 quickstart items, concurrency 4,
    `bench/embedded_threads.py`): one thread 17 s idle, 19 s beside a busy core; two threads
    11 s idle but over 120 s beside a busy core, whether waiting threads yield or spin. A
    machine kept for the model can set ``n_threads`` to every CPU."""
    return max(1, len(os.sched_getaffinity(0)) // 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evalgate.serve._llama_server")
    parser.add_argument("--model", required=True, help="GGUF file")
    parser.add_argument("--alias", required=True, help="the model name clients send")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n-ctx", type=int, required=True, help="context per slot")
    parser.add_argument("--parallel", type=int, default=4, help="parallel slots")
    parser.add_argument("--threads", type=int, default=0, help="0: half the usable CPUs")
    parser.add_argument(
        "--poll", type=int, default=0, help="llama.cpp's busy-wait level, 0-100 (0: yield)"
    )
    args = parser.parse_args(argv)

    import xllamacpp  # late: argparse errors should not pay for loading the native library

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    # The per-run token evalgate started this server with (from the environment, not argv, which
    # every local user can read): its health check proves it talks to this server, not to
    # another one that took the port, and no other client can use it.
    token = os.environ.pop("EVALGATE_SERVER_TOKEN", "")
    if token:
        params.api_keys = [token]
    params.hostnames = [args.host]
    params.port = args.port
    params.n_parallel = args.parallel
    # llama.cpp splits n_ctx across the slots: give every slot the context asked for.
    params.n_ctx = args.n_ctx * args.parallel
    threads = args.threads or default_threads()
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    # Waiting threads yield rather than spin: the machine's other work keeps its CPU.
    params.cpuparams.poll = params.cpuparams_batch.poll = args.poll
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = xllamacpp.Server(params)  # serves on its own threads from here on
    print(f"evalgate: llama.cpp server listening on {server.listening_address}", flush=True)
    stop.wait()
    del server  # joins the server's threads
    return 0


if __name__ == "__main__":
    sys.exit(main())
