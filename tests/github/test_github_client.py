"""The REST client against the spec-validated fake GitHub: pagination, retries, errors."""

from __future__ import annotations

import socket

import httpx
import pytest
from fake_github import TOKEN, FakeGitHub, Fault

from evalgate.errors import EvalgateError
from evalgate.publish.github import GitHubClient, GitHubError

REPO = "octo-org/evals-demo"
PR = 42
SECONDARY = {
    "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you "
    "try again.",
    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
}


def test_create_list_update_roundtrip(client: GitHubClient, github: FakeGitHub) -> None:
    created = client.create_issue_comment(REPO, PR, "first")
    assert created.body == "first" and created.user == "github-actions[bot]"
    assert created.html_url.endswith(f"#issuecomment-{created.id}")
    updated = client.update_issue_comment(REPO, created.id, "second")
    assert updated.id == created.id and updated.body == "second"
    assert [c.body for c in client.list_issue_comments(REPO, PR)] == ["second"]
    assert client.retries == 0


def test_pagination_follows_link_header_across_all_pages(
    client: GitHubClient, github: FakeGitHub
) -> None:
    github.seed(REPO, PR, [f"comment {i}" for i in range(250)])
    bodies = [c.body for c in client.iter_issue_comments(REPO, PR)]
    assert bodies == [f"comment {i}" for i in range(250)]
    gets = github.requests("GET")
    assert [e.query for e in gets] == [
        {"per_page": "100"},
        {"per_page": "100", "page": "2"},
        {"per_page": "100", "page": "3"},
    ]


def test_iteration_stops_at_the_first_page_the_caller_needs(
    client: GitHubClient, github: FakeGitHub
) -> None:
    github.seed(REPO, PR, [f"c{i}" for i in range(150)])
    assert next(iter(client.iter_issue_comments(REPO, PR))).body == "c0"
    assert len(github.requests("GET")) == 1


def test_server_errors_are_retried_with_jittered_backoff(
    client: GitHubClient, github: FakeGitHub, sleeps: list[float]
) -> None:
    github.seed(REPO, PR, ["hello"])
    github.faults += [Fault("GET", 502, times=2), Fault("PATCH", 503)]
    assert [c.body for c in client.list_issue_comments(REPO, PR)] == ["hello"]
    cid = github.comments[REPO, PR][0]["id"]
    assert client.update_issue_comment(REPO, cid, "edited").body == "edited"
    assert [e.status for e in github.log] == [502, 502, 200, 503, 200]
    assert len(sleeps) == 3
    # Full jitter: attempt n waits uniformly in [0, base * 2**n] (base 1 s, cap 30 s).
    assert 0 <= sleeps[0] <= 2 and 0 <= sleeps[1] <= 4 and 0 <= sleeps[2] <= 2


def test_post_is_not_blindly_retried_after_a_server_error(
    client: GitHubClient, github: FakeGitHub
) -> None:
    github.faults.append(Fault("POST", 502, apply=True))  # GitHub created it, then failed
    with pytest.raises(GitHubError) as info:
        client.create_issue_comment(REPO, PR, "once")
    assert info.value.status == 502 and info.value.maybe_applied
    assert github.bodies(REPO, PR) == ["once"]  # exactly one, not two


def test_secondary_rate_limit_403_with_retry_after_is_honoured(
    client: GitHubClient, github: FakeGitHub, sleeps: list[float]
) -> None:
    github.faults.append(Fault("POST", 403, SECONDARY, {"retry-after": "7"}))
    client.create_issue_comment(REPO, PR, "after the wait")
    assert github.bodies(REPO, PR) == ["after the wait"]
    assert len(sleeps) == 1 and 7 <= sleeps[0] <= 8  # the server's wait, plus up to 1 s jitter


def test_primary_rate_limit_waits_until_reset(github: FakeGitHub, sleeps: list[float]) -> None:
    now = 1_800_000_000.0
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(now) + 30)}
    github.faults.append(Fault("GET", 403, {"message": "API rate limit exceeded"}, headers))
    with GitHubClient(TOKEN, api_url=github.url, sleep=sleeps.append, clock=lambda: now) as gh:
        assert gh.list_issue_comments(REPO, PR) == []
    assert len(sleeps) == 1 and 31 <= sleeps[0] <= 32


def test_429_without_headers_waits_a_minute(
    client: GitHubClient, github: FakeGitHub, sleeps: list[float]
) -> None:
    github.faults.append(Fault("GET", 429, {"message": "Too Many Requests"}))
    client.list_issue_comments(REPO, PR)
    assert len(sleeps) == 1 and 60 <= sleeps[0] <= 61


def test_rate_limit_longer_than_max_wait_fails_at_once(
    client: GitHubClient, github: FakeGitHub, sleeps: list[float]
) -> None:
    github.faults.append(Fault("POST", 403, SECONDARY, {"retry-after": "3600"}))
    with pytest.raises(GitHubError) as info:
        client.create_issue_comment(REPO, PR, "never")
    err = info.value
    assert sleeps == [] and err.status == 403 and err.rate_limited
    assert "3600 s" in str(err) and "secondary rate limit" in str(err)
    assert github.bodies(REPO, PR) == []


def test_exhausted_retries_raise_with_status_and_fix(
    github: FakeGitHub, sleeps: list[float]
) -> None:
    github.faults.append(Fault("GET", 503, {"message": "Service Unavailable"}, times=10))
    with (
        GitHubClient(TOKEN, api_url=github.url, sleep=sleeps.append, max_attempts=4) as gh,
        pytest.raises(GitHubError) as info,
    ):
        gh.list_issue_comments(REPO, PR)
    err = info.value
    assert isinstance(err, EvalgateError) and err.status == 503
    assert len(github.requests("GET")) == 4 and len(sleeps) == 3
    text = str(err)
    assert "HTTP 503" in text and "after 4 attempts" in text and "re-run the job" in text
    assert TOKEN not in text


