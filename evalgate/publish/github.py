"""A small GitHub REST client: issue comments and reading a pull request, nothing else.

Sync ``httpx`` (the Action makes a handful of calls; an event loop would buy nothing), with an
injectable ``transport=`` for tests. Requests follow GitHub's REST conventions: the versioned
``Accept`` and ``X-GitHub-Api-Version`` headers, a ``User-Agent`` (GitHub refuses requests
without one), ``per_page=100`` and ``Link``-header pagination.

Retries follow GitHub's "Best practices for using the REST API": server errors get jittered
exponential backoff; rate limits (429, or 403 with ``retry-after`` or ``x-ratelimit-remaining:
0``, or a "secondary rate limit" message) wait as long as GitHub says, and no wait exceeds
``max_wait_s`` in total. A POST is not retried after a 5xx or a lost answer: GitHub may have
created the comment, so the caller reconciles (``sticky.py`` looks for its marker first).

Every failure leaves this module as a :class:`GitHubError` whose message names the HTTP status
and the fix, and never contains the token.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import httpx

from evalgate import __version__
from evalgate._json import mapping
from evalgate.errors import InfraError
from evalgate.serve._pacing import parse_retry_after

__all__ = [
    "API_VERSION",
    "DEFAULT_API_URL",
    "GitHubClient",
    "GitHubError",
    "IssueComment",
    "PullRequest",
]

API_VERSION = "2022-11-28"
DEFAULT_API_URL = "https://api.github.com"
_USER_AGENT = f"evalgate-action/{__version__}"
_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")

# The fix to print with a status that retrying cannot cure.
_FIXES = {
    401: "the token is missing, expired or revoked: pass `github-token: ${{ github.token }}`",
    403: (
        "the token may not write comments: give the job `permissions: pull-requests: write`; "
        "on pull requests from forks GitHub hands out a read-only token"
    ),
    404: "check the repository, the pull request number, and that the token can see the repo",
    410: "issues, and so their comments, are disabled on this repository",
    422: "GitHub rejected the content of the request",
}


class GitHubError(InfraError):
    """A GitHub API call failed for good; ``str(err)`` names the status and the fix."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        hint: str | None = None,
        rate_limited: bool = False,
        maybe_applied: bool = False,
    ) -> None:
        super().__init__(message, hint=hint)
        self.status = status  # None: no HTTP answer (network) or a local check
        self.rate_limited = rate_limited
        # True when a write may have taken effect despite the error (a 5xx or lost answer to a
        # POST): the caller must look before it writes again, or it may write twice.
        self.maybe_applied = maybe_applied


def _whole(value: object) -> int:
    """An id or number from GitHub's JSON; TypeError or ValueError (caught by the reader)
    for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"not a number: {type(value).__name__}")
    return int(value)


@dataclass(frozen=True)
class IssueComment:
    id: int
    body: str
    html_url: str
    user: str | None  # login; None for a deleted ("ghost") account

    @classmethod
    def from_json(cls, data: object) -> IssueComment:
        try:
            fields = mapping(data)
            login = mapping(fields.get("user")).get("login")
            return cls(
                id=_whole(fields["id"]),
                body=str(fields.get("body") or ""),
                html_url=str(fields.get("html_url") or ""),
                user=login if isinstance(login, str) else None,
            )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise GitHubError(
                f"GitHub answered with a comment evalgate cannot read ({type(exc).__name__})",
                hint="re-run the job; if it persists, report it with the GITHUB_API_URL in use",
            ) from exc


@dataclass(frozen=True)
class PullRequest:
    """What publish mode checks before it trusts a PR number it did not get from GitHub."""

    number: int
    state: str
    head_sha: str
    head_repo: str | None  # full_name; None once the fork was deleted (GitHub sends null)
    base_repo: str
    base_ref: str
    base_sha: str

    @classmethod
    def from_json(cls, data: object) -> PullRequest:
        try:
            fields = mapping(data)
            head, base = mapping(fields["head"]), mapping(fields["base"])
            head_repo = mapping(head.get("repo")).get("full_name")
            return cls(
                number=_whole(fields["number"]),
                state=str(fields["state"]),
                head_sha=str(head["sha"]),
                head_repo=None if head_repo is None else str(head_repo),
                base_repo=str(mapping(base["repo"])["full_name"]),
                base_ref=str(base["ref"]),
                base_sha=str(base["sha"]),
            )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise GitHubError(
                f"GitHub answered with a pull request evalgate cannot read ({type(exc).__name__})",
                hint="re-run the job; if it persists, report it with the GITHUB_API_URL in use",
            ) from exc


def _message(resp: httpx.Response) -> str:
    """GitHub's own error text: ``message`` plus any field errors, cut short."""
    try:
        data = resp.json()
    except ValueError:
        return resp.text[:200].strip()
    if not isinstance(data, dict):
        return ""
    text = str(data.get("message") or "")
    details = [
        str(e.get("message") or e.get("code"))
        for e in data.get("errors") or []
        if isinstance(e, dict) and (e.get("message") or e.get("code"))
    ]
    if details:
        text += f" ({'; '.join(details)})"
    return text[:300]


