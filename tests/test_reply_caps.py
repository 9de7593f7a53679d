"""Caps on what the model returns and on what a template renders, with clear errors.

A reply over ``eval.max_reply_mib`` is the rollout's error ``too_large`` (not retried, never read
whole); a prompt template whose output is over the cap fails ``validate`` as it fails ``local``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.config.spec._base import Sampling
from evalgate.serve.base import Endpoint
from evalgate.serve.client import ChatClient, RequestFailed


def _ask(server: Any, cap: int) -> Any:
    async def go() -> Any:
        endpoint = Endpoint(base_url=server.base_url, model="scripted")
        async with ChatClient(endpoint, Sampling(), max_retries=2, max_reply_bytes=cap) as c:
            return await c.chat([{"role": "user", "content": "hi"}]), c.stats

    return asyncio.run(go())


def test_a_reply_over_the_cap_is_an_error_kind_and_not_retried(scripted_server: Any) -> None:
    server = scripted_server(lambda body, n: "a" * (3 << 20))
    with pytest.raises(RequestFailed) as caught:
        _ask(server, 1 << 20)
    assert caught.value.kind == "too_large" and "max_reply_mib" in str(caught.value)
    reply, stats = _ask(server, 4 << 20)
    assert len(reply.text) == 3 << 20 and stats.retries == 0


def test_max_reply_mib_is_a_setting() -> None:
    from evalgate.config.spec._base import EvalSettings

    assert EvalSettings().max_reply_mib == 4.0
    assert EvalSettings(max_reply_mib=0.5).max_reply_mib == 0.5


# One expression each that would build gigabytes; the cap stops each before it runs.
HUGE = {
    "repetition": "{{ 'a' * 2000000000 }}",
    "repetition, int first": "{{ 2000000000 * 'a' }}",
    "list repetition": "{{ ([1] * 2000000000) | length }}",
    "doubling by ~": "{% set ns = namespace(s='a') %}{% for i in range(40) %}"
    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
    "doubling by +": "{% set ns = namespace(s='a') %}{% for i in range(40) %}"
    "{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s | length }}",
    "ljust": "{{ 'a'.ljust(2000000000) }}",
    "center filter": "{{ 'a' | center(2000000000) }}",
    "format width": "{{ '{:>2000000000}'.format(1) }}",
    "percent width": "{{ '%2000000000s' % 'a' }}",
    "percent star": "{{ '%*s' % (2000000000, 'a') }}",
    "power": "{{ 10 ** 1000000000 }}",
}


@pytest.mark.parametrize("case", list(HUGE))
def test_a_template_that_would_build_gigabytes_is_a_config_error(case: str) -> None:
    from evalgate._templating import TemplateProblem, compile_template, render

    with pytest.raises(TemplateProblem) as caught:
        render(compile_template(HUGE[case]), {})
    assert "more than 4,000,000 characters" in str(caught.value) or "too large" in str(
        caught.value
    ), (case, caught.value)


def test_what_slips_past_the_checks_fails_as_memory_not_the_machine() -> None:
    from evalgate._templating import TemplateProblem, compile_template, render

    # 2,000 lines of 3.9 MB each: every argument under the cap, the product 8 GB.
    template = "{{ ('a\\n' * 2000) | indent(3900000) | length }}"
    with pytest.raises(TemplateProblem, match="more memory"):
        render(compile_template(template), {})
    # An honest template renders as before.
    assert render(compile_template("{{ x | upper }} {{ '%5s' % 'a' }}"), {"x": "b"}) == "B     a"


def test_validate_caps_template_output_like_local(tmp_path: Path) -> None:
    """The issue's case, `{{ 'a' * 2000000000 }}` in validate: exit 2, one line, no gigabytes
    (run with 2 GiB of address space, so that a regression fails instead of eating the box)."""
    import resource
    import subprocess
    import sys

    (tmp_path / "d.jsonl").write_text('{"prompt": "a", "answer": "b"}\n')
    (tmp_path / "evals.yaml").write_text(
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        "benchmarks: [{name: d, kind: jsonl, path: d.jsonl, "
        "prompt_template: \"{{ prompt }}{{ 'a' * 2000000000 }}\"}]\n"
    )

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    proc = subprocess.run(
        [sys.executable, "-m", "evalgate", "validate", "evals.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        preexec_fn=limit,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "more than 4,000,000 characters" in proc.stderr and "Traceback" not in proc.stderr


def _ask_chunked(text: str, cap: int) -> Any:
    """A reply sent without Content-Length (chunked, as a streaming proxy sends it), in pieces:
    the size check that cannot look at the header counts what arrives."""
    from aiohttp import web

    async def handle(request: web.Request) -> web.StreamResponse:
        body = json.dumps({"choices": [{"message": {"content": text}}], "usage": {}}).encode()
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for start in range(0, len(body), 1 << 18):
            await resp.write(body[start : start + (1 << 18)])
        await resp.write_eof()
        return resp

    async def go() -> Any:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            endpoint = Endpoint(base_url=f"http://127.0.0.1:{port}/v1", model="m")
            async with ChatClient(endpoint, Sampling(), max_retries=0, max_reply_bytes=cap) as c:
                return await c.chat([{"role": "user", "content": "hi"}])
        finally:
            await runner.cleanup()

    return asyncio.run(go())


def test_a_chunked_reply_is_capped_as_it_arrives() -> None:
    with pytest.raises(RequestFailed) as caught:
        _ask_chunked("a" * (3 << 20), 1 << 20)
    assert caught.value.kind == "too_large"
    assert _ask_chunked("b" * (1 << 19), 1 << 20).text == "b" * (1 << 19)