def test_exhausted_rate_limit_retries_raise(
    client: GitHubClient, github: FakeGitHub, sleeps: list[float]
) -> None:
    github.faults.append(
        Fault("PATCH", 429, {"message": "slow down"}, {"retry-after": "1"}, times=9)
    )
    github.seed(REPO, PR, ["x"])
    with pytest.raises(GitHubError) as info:
        client.update_issue_comment(REPO, github.comments[REPO, PR][0]["id"], "y")
    assert info.value.rate_limited and "kept rate-limiting for 5 attempts" in str(info.value)
    assert len(sleeps) == 4


@pytest.mark.parametrize(
    ("status", "fix"),
    [
        (403, "permissions: pull-requests: write"),
        (404, "check the repository"),
        (410, "disabled"),
    ],
)
def test_client_errors_are_not_retried_and_name_the_fix(
    client: GitHubClient, github: FakeGitHub, sleeps: list[float], status: int, fix: str
) -> None:
    github.faults.append(Fault("POST", status, {"message": "Resource not accessible"}))
    with pytest.raises(GitHubError) as info:
        client.create_issue_comment(REPO, PR, "x")
    assert info.value.status == status and not info.value.rate_limited
    assert fix in str(info.value) and f"HTTP {status}" in str(info.value)
    assert sleeps == []


def test_bad_token_is_a_401_with_the_fix(github: FakeGitHub) -> None:
    with (
        GitHubClient("tok-revoked-7f3a", api_url=github.url) as gh,
        pytest.raises(GitHubError) as info,
    ):
        gh.list_issue_comments(REPO, PR)
    assert info.value.status == 401 and "Bad credentials" in str(info.value)
    assert "github-token" in str(info.value) and "tok-revoked-7f3a" not in str(info.value)


def test_body_too_long_is_a_422_with_githubs_reason(client: GitHubClient) -> None:
    with pytest.raises(GitHubError) as info:
        client.create_issue_comment(REPO, PR, "x" * 70_000)
    assert info.value.status == 422 and "maximum is 65536 characters" in str(info.value)


def test_unreachable_host_is_retried_then_reported(sleeps: list[float]) -> None:
    with socket.socket() as sock:  # a port that was just free: connection refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with (
        GitHubClient(TOKEN, api_url=url, sleep=sleeps.append, max_attempts=3) as gh,
        pytest.raises(GitHubError) as info,
    ):
        gh.create_issue_comment(REPO, PR, "x")  # never sent: safe to retry even a POST
    assert info.value.status is None and not info.value.maybe_applied
    assert "ConnectError" in str(info.value) and len(sleeps) == 2


def test_lost_answer_to_a_post_is_reported_as_maybe_applied(
    github: FakeGitHub, sleeps: list[float]
) -> None:
    github.faults.append(Fault("POST", None, delay_s=0.5))
    with (
        GitHubClient(TOKEN, api_url=github.url, sleep=sleeps.append, timeout_s=0.1) as gh,
        pytest.raises(GitHubError) as info,
    ):
        gh.create_issue_comment(REPO, PR, "x")
    assert info.value.maybe_applied and "ReadTimeout" in str(info.value) and sleeps == []
    assert github.bodies(REPO, PR) == ["x"]


def test_request_headers_follow_githubs_conventions() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=[])

    with GitHubClient("t0k", transport=httpx.MockTransport(handler)) as gh:
        gh.list_issue_comments(REPO, PR)
    (req,) = seen
    assert str(req.url) == f"https://api.github.com/repos/{REPO}/issues/{PR}/comments?per_page=100"
    assert req.headers["accept"] == "application/vnd.github+json"
    assert req.headers["x-github-api-version"] == "2022-11-28"
    assert req.headers["authorization"] == "Bearer t0k"
    assert req.headers["user-agent"].startswith("evalgate-action/")


def test_pagination_link_to_another_host_is_refused() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        link = '<https://attacker.example/page2>; rel="next"'
        return httpx.Response(200, json=[], headers={"link": link})

    with (
        GitHubClient("t0k", transport=httpx.MockTransport(handler)) as gh,
        pytest.raises(GitHubError, match="another host"),
    ):
        gh.list_issue_comments(REPO, PR)


def test_enterprise_api_url_keeps_its_path_prefix() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json=[])

    api = "https://ghe.example.com/api/v3"
    with GitHubClient("t0k", api_url=api, transport=httpx.MockTransport(handler)) as gh:
        gh.list_issue_comments(REPO, PR)
    assert seen == [f"{api}/repos/{REPO}/issues/{PR}/comments?per_page=100"]


@pytest.mark.parametrize("repo", ["no-slash", "a/b/c", "../x", "a/..", ""])
def test_invalid_repository_is_refused_before_any_request(repo: str) -> None:
    with (
        GitHubClient("t0k", transport=httpx.MockTransport(lambda r: httpx.Response(500))) as gh,
        pytest.raises(GitHubError, match="OWNER/NAME"),
    ):
        gh.list_issue_comments(repo, PR)


def test_missing_token_is_refused() -> None:
    with pytest.raises(GitHubError, match="no GitHub token"):
        GitHubClient("")


def test_503_with_retry_after_waits_as_told(
    client: GitHubClient, github: FakeGitHub, sleeps: list[float]
) -> None:
    github.faults.append(Fault("GET", 503, {"message": "busy"}, {"retry-after": "2"}))
    assert client.list_issue_comments(REPO, PR) == []
    assert sleeps == [2.0]