class GitHubClient:
    """List, create and update issue comments (a pull request is an issue to this API); read a
    pull request.

    Use as a context manager, or call :meth:`close`. ``sleep`` and ``clock`` are injectable so
    tests run retries without waiting.
    """

    def __init__(
        self,
        token: str,
        *,
        api_url: str = DEFAULT_API_URL,
        transport: httpx.BaseTransport | None = None,
        timeout_s: float = 30.0,
        max_attempts: int = 5,
        backoff_base_s: float = 1.0,
        backoff_cap_s: float = 30.0,
        max_wait_s: float = 180.0,
        max_pages: int = 100,
        user_agent: str = _USER_AGENT,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not token:
            raise GitHubError(
                "no GitHub token was given",
                hint="pass `github-token: ${{ github.token }}` to the action",
            )
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.api_url = httpx.URL(api_url.rstrip("/") + "/")
        self.max_attempts = max_attempts
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.max_wait_s = max_wait_s
        self.max_pages = max_pages
        self.requests = 0
        self.retries = 0
        self._sleep = sleep
        self._clock = clock
        self._http = httpx.Client(
            base_url=self.api_url,
            transport=transport,
            timeout=timeout_s,
            follow_redirects=True,  # a renamed repo answers 301; httpx drops auth across hosts
            headers={
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "Authorization": f"Bearer {token}",
                "User-Agent": user_agent,
            },
        )

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- the operations ------------------------------------------------------------------------

    def iter_issue_comments(self, repo: str, issue_number: int) -> Iterator[IssueComment]:
        """Yield the comments of an issue or pull request, oldest first, across all pages."""
        url = f"repos/{self._repo(repo)}/issues/{int(issue_number)}/comments"
        params: dict[str, int] | None = {"per_page": 100}
        for _ in range(self.max_pages):
            resp = self._request("GET", url, params=params)
            data = self._json(resp)
            if not isinstance(data, list):
                raise GitHubError(
                    f"GitHub answered GET {resp.request.url.path} with {type(data).__name__}, "
                    "not a list",
                    hint="check that GITHUB_API_URL points at a GitHub REST API",
                )
            for item in data:
                yield IssueComment.from_json(item)
            next_url = resp.links.get("next", {}).get("url")
            if not next_url:
                return
            url = self._same_origin(next_url)
            params = None  # the next link carries per_page and page itself
        raise GitHubError(
            f"issue {repo}#{issue_number} has more than {self.max_pages * 100} comments; "
            "evalgate stopped paging",
            hint="raise max_pages, or lock and clean up the pull request's conversation",
        )

    def list_issue_comments(self, repo: str, issue_number: int) -> list[IssueComment]:
        return list(self.iter_issue_comments(repo, issue_number))

    def create_issue_comment(self, repo: str, issue_number: int, body: str) -> IssueComment:
        url = f"repos/{self._repo(repo)}/issues/{int(issue_number)}/comments"
        resp = self._request("POST", url, json={"body": body}, idempotent=False)
        return IssueComment.from_json(self._json(resp))

    def update_issue_comment(self, repo: str, comment_id: int, body: str) -> IssueComment:
        url = f"repos/{self._repo(repo)}/issues/comments/{int(comment_id)}"
        # PATCH with the whole body is idempotent: sending it twice leaves the same comment.
        resp = self._request("PATCH", url, json={"body": body})
        return IssueComment.from_json(self._json(resp))

    def get_pull_request(self, repo: str, number: int) -> PullRequest:
        """One pull request of ``repo``, including one opened from a fork (a 404 when none)."""
        resp = self._request("GET", f"repos/{self._repo(repo)}/pulls/{int(number)}")
        return PullRequest.from_json(self._json(resp))

    def backoff(self, attempt: int) -> None:
        """Sleep before retry ``attempt`` (1-based) of a caller's own retry loop."""
        self._sleep(self._jitter(attempt))

    # -- plumbing ------------------------------------------------------------------------------

    @staticmethod
    def _repo(repo: str) -> str:
        if not _REPO_RE.match(repo) or any(part in {".", ".."} for part in repo.split("/")):
            raise GitHubError(
                f"invalid repository {repo!r}", hint="expected OWNER/NAME, as GITHUB_REPOSITORY"
            )
        return repo

    def _same_origin(self, url: str) -> str:
        # The token goes with every request: never follow a Link to another host.
        target = httpx.URL(url)
        if (target.scheme, target.host, target.port) != (
            self.api_url.scheme,
            self.api_url.host,
            self.api_url.port,
        ):
            raise GitHubError(
                f"GitHub's pagination link points to another host ({target.host})",
                hint="check GITHUB_API_URL",
            )
        return url

    def _jitter(self, attempt: int) -> float:
        # Full jitter: concurrent jobs hitting the same outage spread their retries apart.
        return random.uniform(0, min(self.backoff_cap_s, self.backoff_base_s * 2**attempt))

    def _rate_limit_wait(self, resp: httpx.Response, strikes: int) -> float | None:
        """Seconds GitHub asks us to wait, or None when the answer is not a rate limit."""
        if resp.status_code not in (403, 429):
            return None
        headers = resp.headers
        retry_after = parse_retry_after(headers.get("retry-after"), self._clock())
        if retry_after is not None:
            return retry_after
        if headers.get("x-ratelimit-remaining") == "0":
            try:
                reset = float(headers.get("x-ratelimit-reset", ""))
            except ValueError:
                reset = self._clock() + 60
            return max(0.0, reset - self._clock()) + 1.0  # reset is in whole seconds
        if resp.status_code == 429 or "secondary rate limit" in _message(resp).lower():
            # GitHub: without headers, wait at least a minute, longer on each repeat.
            return 60.0 * 2 ** (strikes - 1)
        return None

    def _request(
        self,
        method: str,
        url: str,
        *,
        params: dict[str, int] | None = None,
        json: Mapping[str, object] | None = None,
        idempotent: bool = True,
    ) -> httpx.Response:
        path = self._http.build_request(method, url).url.path  # for messages: no query, no host
        waited = 0.0
        strikes = 0
        for attempt in range(1, self.max_attempts + 1):
            last = attempt == self.max_attempts
            self.requests += 1
            try:
                resp = self._http.request(method, url, params=params, json=json)
            except httpx.TransportError as exc:
                # A connect failure means GitHub never saw the request; anything later may have
                # reached it, which matters for a POST.
                unsent = isinstance(
                    exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout
                )
                if (idempotent or unsent) and not last:
                    self._pause(self._jitter(attempt))
                    continue
                raise GitHubError(
                    f"GitHub API {method} {path}: no answer from {self.api_url.host} "
                    f"({type(exc).__name__}) after {attempt} attempt(s)",
                    hint="check the runner's network and GITHUB_API_URL, then re-run the job",
                    maybe_applied=not (idempotent or unsent),
                ) from exc
            if resp.status_code < 400:
                return resp

            wait = self._rate_limit_wait(resp, strikes + 1)
            if wait is not None:
                strikes += 1
                # GitHub did not act on a rate-limited request: safe to resend even a POST.
                if not last and waited + wait <= self.max_wait_s:
                    wait += random.uniform(0, 1.0)  # don't return in lockstep with other jobs
                    waited += wait
                    self._pause(wait)
                    continue
                if last:
                    hint = f"GitHub kept rate-limiting for {attempt} attempts; re-run the job later"
                else:
                    hint = (
                        f"GitHub's rate limit asks to wait {wait:.0f} s, more than evalgate "
                        f"waits ({self.max_wait_s:.0f} s in all); re-run the job later"
                    )
                raise self._error(method, path, resp, attempt, rate_limit_hint=hint)
            if resp.status_code >= 500 and idempotent and not last:
                # A 503 may say when to come back; otherwise back off with jitter.
                after = parse_retry_after(resp.headers.get("retry-after"), self._clock())
                delay = self._jitter(attempt) if after is None else min(after, self.backoff_cap_s)
                self._pause(delay)
                continue
            raise self._error(method, path, resp, attempt)
        raise AssertionError("unreachable")  # the loop returns or raises on its last attempt

    def _pause(self, seconds: float) -> None:
        self.retries += 1
        self._sleep(seconds)

    def _error(
        self,
        method: str,
        path: str,
        resp: httpx.Response,
        attempts: int,
        *,
        rate_limit_hint: str | None = None,
    ) -> GitHubError:
        status = resp.status_code
        detail = _message(resp)
        head = f"GitHub API {method} {path} failed: HTTP {status} {resp.reason_phrase}".rstrip()
        if detail:
            head += f": {detail}"
        if attempts > 1:
            head += f" (after {attempts} attempts)"
        server_error = status >= 500
        if rate_limit_hint is not None:
            hint = rate_limit_hint
        elif server_error:
            hint = "GitHub had a server error; re-run the job (see githubstatus.com)"
        else:
            hint = _FIXES.get(status, "see GitHub's message above")
        return GitHubError(
            head,
            status=status,
            hint=hint,
            rate_limited=rate_limit_hint is not None,
            maybe_applied=server_error and method == "POST",
        )

    @staticmethod
    def _json(resp: httpx.Response) -> object:
        try:
            return resp.json()
        except ValueError:
            request = resp.request
            raise GitHubError(
                f"GitHub answered {request.method} {request.url.path} with HTTP "
                f"{resp.status_code} but no JSON",
                hint="check that GITHUB_API_URL points at a GitHub REST API",
            ) from None
