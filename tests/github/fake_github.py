"""A stateful fake of GitHub's issue-comments and pull-request API on 127.0.0.1, held to GitHub's
own description.

Every request is validated against the committed subset of ``@octokit/openapi``
(``data/api.github.com.subset.json``) before the fake acts on it, and every response before it is
sent. A mismatch is answered with HTTP 500 carrying the validation error and recorded in
``violations``; the ``github`` fixture fails the test when any were recorded, so a client bug
cannot hide behind a retry or a degraded result.

What the description does not say, the fake checks by GitHub's documentation: the
``X-GitHub-Api-Version``, ``Accept`` and ``User-Agent`` headers, the bearer token (401 "Bad
credentials" like GitHub), ``per_page`` capped at 100, and the 65,536-character body limit (422
like GitHub). Error statuses an operation does not document (GitHub answers 401, 403, 404 and 5xx
from any endpoint) are validated against GitHub's generic ``basic-error`` schema.

Pull requests are seeded (``seed_pull``: number, head commit, head repository — a fork or the
repository itself) and served by ``GET /repos/{owner}/{repo}/pulls/{pull_number}`` as GitHub's
full ``pull-request`` object; an unseeded number is a 404, like a number that is an issue.

``faults`` script failures: the next matching request gets the fault's status, headers and body,
optionally after the fake carried the request out (GitHub did it, but the answer was an error) or
after a delay (the answer was lost to a client timeout).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from openapi_core import OpenAPI
from openapi_core.testing import MockRequest, MockResponse

from tests.openapi_contract import (
    describe,
    load_document,
    mock_request,
    request_error,
    response_error,
    schema_validator,
)

__all__ = [
    "BODY_LIMIT",
    "SPEC_PATH",
    "TOKEN",
    "Exchange",
    "FakeGitHub",
    "Fault",
    "load_spec",
    "running_fake",
    "schema_validator",
]

SPEC_PATH = Path(__file__).resolve().parent / "data" / "api.github.com.subset.json"
SPEC_SERVER = "https://api.github.com"  # the server the description names; the fake stands in
TOKEN = "test-token-not-a-secret"
BODY_LIMIT = 65_536
API_VERSION = "2022-11-28"
DOCS = "https://docs.github.com/rest/issues/comments"
PULLS_DOCS = "https://docs.github.com/rest/pulls/pulls#get-a-pull-request"

_LIST = re.compile(r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/issues/(?P<number>\d+)/comments$")
_ONE = re.compile(r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/issues/comments/(?P<id>\d+)$")
_PULL = re.compile(r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/pulls/(?P<number>\d+)$")


def load_spec() -> dict[str, Any]:
    return load_document(SPEC_PATH)


@dataclass
class Fault:
    """Answer the next ``times`` requests matching ``method`` (and ``path`` regex) like this."""

    method: str
    status: int | None  # None: the real answer (with ``delay_s``: a lost answer)
    body: Any = field(default_factory=lambda: {"message": "Server Error"})
    headers: dict[str, str] = field(default_factory=dict)
    path: str | None = None
    times: int = 1
    apply: bool = False  # carry the request out first: GitHub acted, but answered an error
    delay_s: float = 0.0  # answer late (after the client gave up)


@dataclass
class Exchange:
    method: str
    path: str
    query: dict[str, str]
    status: int
    body: Any  # the request's JSON body, if any


class FakeGitHub:
    """The state and the rules; :class:`_Handler` only moves bytes."""

    def __init__(self, openapi: OpenAPI, spec: dict[str, Any]) -> None:
        self.openapi = openapi
        self.basic_error = schema_validator(spec, "basic-error")
        self.url = ""  # set when the server starts
        self.comments: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.pulls: dict[tuple[str, int], dict[str, Any]] = {}
        self.faults: list[Fault] = []
        self.log: list[Exchange] = []
        self.violations: list[str] = []
        self.poster = "github-actions[bot]"  # the token's identity: a PAT's or an App's login else
        self._next_id = 1_000_001
        self._clock = 1_767_225_600  # 2026-01-01T00:00:00Z, advanced per write
        self._lock = threading.Lock()

    # -- test helpers ----------------------------------------------------------------------

    def seed(self, repo: str, number: int, bodies: list[str], *, login: str = "octocat") -> None:
        """Put comments on a pull request as if people had written them."""
        with self._lock:
            for body in bodies:
                self._new_comment(repo, number, body, login=login)

    def seed_pull(
        self,
        repo: str,
        number: int,
        head_sha: str,
        *,
        head_repo: str | None = None,
        base_repo: str | None = None,
        base_sha: str = "0" * 40,
        head_ref: str = "feature",
        base_ref: str = "main",
    ) -> dict[str, Any]:
        """Open pull request ``number`` in ``repo`` from ``head_repo`` (default: ``repo`` itself;
        another name makes it a fork's PR). ``base_repo`` overrides what the PR says it targets,
        which on GitHub is ``repo`` itself."""
        with self._lock:
            self._clock += 1
            pull = _pull(
                repo,
                number,
                head=(head_repo or repo, head_ref, head_sha),
                base=(base_repo or repo, base_ref, base_sha),
                when=_iso(self._clock),
            )
            self.pulls[repo, number] = pull
            return pull

    def bodies(self, repo: str, number: int) -> list[str]:
        return [c["body"] for c in self.comments.get((repo, number), [])]

    def requests(self, method: str | None = None) -> list[Exchange]:
        return [e for e in self.log if method is None or e.method == method]

    # -- the API ---------------------------------------------------------------------------

    def handle(
        self, method: str, target: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        request, path, query = mock_request(SPEC_SERVER, method, target, headers, raw)
        try:
            payload = json.loads(raw) if raw else None
        except ValueError:
            payload = raw.decode("utf-8", "replace")
        with self._lock:
            status, out_headers, body = self._answer(method, path, query, headers, request)
        fault_delay = out_headers.pop("x-fake-delay", None)
        if fault_delay:
            time.sleep(float(fault_delay))
        self.log.append(Exchange(method, path, query, status, payload))
        return status, out_headers, body

    def _answer(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        headers: dict[str, str],
        request: MockRequest,
    ) -> tuple[int, dict[str, str], bytes]:
        problems = self._convention_problems(headers)
        exc = request_error(self.openapi, request)
        if exc is not None:
            problems.append(f"request does not match the OpenAPI description: {describe(exc)}")
        if problems:
            return self._violation(method, path, problems)
        if headers.get("authorization") != f"Bearer {TOKEN}":
            return self._respond(request, 401, {"message": "Bad credentials", "status": "401"})

        fault = self._take_fault(method, path)
        delay = {"x-fake-delay": str(fault.delay_s)} if fault and fault.delay_s else {}
        if fault is not None and fault.status is not None:
            if fault.apply:
                self._operate(method, path, query, request)
            return self._respond(request, fault.status, fault.body, {**fault.headers, **delay})
        status, body, extra = self._operate(method, path, query, request)
        return self._respond(request, status, body, {**extra, **delay})

    def _convention_problems(self, headers: dict[str, str]) -> list[str]:
        problems = []
        if headers.get("x-github-api-version") != API_VERSION:
            problems.append(f"X-GitHub-Api-Version must be {API_VERSION}")
        if "application/vnd.github+json" not in headers.get("accept", ""):
            problems.append("Accept must be application/vnd.github+json")
        if not headers.get("user-agent"):
            problems.append("GitHub refuses requests without a User-Agent")
        return problems

    def _take_fault(self, method: str, path: str) -> Fault | None:
        for fault in self.faults:
            if fault.method == method and (fault.path is None or re.search(fault.path, path)):
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    def _operate(
        self, method: str, path: str, query: dict[str, str], request: MockRequest
    ) -> tuple[int, Any, dict[str, str]]:
        body = json.loads(request.body) if request.body else None
        if (m := _LIST.match(path)) and method == "GET":
            repo, number = f"{m['owner']}/{m['repo']}", int(m["number"])
            return self._list(repo, number, path, query)
        if (m := _LIST.match(path)) and method == "POST":
            repo, number = f"{m['owner']}/{m['repo']}", int(m["number"])
            if len(body["body"]) > BODY_LIMIT:
                return 422, _too_long("create-an-issue-comment"), {}
            comment = self._new_comment(repo, number, body["body"], login=self.poster)
            return 201, comment, {"location": comment["url"]}
        if (m := _PULL.match(path)) and method == "GET":
            pull = self.pulls.get((f"{m['owner']}/{m['repo']}", int(m["number"])))
            if pull is None:
                return (
                    404,
                    {"message": "Not Found", "documentation_url": PULLS_DOCS, "status": "404"},
                    {},
                )
            return 200, pull, {}
        if (m := _ONE.match(path)) and method == "PATCH":
            comment = self._find(f"{m['owner']}/{m['repo']}", int(m["id"]))
            if comment is None:
                return 404, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}, {}
            if len(body["body"]) > BODY_LIMIT:
                return 422, _too_long("update-an-issue-comment"), {}
            self._clock += 1
            comment["body"] = body["body"]
            comment["updated_at"] = _iso(self._clock)
            return 200, comment, {}
        return 404, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}, {}

    def _list(
        self, repo: str, number: int, path: str, query: dict[str, str]
    ) -> tuple[int, Any, dict[str, str]]:
        per_page = min(int(query.get("per_page", 30)), 100)  # GitHub caps silently at 100
        page = max(int(query.get("page", 1)), 1)
        items = self.comments.get((repo, number), [])
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []
        # GitHub's order: prev, next, last, first; each only where it applies.
        if page > 1:
            links.append((page - 1, "prev"))
        if page < last:
            links += [(page + 1, "next"), (last, "last")]
        if page > 1:
            links.append((1, "first"))
        headers = {}
        if links:
            headers["link"] = ", ".join(
                f'<{self.url}{path}?per_page={per_page}&page={n}>; rel="{rel}"' for n, rel in links
            )
        return 200, chunk, headers

    def _find(self, repo: str, comment_id: int) -> dict[str, Any] | None:
        for (owner_repo, _), items in self.comments.items():
            for comment in items:
                if owner_repo == repo and comment["id"] == comment_id:
                    return comment
        return None

    def _new_comment(self, repo: str, number: int, body: str, *, login: str) -> dict[str, Any]:
        cid = self._next_id
        self._next_id += 1
        self._clock += 1
        bot = login.endswith("[bot]")
        comment = {
            "id": cid,
            "node_id": f"IC_kwDOFake{cid}",
            "url": f"{SPEC_SERVER}/repos/{repo}/issues/comments/{cid}",
            "html_url": f"https://github.com/{repo}/pull/{number}#issuecomment-{cid}",
            "body": body,
            "user": _user(login, bot=bot),
            "created_at": _iso(self._clock),
            "updated_at": _iso(self._clock),
            "issue_url": f"{SPEC_SERVER}/repos/{repo}/issues/{number}",
            "author_association": "NONE" if bot else "MEMBER",
            "performed_via_github_app": None,
            "reactions": {
                "url": f"{SPEC_SERVER}/repos/{repo}/issues/comments/{cid}/reactions",
                "total_count": 0,
                **dict.fromkeys(
                    ("+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes"), 0
                ),
            },
        }
        self.comments.setdefault((repo, number), []).append(comment)
        return comment

    def _respond(
        self,
        request: MockRequest,
        status: int,
        body: Any,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        out = {
            "content-type": "application/json; charset=utf-8",
            "x-github-api-version-selected": API_VERSION,
            "x-ratelimit-limit": "5000",
            "x-ratelimit-remaining": "4987",
            "x-ratelimit-reset": str(int(time.time()) + 3600),
            "x-ratelimit-used": "13",
            "x-ratelimit-resource": "core",
        }
        out.update(headers or {})
        problem = self._response_problem(request, status, raw, out)
        if problem:
            return self._violation(request.method.upper(), request.path, [problem])
        return status, out, raw

    def _response_problem(
        self, request: MockRequest, status: int, raw: bytes, headers: dict[str, str]
    ) -> str | None:
        visible = {k: v for k, v in headers.items() if not k.startswith("x-fake-")}
        response = MockResponse(raw, status, visible, content_type=headers["content-type"])
        exc = response_error(self.openapi, request, response)
        if exc is None:
            return None
        documented = type(exc).__name__ != "ResponseNotFound"
        if documented or status < 400:
            return f"response does not match the OpenAPI description: {describe(exc)}"
        # An error status this operation does not document: GitHub's generic error shape.
        try:
            data = json.loads(raw)
        except ValueError:
            return f"HTTP {status} body is not JSON"
        errors = [e.message for e in self.basic_error.iter_errors(data)]
        return f"HTTP {status} body is not a basic-error: {errors}" if errors else None

    def _violation(
        self, method: str, path: str, problems: list[str]
    ) -> tuple[int, dict[str, str], bytes]:
        text = f"{method} {path}: " + "; ".join(problems)
        self.violations.append(text)
        body = json.dumps({"message": f"fake GitHub: {text}"}).encode("utf-8")
        return 500, {"content-type": "application/json; charset=utf-8"}, body


def _iso(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _too_long(operation: str) -> dict[str, Any]:
    return {
        "message": "Validation Failed",
        "errors": [
            {
                "resource": "IssueComment",
                "code": "custom",
                "field": "body",
                "message": f"body is too long (maximum is {BODY_LIMIT} characters)",
            }
        ],
        "documentation_url": f"{DOCS}#{operation}",
        "status": "422",
    }


def _repository(full_name: str, when: str, *, fork: bool) -> dict[str, Any]:
    """A ``repository`` object as GitHub embeds it in a pull request's head and base."""
    owner, name = full_name.split("/")
    api, html = f"{SPEC_SERVER}/repos/{full_name}", f"https://github.com/{full_name}"
    rid = 873_465_129 + sum(map(ord, full_name))  # stable per name
    return {
        "id": rid,
        "node_id": f"R_kgDOFake{rid}",
        "name": name,
        "full_name": full_name,
        "private": False,
        "owner": _user(owner, bot=False),
        "html_url": html,
        "description": None,
        "fork": fork,
        "url": api,
        **{f"{k}_url": f"{api}/{k}" for k in _REPO_LINKS},
        **{f"{k}_url": f"{api}/{v}" for k, v in _REPO_TEMPLATES.items()},
        "git_url": f"git://github.com/{full_name}.git",
        "ssh_url": f"git@github.com:{full_name}.git",
        "clone_url": f"{html}.git",
        "svn_url": html,
        "mirror_url": None,
        "homepage": None,
        "language": "Python",
        "forks_count": 0,
        "forks": 0,
        "stargazers_count": 0,
        "watchers_count": 0,
        "watchers": 0,
        "size": 120,
        "default_branch": "main",
        "open_issues_count": 1,
        "open_issues": 1,
        "is_template": False,
        "topics": [],
        "has_issues": True,
        "has_projects": True,
        "has_wiki": True,
        "has_pages": False,
        "has_downloads": True,
        "has_discussions": False,
        "archived": False,
        "disabled": False,
        "visibility": "public",
        "license": None,
        "allow_forking": True,
        "web_commit_signoff_required": False,
        "pushed_at": when,
        "created_at": "2025-10-01T09:00:00Z",
        "updated_at": when,
    }


# <name>_url: plain links, and links with URI-template parts, as GitHub spells them.
_REPO_LINKS = ("contributors", "deployments", "downloads", "events", "forks", "hooks", "languages",
               "merges", "stargazers", "subscribers", "subscription", "tags", "teams")  # fmt: skip
_REPO_TEMPLATES = {
    "archive": "{archive_format}{/ref}", "assignees": "assignees{/user}",
    "blobs": "git/blobs{/sha}", "branches": "branches{/branch}",
    "collaborators": "collaborators{/collaborator}", "comments": "comments{/number}",
    "commits": "commits{/sha}", "compare": "compare/{base}...{head}",
    "contents": "contents/{+path}", "git_commits": "git/commits{/sha}",
    "git_refs": "git/refs{/sha}", "git_tags": "git/tags{/sha}",
    "issue_comment": "issues/comments{/number}", "issue_events": "issues/events{/number}",
    "issues": "issues{/number}", "keys": "keys{/key_id}", "labels": "labels{/name}",
    "milestones": "milestones{/number}", "notifications": "notifications{?since,all,participating}",
    "pulls": "pulls{/number}", "releases": "releases{/id}", "statuses": "statuses/{sha}",
    "trees": "git/trees{/sha}",
}  # fmt: skip


def _pull(
    repo: str, number: int, *, head: tuple[str, str, str], base: tuple[str, str, str], when: str
) -> dict[str, Any]:
    """An open ``pull-request`` as ``GET /repos/{owner}/{repo}/pulls/{pull_number}`` returns it."""
    api, html = f"{SPEC_SERVER}/repos/{repo}", f"https://github.com/{repo}"
    (head_repo, head_ref, head_sha), (base_repo, base_ref, base_sha) = head, base
    author = head_repo.split("/")[0]
    links = {
        "self": f"{api}/pulls/{number}",
        "html": f"{html}/pull/{number}",
        "issue": f"{api}/issues/{number}",
        "comments": f"{api}/issues/{number}/comments",
        "review_comments": f"{api}/pulls/{number}/comments",
        "review_comment": f"{api}/pulls/comments{{/number}}",
        "commits": f"{api}/pulls/{number}/commits",
        "statuses": f"{api}/statuses/{head_sha}",
    }

    def side(full_name: str, ref: str, sha: str) -> dict[str, Any]:
        owner = full_name.split("/")[0]
        return {
            "label": f"{owner}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": _user(owner, bot=False),
            "repo": _repository(full_name, when, fork=full_name != repo),
        }

    return {
        "url": links["self"],
        "id": 2_254_716_338 + number,
        "node_id": f"PR_kwDOFake{number}",
        "html_url": links["html"],
        "diff_url": f"{links['html']}.diff",
        "patch_url": f"{links['html']}.patch",
        "issue_url": links["issue"],
        "commits_url": links["commits"],
        "review_comments_url": links["review_comments"],
        "review_comment_url": links["review_comment"],
        "comments_url": links["comments"],
        "statuses_url": links["statuses"],
        "number": number,
        "state": "open",
        "locked": False,
        "title": f"Change #{number}",
        "user": _user(author, bot=False),
        "body": None,
        "labels": [],
        "milestone": None,
        "active_lock_reason": None,
        "created_at": when,
        "updated_at": when,
        "closed_at": None,
        "merged_at": None,
        "merge_commit_sha": None,
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "head": side(head_repo, head_ref, head_sha),
        "base": side(base_repo, base_ref, base_sha),
        "_links": {k: {"href": v} for k, v in links.items()},
        "author_association": "CONTRIBUTOR" if head_repo != repo else "MEMBER",
        "auto_merge": None,
        "draft": False,
        "merged": False,
        "mergeable": True,
        "rebaseable": True,
        "mergeable_state": "clean",
        "merged_by": None,
        "comments": 0,
        "review_comments": 0,
        "maintainer_can_modify": head_repo != repo,
        "commits": 1,
        "additions": 3,
        "deletions": 1,
        "changed_files": 1,
    }


def _user(login: str, *, bot: bool) -> dict[str, Any]:
    uid = 41898282 if bot else 583231
    api = f"{SPEC_SERVER}/users/{login.replace('[', '%5B').replace(']', '%5D')}"
    return {
        "login": login,
        "id": uid,
        "node_id": "MDM6Qm90NDE4OTgyODI=" if bot else "MDQ6VXNlcjU4MzIzMQ==",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
        "gravatar_id": "",
        "url": api,
        "html_url": f"https://github.com/apps/{login[:-5]}"
        if bot
        else f"https://github.com/{login}",
        "followers_url": f"{api}/followers",
        "following_url": f"{api}/following{{/other_user}}",
        "gists_url": f"{api}/gists{{/gist_id}}",
        "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{api}/subscriptions",
        "organizations_url": f"{api}/orgs",
        "repos_url": f"{api}/repos",
        "events_url": f"{api}/events{{/privacy}}",
        "received_events_url": f"{api}/received_events",
        "type": "Bot" if bot else "User",
        "user_view_type": "public",
        "site_admin": False,
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as httpx uses it
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall
    fake: FakeGitHub  # set on a per-server subclass

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        status, out, body = self.fake.handle(self.command, self.path, headers, raw)
        try:
            self.send_response(status)
            for name, value in out.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out first: that was the point of the delay

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass  # pytest shows the exchange log on failure instead


@contextlib.contextmanager
def running_fake(openapi: OpenAPI, spec: dict[str, Any]) -> Iterator[FakeGitHub]:
    """Serve a fresh :class:`FakeGitHub` on 127.0.0.1 until the generator is closed."""
    fake = FakeGitHub(openapi, spec)
    handler = type("Handler", (_Handler,), {"fake": fake})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    # A short poll interval: shutdown() waits for the loop to notice, once per test.
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
