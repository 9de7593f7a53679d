"""The sticky scorecard comment against the spec-validated fake GitHub."""

from __future__ import annotations

from typing import Any

import pytest
from fake_github import TOKEN, FakeGitHub, Fault

from evalgate.publish.github import GitHubClient, GitHubError
from evalgate.publish.sticky import (
    COMMENT_LIMIT,
    fit_comment,
    in_progress_body,
    marker,
    sticky_key,
    upsert_sticky_comment,
)

KEY = sticky_key("evals", "smollm2")
HINT = "the `evalgate-report` artifact of this run"


@pytest.fixture
def pr(pr_event: dict[str, Any]) -> tuple[str, int]:
    """Repository and number, read the way the Action will: from the pull_request event."""
    return pr_event["repository"]["full_name"], pr_event["number"]


def test_first_run_creates_second_run_updates(
    client: GitHubClient, github: FakeGitHub, pr: tuple[str, int]
) -> None:
    repo, number = pr
    github.seed(repo, number, ["LGTM", "please add a test"])
    first = upsert_sticky_comment(client, repo, number, "## ✅ evalgate: PASS", key=KEY)
    assert first.action == "created" and not first.degraded and first.comment_id
    second = upsert_sticky_comment(client, repo, number, "## ❌ evalgate: FAIL", key=KEY)
    assert second.action == "updated" and second.comment_id == first.comment_id
    bodies = github.bodies(repo, number)
    assert len(bodies) == 3 and bodies[:2] == ["LGTM", "please add a test"]
    assert bodies[2] == f"{marker(KEY)}\n## ❌ evalgate: FAIL"
    assert len(github.requests("POST")) == 1 and len(github.requests("PATCH")) == 1


def test_in_progress_then_final_rewrites_one_comment(
    client: GitHubClient, github: FakeGitHub, pr: tuple[str, int]
) -> None:
    repo, number = pr
    placeholder = in_progress_body(run_url="https://github.com/octo-org/evals-demo/actions/runs/9")
    start = upsert_sticky_comment(client, repo, number, placeholder, key=KEY)
    final = upsert_sticky_comment(client, repo, number, "## ✅ evalgate: PASS", key=KEY)
    assert (start.action, final.action) == ("created", "updated")
    assert start.comment_id == final.comment_id
    assert github.bodies(repo, number) == [f"{marker(KEY)}\n## ✅ evalgate: PASS"]
    assert "evaluation in progress" in placeholder and "actions/runs/9" in placeholder


def test_each_key_has_its_own_comment(
    client: GitHubClient, github: FakeGitHub, pr: tuple[str, int]
) -> None:
    repo, number = pr
    for _ in range(2):
        for key in (sticky_key("evals", "a"), sticky_key("evals", "b"), sticky_key("nightly")):
            upsert_sticky_comment(client, repo, number, f"card {key}", key=key)
    assert len(github.bodies(repo, number)) == 3


def test_marker_on_a_later_page_is_found(
    client: GitHubClient, github: FakeGitHub, pr: tuple[str, int]
) -> None:
    repo, number = pr
    github.seed(repo, number, [f"chatter {i}" for i in range(230)])
    github.seed(repo, number, [f"{marker(KEY)}\nold scorecard"], login="github-actions[bot]")
    github.seed(repo, number, [f"more chatter {i}" for i in range(5)])
    result = upsert_sticky_comment(client, repo, number, "new scorecard", key=KEY)
    assert result.action == "updated"
    bodies = github.bodies(repo, number)
    assert len(bodies) == 236 and bodies[230] == f"{marker(KEY)}\nnew scorecard"
    assert [e.query.get("page") for e in github.requests("GET")] == [None, "2", "3"]
    assert not github.requests("POST")


def test_first_marked_comment_wins(
    client: GitHubClient, github: FakeGitHub, pr: tuple[str, int]
) -> None:
    repo, number = pr
    github.seed(repo, number, [f"{marker(KEY)}\nolder", f"{marker(KEY)}\nnewer"])
    upsert_sticky_comment(client, repo, number, "latest", key=KEY)
    assert github.bodies(repo, number) == [f"{marker(KEY)}\nlatest", f"{marker(KEY)}\nnewer"]


def test_only_the_posting_identitys_comment_is_adopted(
    client: GitHubClient, github: FakeGitHub, pr: tuple[str, int]
) -> None:
    repo, number = pr
    planted = f"{marker(KEY)}\nanyone can paste the marker"
    github.seed(repo, number, [planted], login="mallory")
    first = upsert_sticky_comment(client, repo, number, "x", key=KEY, author="github-actions[bot]")
    assert first.action == "created" and first.author == "github-actions[bot]"
    again = upsert_sticky_comment(client, repo, number, "y", key=KEY, author="github-actions[bot]")
    assert again.action == "updated" and again.comment_id == first.comment_id
    assert github.bodies(repo, number) == [planted, f"{marker(KEY)}\ny"]


