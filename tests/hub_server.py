"""A local stand-in for the Hugging Face Hub: the endpoints ``huggingface_hub``'s HfApi uses to
create a dataset repository, commit small files and list a tree, over real HTTP (``HF_ENDPOINT``).

State is in memory: repos → {path: bytes}, with a commit list. Write requests need
``Authorization: Bearer <token>``; the headers seen are kept for the tests.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


def _blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's blob id


@dataclass
class Repo:
    private: bool
    files: dict[str, bytes] = field(default_factory=dict)
    commits: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class FakeHub:
    token: str
    repos: dict[str, Repo] = field(default_factory=dict)
    authorization: list[str | None] = field(default_factory=list)
    url: str = ""

    def _authorized(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization")
        self.authorization.append(header)
        return header == f"Bearer {self.token}"

    @staticmethod
    def _error(status: int, code: str, message: str) -> web.Response:
        return web.json_response({"error": message}, status=status, headers={"X-Error-Code": code})

    async def create(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._error(401, "Unauthorized", "Invalid credentials")
        body = await request.json()
        assert body.get("type") == "dataset", body
        repo_id = f"{body['organization']}/{body['name']}"
        if repo_id in self.repos:  # the Hub's 409 names the existing repo's URL too
            return web.json_response(
                {
                    "error": "You already created this dataset repo",
                    "url": f"{self.url}/datasets/{repo_id}",
                },
                status=409,
            )
        self.repos[repo_id] = Repo(
            private=body.get("visibility") == "private" or bool(body.get("private"))
        )
        return web.json_response({"url": f"{self.url}/datasets/{repo_id}", "name": repo_id})

    def _repo(self, request: web.Request) -> Repo | None:
        return self.repos.get(f"{request.match_info['org']}/{request.match_info['name']}")

    async def validate_yaml(self, request: web.Request) -> web.Response:
        return web.json_response({"errors": [], "warnings": []})

    async def preupload(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        if not self._authorized(request) or repo is None:
            return self._error(404, "RepoNotFound", "Repository not found")
        files = (await request.json())["files"]
        out = [
            {
                "path": f["path"],
                "uploadMode": "regular",
                "shouldIgnore": False,
                "oid": _blob_oid(repo.files[f["path"]]) if f["path"] in repo.files else None,
            }
            for f in files
        ]
        return web.json_response({"files": out})

    async def commit(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        if not self._authorized(request) or repo is None:
            return self._error(404, "RepoNotFound", "Repository not found")
        lines = [json.loads(x) for x in (await request.read()).decode().splitlines() if x.strip()]
        header = next(x["value"] for x in lines if x["key"] == "header")
        added = {}
        for line in lines:
            if line["key"] == "file":
                value = line["value"]
                assert value["encoding"] == "base64", value
                added[value["path"]] = base64.b64decode(value["content"])
            elif line["key"] != "header":
                return self._error(400, "BadRequest", f"unsupported operation {line['key']}")
        repo.files.update(added)
        oid = secrets.token_hex(20)
        repo.commits.append({"oid": oid, "summary": header["summary"], "paths": sorted(added)})
        name = f"{request.match_info['org']}/{request.match_info['name']}"
        return web.json_response(
            {"commitUrl": f"{self.url}/datasets/{name}/commit/{oid}", "commitOid": oid}
        )

    async def tree(self, request: web.Request) -> web.Response:
        repo = self._repo(request)
        if repo is None:
            return self._error(404, "RepoNotFound", "Repository not found")
        prefix = request.match_info.get("path", "").strip("/")
        recursive = request.query.get("recursive", "false").lower() in ("true", "1")
        under = [p for p in repo.files if not prefix or p.startswith(prefix + "/")]
        if prefix and not under:
            return self._error(404, "EntryNotFound", f"{prefix} does not exist")
        entries: dict[str, dict[str, Any]] = {}
        for path in under:
            rest = path[len(prefix) + 1 :] if prefix else path
            parts = rest.split("/")
            depth = len(parts) if recursive else 1
            for i in range(1, min(depth, len(parts)) + 1):
                sub = "/".join(([prefix] if prefix else []) + parts[:i])
                if i == len(parts):
                    data = repo.files[path]
                    entries[sub] = {
                        "type": "file",
                        "path": sub,
                        "size": len(data),
                        "oid": _blob_oid(data),
                    }
                else:
                    entries.setdefault(sub, {"type": "directory", "path": sub, "oid": "0" * 40})
        return web.json_response(sorted(entries.values(), key=lambda e: e["path"]))


def serve_hub(token: str) -> Iterator[FakeHub]:
    """Run a FakeHub on loopback in a background loop (a generator for a pytest fixture)."""
    hub = FakeHub(token=token)
    app = web.Application(client_max_size=64 * 2**20)
    repo = "/api/datasets/{org}/{name}"
    app.router.add_post("/api/repos/create", hub.create)
    app.router.add_post("/api/validate-yaml", hub.validate_yaml)
    app.router.add_post(repo + "/preupload/{rev}", hub.preupload)
    app.router.add_post(repo + "/commit/{rev}", hub.commit)
    app.router.add_get(repo + "/tree/{rev}", hub.tree)
    app.router.add_get(repo + "/tree/{rev}/{path:.*}", hub.tree)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runner = web.AppRunner(app, access_log=None)

    async def boot() -> int:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    port = asyncio.run_coroutine_threadsafe(boot(), loop).result(10)
    hub.url = f"http://127.0.0.1:{port}"
    try:
        yield hub
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