def test_a_marker_quoted_inside_a_comment_is_not_adopted(
    client: GitHubClient, github: FakeGitHub, pr: tuple[str, int]
) -> None:
    repo, number = pr
    github.seed(repo, number, [f"quoting it: {marker(KEY)}"], login="github-actions[bot]")
    assert upsert_sticky_comment(client, repo, number, "x", key=KEY).action == "created"


def test_oversize_body_drops_details_first_and_keeps_the_marker(
    client: GitHubClient, github: FakeGitHub, pr: tuple[str, int]
) -> None:
    repo, number = pr
    rows = "\n".join(f"| item-{i} | ✅ |" for i in range(5000))
    body = (
        "## ✅ evalgate: PASS\n\n| model | score |\n|---|---|\n| smollm2 | 61.0% |\n\n"
        f"<details><summary><b>Per-item results</b></summary>\n\n{rows}\n\n</details>\n\n"
        "<details><summary>Config</summary>\n\nseed: 1\n</details>\n\nFooter line.\n"
    )
    assert len(body) > COMMENT_LIMIT
    result = upsert_sticky_comment(client, repo, number, body, key=KEY, artifact_hint=HINT)
    assert result.truncated and result.action == "created"
    (stored,) = github.bodies(repo, number)
    assert stored.startswith(marker(KEY) + "\n") and len(stored) <= COMMENT_LIMIT
    assert "item-17" not in stored  # the big block went
    assert "_Per-item results: omitted to fit GitHub's comment size limit" in stored
    assert HINT in stored
    assert "seed: 1" in stored and "Footer line." in stored  # the small block and the rest stay
    assert "Truncated" not in stored  # dropping details was enough


def test_oversize_body_without_details_is_cut_with_a_pointer(
    client: GitHubClient, github: FakeGitHub, pr: tuple[str, int]
) -> None:
    repo, number = pr
    body = "## evalgate\n\n```\n" + "\n".join(f"log line {i}" for i in range(20_000)) + "\n```\n"
    result = upsert_sticky_comment(client, repo, number, body, key=KEY, artifact_hint=HINT)
    assert result.truncated
    (stored,) = github.bodies(repo, number)
    assert stored.startswith(marker(KEY) + "\n") and len(stored) <= COMMENT_LIMIT
    assert stored.rstrip().endswith(f"The full report is in {HINT}.")
    head = stored.split("\n---\n")[0]
    assert head.count("```") % 2 == 0  # the open code fence was closed before the note
    # A second, different oversize body updates the same comment.
    again = upsert_sticky_comment(client, repo, number, body + "more", key=KEY, artifact_hint=HINT)
    assert again.action == "updated" and len(github.bodies(repo, number)) == 1


@pytest.mark.parametrize(("method", "status"), [("POST", 403), ("POST", 404), ("PATCH", 403)])
def test_write_refused_degrades_instead_of_raising(
    client: GitHubClient, github: FakeGitHub, pr: tuple[str, int], method: str, status: int
) -> None:
    repo, number = pr
    if method == "PATCH":
        github.seed(repo, number, [f"{marker(KEY)}\nold"])
    message = "Resource not accessible by integration" if status == 403 else "Not Found"
    github.faults.append(Fault(method, status, {"message": message, "status": str(status)}))
    result = upsert_sticky_comment(client, repo, number, "card", key=KEY)
    assert result.degraded and result.action == "skipped" and result.comment_id is None
    assert result.notice and f"HTTP {status}" in result.notice
    assert "job summary" in result.notice and "verdict is unaffected" in result.notice
    if status == 403:
        assert "forks" in result.notice
    assert github.bodies(repo, number) == ([f"{marker(KEY)}\nold"] if method == "PATCH" else [])


def test_fork_read_only_token_still_reads_then_degrades(
    client: GitHubClient, github: FakeGitHub
) -> None:
    # The fork fixture's PR: reading comments works, writing is refused.
    github.faults.append(Fault("POST", 403, {"message": "Resource not accessible by integration"}))
    result = upsert_sticky_comment(client, "octo-org/evals-demo", 43, "card", key=KEY)
    assert result.degraded and len(github.requests("GET")) == 1


def test_rate_limit_is_not_mistaken_for_a_permission_problem(
    github: FakeGitHub, pr: tuple[str, int], sleeps: list[float]
) -> None:
    repo, number = pr
    fault = Fault("POST", 403, {"message": "secondary rate limit"}, {"retry-after": "1"}, times=9)
    github.faults.append(fault)
    with (
        GitHubClient(TOKEN, api_url=github.url, sleep=sleeps.append, max_attempts=2) as gh,
        pytest.raises(GitHubError) as info,
    ):
        upsert_sticky_comment(gh, repo, number, "card", key=KEY)
    assert info.value.rate_limited


def test_server_errors_are_retried_then_succeed(
    client: GitHubClient, github: FakeGitHub, pr: tuple[str, int]
) -> None:
    repo, number = pr
    github.faults += [Fault("GET", 500, times=2), Fault("POST", 502)]
    result = upsert_sticky_comment(client, repo, number, "card", key=KEY)
    assert result.action == "created" and len(github.bodies(repo, number)) == 1
    # GET 500, 500, 200; POST 502; re-look (GET 200) before creating again; POST 201.
    assert [(e.method, e.status) for e in github.log] == [
        ("GET", 500),
        ("GET", 500),
        ("GET", 200),
        ("POST", 502),
        ("GET", 200),
        ("POST", 201),
    ]


def test_create_that_succeeded_behind_a_5xx_is_not_duplicated(
    client: GitHubClient, github: FakeGitHub, pr: tuple[str, int]
) -> None:
    repo, number = pr
    github.faults.append(Fault("POST", 502, apply=True))  # GitHub made it, then answered 502
    result = upsert_sticky_comment(client, repo, number, "card", key=KEY)
    assert result.action == "created" and not result.degraded
    assert github.bodies(repo, number) == [f"{marker(KEY)}\ncard"]
    assert len(github.requests("POST")) == 1


def test_lost_answer_to_create_is_not_duplicated(
    github: FakeGitHub, pr: tuple[str, int], sleeps: list[float]
) -> None:
    repo, number = pr
    github.faults.append(Fault("POST", None, delay_s=0.4))  # created; the answer comes too late
    with GitHubClient(TOKEN, api_url=github.url, sleep=sleeps.append, timeout_s=0.1) as gh:
        result = upsert_sticky_comment(gh, repo, number, "card", key=KEY)
    assert result.action == "created" and result.comment_id is not None
    assert github.bodies(repo, number) == [f"{marker(KEY)}\ncard"]


def test_exhausted_retries_raise_the_modules_error(
    client: GitHubClient, github: FakeGitHub, pr: tuple[str, int]
) -> None:
    repo, number = pr
    github.faults.append(Fault("GET", 503, times=99))
    with pytest.raises(GitHubError) as info:
        upsert_sticky_comment(client, repo, number, "card", key=KEY)
    assert info.value.status == 503 and not github.requests("POST")


# -- pure functions ------------------------------------------------------------------------------


def test_marker_keeps_html_comment_well_formed() -> None:
    tag = marker("CI --> evals  (nightly)\n<b>")
    inner = tag[len("<!--") : -len("-->")]
    assert tag.startswith("<!-- evalgate:sticky:") and tag.endswith(" -->")
    assert "--" not in inner and ">" not in inner and "\n" not in tag
    assert marker("evals/smollm2") == "<!-- evalgate:sticky:evals/smollm2 -->"
    assert marker("a b") != marker("a-b") and marker("x") == marker("  x ")
    with pytest.raises(ValueError):
        marker("  ")


def test_fit_comment_leaves_small_bodies_alone_and_dedupes_the_marker() -> None:
    tag = marker(KEY)
    text, cut = fit_comment(f"hi\n{tag}\nthere", marker_text=tag)
    assert (text, cut) == (f"{tag}\nhi\n\nthere", False)


def test_fit_comment_drops_largest_details_first() -> None:
    tag = marker(KEY)
    small = "<details><summary>Small</summary>\n" + "s" * 100 + "\n</details>\n"
    big = "<details><summary>Big</summary>\n" + "b" * 900 + "\n</details>\n"
    text, cut = fit_comment(small + big + "end\n", marker_text=tag, limit=600)
    assert cut and "s" * 100 in text and "b" * 900 not in text and "_Big: omitted" in text
    assert text.startswith(tag) and len(text) <= 600


def test_fit_comment_handles_nested_and_unbalanced_details() -> None:
    tag = marker(KEY)
    nested = (
        "<details><summary>Outer</summary>\n<details><summary>Inner</summary>\n"
        + "x" * 2000
        + "\n</details>\n</details>\n"
    )
    text, _ = fit_comment(nested + "tail\n", marker_text=tag, limit=500)
    assert "_Outer: omitted" in text and "Inner" not in text and "tail" in text
    unclosed = "<details><summary>Open</summary>\n" + "y\n" * 2000
    text, _ = fit_comment(unclosed, marker_text=tag, limit=500)
    assert len(text) <= 500 and text.index("</details>") < text.index("Truncated")


def test_fit_comment_refuses_an_impossible_limit() -> None:
    with pytest.raises(ValueError):
        fit_comment("x" * 1000, marker_text=marker(KEY), limit=50)
