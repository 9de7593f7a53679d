"""Result stores: one contract suite run against every backend, then each backend's own promises.

The git backend runs real git against a real bare repository on disk standing in for GitHub
(``origin``), with the user's repository a clone of it — no mocks of git, no network.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from evalgate.errors import ConfigError, EvalgateError, ExitCode, UsageError
from evalgate.store import (
    RUN_FILES,
    GitBranchStore,
    LocalDirStore,
    ResultStore,
    RunKey,
    StoreError,
    open_store,
)

NAME = "arith--HuggingFaceTB--SmolLM2-135M-Instruct"
OTHER = "capitals--HuggingFaceTB--SmolLM2-135M-Instruct"
BRANCH = "evalgate-results"


def sha(i: int | str) -> str:
    return hashlib.sha1(str(i).encode()).hexdigest()


# -- helpers: isolated git, repositories, run folders ------------------------------------------


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment with no user or system git config (a developer's signing or hooks)."""
    home = tmp_path / "home"
    home.mkdir()
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "XDG_CONFIG_HOME"))}
    environ.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), GIT_CONFIG_NOSYSTEM="1")
    return environ


def git(env: dict[str, str], cwd: Path, *args: str) -> str:
    identity = {"GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@example.com"}
    identity |= {"GIT_COMMITTER_NAME": "dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env={**env, **identity}, capture_output=True, text=True
    )
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout


@pytest.fixture
def origin(tmp_path: Path, env: dict[str, str]) -> Path:
    """A bare repository standing in for GitHub, with one commit on main."""
    bare = tmp_path / "origin.git"
    git(env, tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    seed = tmp_path / "seed"
    git(env, tmp_path, "clone", "-q", str(bare), str(seed))
    (seed / "README.md").write_text("# project\n")
    # Filters that would rewrite line endings if the store let them: it must not.
    (seed / ".gitattributes").write_text("*.jsonl text eol=crlf\n*.json text eol=crlf\n")
    git(env, seed, "add", ".")
    git(env, seed, "commit", "-q", "-m", "initial")
    git(env, seed, "push", "-q", "origin", "HEAD:main")
    return bare


def clone(env: dict[str, str], origin: Path, dest: Path, *flags: str) -> Path:
    # --depth needs a file:// URL; a plain path makes git copy objects without the protocol.
    source = origin.as_uri() if flags else str(origin)
    git(env, dest.parent, "clone", "-q", *flags, source, str(dest))
    return dest


def make_run(where: Path, tag: str = "v1", *, results: bytes | None = None) -> Path:
    """A run folder as evalgate writes it, logs included (they must not be stored)."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "run_config.json").write_text(f'{{"tag": "{tag}"}}\n', encoding="utf-8")
    body = results if results is not None else f'{{"id": 1, "tag": "{tag}"}}\n'.encode()
    (where / "results.jsonl").write_bytes(body)
    (where / "metadata.json").write_text(f'{{"tag": "{tag}", "n": 1}}\n', encoding="utf-8")
    (where / "logs").mkdir(exist_ok=True)
    (where / "logs" / "model_server.log").write_text("noise\n")
    return where


def tag_of(run_path: Path) -> str:
    return (run_path / "metadata.json").read_text().split('"tag": "')[1].split('"')[0]


# -- the contract, for every backend ---------------------------------------------------------


@pytest.fixture(params=["local", "git-branch"])
def make_store(
    request: pytest.FixtureRequest, tmp_path: Path, env: dict[str, str]
) -> Callable[[], ResultStore]:
    """A factory of stores over one shared backing store (each call: a fresh instance)."""
    if request.param == "local":
        return lambda: LocalDirStore(tmp_path / "store")
    user = clone(env, request.getfixturevalue("origin"), tmp_path / "user")
    return lambda: GitBranchStore(user, environ=env)


def test_round_trip_is_byte_identical(
    make_store: Callable[[], ResultStore], tmp_path: Path
) -> None:
    # CRLF, no final newline, non-ASCII: any normalisation on the way would show.
    results = '{"a": "é"}\r\n{"b": 2}\n{"c": 3}'.encode()
    run = make_run(tmp_path / "run", results=results)
    store = make_store()
    key = RunKey(sha(1), NAME)
    before = datetime.now(UTC) - timedelta(seconds=5)
    location = store.save(key, run)
    assert isinstance(location, str) and location

    for reader in (store, make_store()):  # the saving instance and a fresh one
        stored = reader.load(key)
        assert stored is not None and stored.key == key
        for name in RUN_FILES:
            assert (stored.path / name).read_bytes() == (run / name).read_bytes()
        assert not (stored.path / "logs").exists()
        when = datetime.fromisoformat(stored.stored_at.replace("Z", "+00:00"))
        assert when.utcoffset() == timedelta(0)
        assert before <= when <= datetime.now(UTC) + timedelta(seconds=5)


def test_absent_key_loads_none(make_store: Callable[[], ResultStore], tmp_path: Path) -> None:
    store = make_store()
    assert store.load(RunKey(sha(1), NAME)) is None  # empty store
    store.save(RunKey(sha(1), NAME), make_run(tmp_path / "run"))
    assert store.load(RunKey(sha(2), NAME)) is None  # other commit
    assert store.load(RunKey(sha(1), OTHER)) is None  # other name


def test_saving_a_key_again_replaces_it(
    make_store: Callable[[], ResultStore], tmp_path: Path
) -> None:
    store = make_store()
    key = RunKey(sha(1), NAME)
    store.save(key, make_run(tmp_path / "a", "first"))
    store.save(key, make_run(tmp_path / "b", "second"))
    for reader in (store, make_store()):
        stored = reader.load(key)
        assert stored is not None and tag_of(stored.path) == "second"
        assert [run.key for run in reader.history(NAME)] == [key]


def test_find_takes_the_first_commit_in_the_given_order(
    make_store: Callable[[], ResultStore], tmp_path: Path
) -> None:
    store = make_store()
    store.save(RunKey(sha(1), OTHER), make_run(tmp_path / "o", "other-at-1"))
    store.save(RunKey(sha(2), NAME), make_run(tmp_path / "b", "at-2"))
    store.save(RunKey(sha(3), NAME), make_run(tmp_path / "c", "at-3"))
    store = make_store()

    # sha(1) has a run, but not this one: skipped.
    found = store.find([sha(0), sha(1), sha(2), sha(3)], NAME)
    assert found is not None and found.key == RunKey(sha(2), NAME)
    assert tag_of(found.path) == "at-2"
    found = store.find([sha(3), sha(2)], NAME)
    assert found is not None and found.key == RunKey(sha(3), NAME)
    assert store.find([sha(0), sha(4)], NAME) is None
    assert store.find([], NAME) is None
    found = store.find([sha(2), sha(1)], OTHER)
    assert found is not None and tag_of(found.path) == "other-at-1"


def test_history_is_newest_first_and_limited(
    make_store: Callable[[], ResultStore], tmp_path: Path
) -> None:
    store = make_store()
    for i in (1, 2, 3):
        store.save(RunKey(sha(i), NAME), make_run(tmp_path / str(i), f"run-{i}"))
    store.save(RunKey(sha(9), OTHER), make_run(tmp_path / "o", "other"))

    fresh = make_store()
    assert [run.key.commit for run in fresh.history(NAME)] == [sha(3), sha(2), sha(1)]
    assert [run.key.commit for run in fresh.history(NAME, limit=2)] == [sha(3), sha(2)]
    assert [tag_of(run.path) for run in fresh.history(NAME)] == ["run-3", "run-2", "run-1"]
    stamps = [run.stored_at for run in fresh.history(NAME)]
    assert stamps == sorted(stamps, reverse=True)
    assert fresh.history(NAME, limit=0) == []
    assert fresh.history("never-stored") == []

    store.save(RunKey(sha(1), NAME), make_run(tmp_path / "1b", "run-1-again"))
    newest = make_store().history(NAME)
    assert [run.key.commit for run in newest] == [sha(1), sha(3), sha(2)]
    assert tag_of(newest[0].path) == "run-1-again"


@pytest.mark.parametrize(
    ("commit", "name"),
    [
        ("abc1234", NAME),  # short SHA
        (sha(1)[:39], NAME),
        (sha(1) + "0", NAME),
        ("g" * 40, NAME),
        ("../" + sha(1)[3:], NAME),
        (sha(1), "../x"),
        (sha(1), "a/b"),
        (sha(1), ".."),
        (sha(1), ".hidden"),
        (sha(1), ""),
        (sha(1), "x" * 201),
        (sha(1), "has space"),
    ],
)
def test_invalid_keys_are_rejected(commit: str, name: str) -> None:
    with pytest.raises(UsageError) as err:
        RunKey(commit, name)
    assert "\n" not in str(err.value) and err.value.exit_code == ExitCode.CONFIG


def test_keys_are_normalised_and_checked_by_every_method(
    make_store: Callable[[], ResultStore], tmp_path: Path
) -> None:
    assert RunKey(sha(1).upper(), NAME) == RunKey(sha(1), NAME)
    store = make_store()
    with pytest.raises(UsageError):
        store.find(["abc1234"], NAME)
    with pytest.raises(UsageError):
        store.find([sha(1)], "../x")
    with pytest.raises(UsageError):
        store.history("../x")
    # A run folder missing a file is refused before anything is stored.
    run = make_run(tmp_path / "run")
    (run / "results.jsonl").unlink()
    with pytest.raises(StoreError, match=r"results\.jsonl"):
        store.save(RunKey(sha(1), NAME), run)
    assert store.load(RunKey(sha(1), NAME)) is None


# -- the local folder ---------------------------------------------------------------------------


def test_local_layout_and_atomic_replace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LocalDirStore(tmp_path / "store")
    key = RunKey(sha(1), NAME)
    location = store.save(key, make_run(tmp_path / "a", "first"))
    folder = tmp_path / "store" / sha(1) / NAME
    assert location == str(folder)
    assert sorted(os.listdir(folder)) == sorted([*RUN_FILES, "stored_at"])

    # A crash half-way through a save leaves the old run whole and no debris.
    real_copy = __import__("shutil").copyfile
    copied: list[str] = []

    def flaky_copy(src: Path, dst: Path) -> None:
        copied.append(str(src))
        if len(copied) == 2:
            raise OSError("disk full")
        real_copy(src, dst)

    monkeypatch.setattr("evalgate.store.local_dir.shutil.copyfile", flaky_copy)
    with pytest.raises(StoreError, match="disk full") as err:
        store.save(key, make_run(tmp_path / "b", "second"))
    assert err.value.exit_code == ExitCode.INFRA
    monkeypatch.undo()
    stored = store.load(key)
    assert stored is not None and tag_of(stored.path) == "first"
    assert sorted(os.listdir(folder.parent)) == [NAME]

    # Foreign folders in the root are not runs.
    (tmp_path / "store" / "README").mkdir()
    (tmp_path / "store" / sha(2) / f".tmp-{NAME}-dead").mkdir(parents=True)
    assert [run.key for run in store.history(NAME)] == [key]


# -- the git branch -----------------------------------------------------------------------------


def snapshot(env: dict[str, str], repo: Path) -> dict[str, object]:
    """Everything of the user's we promise not to touch."""
    return {
        "HEAD": (repo / ".git" / "HEAD").read_text(),
        "head_commit": git(env, repo, "rev-parse", "HEAD"),
        "index": (repo / ".git" / "index").read_bytes(),
        "status": git(env, repo, "status", "--porcelain=v1", "--untracked-files=all"),
        "branches": git(env, repo, "for-each-ref", "refs/heads", "refs/tags"),
        "files": {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file()},
        "FETCH_HEAD": (repo / ".git" / "FETCH_HEAD").exists(),
    }


def branch_log(env: dict[str, str], bare: Path) -> list[str]:
    return git(env, bare, "log", "--format=%s", BRANCH).splitlines()


def branch_paths(env: dict[str, str], bare: Path) -> list[str]:
    return git(env, bare, "ls-tree", "-r", "--name-only", BRANCH).splitlines()


def test_git_leaves_the_users_checkout_alone(
    origin: Path, env: dict[str, str], tmp_path: Path
) -> None:
    user = clone(env, origin, tmp_path / "user")
    # Work in progress of every kind: staged, modified, untracked.
    (user / "staged.txt").write_text("staged\n")
    git(env, user, "add", "staged.txt")
    (user / "README.md").write_text("# edited, not staged\n")
    (user / "untracked.txt").write_text("new\n")
    before = snapshot(env, user)

    store = GitBranchStore(user, environ=env)
    for i in (1, 2):
        store.save(RunKey(sha(i), NAME), make_run(tmp_path / f"run{i}", f"run-{i}"))
    assert store.load(RunKey(sha(1), NAME)) is not None
    assert len(store.history(NAME)) == 2

    assert snapshot(env, user) == before
    # The cache sits inside .git, out of the working tree.
    assert store.cache_dir == user / ".git" / "evalgate-cache"


def test_git_branch_has_one_commit_per_save(
    origin: Path, env: dict[str, str], tmp_path: Path
) -> None:
    user = clone(env, origin, tmp_path / "user")
    store = GitBranchStore(user, environ=env)
    store.save(RunKey(sha(1), NAME), make_run(tmp_path / "a", "a"))
    store.save(RunKey(sha(2), OTHER), make_run(tmp_path / "b", "b"))
    store.save(RunKey(sha(1), NAME), make_run(tmp_path / "a", "a"))  # identical bytes again

    assert branch_log(env, origin) == [
        f"evalgate: {NAME} @ {sha(1)[:12]}",
        f"evalgate: {OTHER} @ {sha(2)[:12]}",
        f"evalgate: {NAME} @ {sha(1)[:12]}",
    ]
    assert branch_paths(env, origin) == sorted(
        f"runs/{commit}/{name}/{file}"
        for commit, name in ((sha(1), NAME), (sha(2), OTHER))
        for file in RUN_FILES
    )
    # An orphan branch: linear, sharing no history with main (else the count would be larger).
    assert git(env, origin, "rev-list", "--count", BRANCH).strip() == "3"
    assert git(env, origin, "rev-list", "--max-parents=0", BRANCH).count("\n") == 1
    authors = set(git(env, origin, "log", "--format=%an <%ae>|%cn", BRANCH).splitlines())
    assert authors == {"evalgate <evalgate@users.noreply.github.com>|evalgate"}
    # The re-save moved the run to the front of history.
    assert [run.key.name for run in store.history(NAME)] == [NAME]
    assert [run.key.commit for run in GitBranchStore(user, environ=env).history(OTHER)] == [sha(2)]


def test_git_another_clone_sees_the_runs(origin: Path, env: dict[str, str], tmp_path: Path) -> None:
    first = clone(env, origin, tmp_path / "first")
    run = make_run(tmp_path / "run", "shared")
    GitBranchStore(first, environ=env).save(RunKey(sha(5), NAME), run)

    second = clone(env, origin, tmp_path / "second")  # a later CI job on a fresh runner
    found = GitBranchStore(second, environ=env).find([sha(6), sha(5)], NAME)
    assert found is not None and found.key == RunKey(sha(5), NAME)
    assert found.path.is_relative_to(second / ".git" / "evalgate-cache")
    for name in RUN_FILES:
        assert (found.path / name).read_bytes() == (run / name).read_bytes()


def test_git_works_from_a_shallow_clone(origin: Path, env: dict[str, str], tmp_path: Path) -> None:
    # actions/checkout clones with --depth 1 by default.
    shallow = clone(env, origin, tmp_path / "shallow", "--depth", "1")
    store = GitBranchStore(shallow, environ=env)
    store.save(RunKey(sha(1), NAME), make_run(tmp_path / "run"))
    found = GitBranchStore(shallow, environ=env).find([sha(1)], NAME)
    assert found is not None and tag_of(found.path) == "v1"
    assert branch_log(env, origin) == [f"evalgate: {NAME} @ {sha(1)[:12]}"]


def test_git_concurrent_pushes_both_land(
    origin: Path, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_a = GitBranchStore(clone(env, origin, tmp_path / "a"), environ=env)
    store_b = GitBranchStore(clone(env, origin, tmp_path / "b"), environ=env)
    run = make_run(tmp_path / "run")

    # A has read the branch; B pushes; A saves with its stale view.
    store_b.save(RunKey(sha(0), NAME), run)
    assert store_a.find([sha(0)], NAME) is not None
    store_b.save(RunKey(sha(1), NAME), run)
    store_a.save(RunKey(sha(2), NAME), run)

    # The real race: B pushes after A fetched and built its commit, before A pushes.
    fetches: list[str | None] = []
    real_fetch = store_a._fetch

    def fetch_then_lose_the_race() -> str | None:
        tip = real_fetch()
        fetches.append(tip)
        if len(fetches) == 1:
            store_b.save(RunKey(sha(3), NAME), run)
        return tip

    monkeypatch.setattr(store_a, "_fetch", fetch_then_lose_the_race)
    store_a.save(RunKey(sha(4), NAME), run)
    assert len(fetches) == 2 and fetches[0] != fetches[1]  # rejected once, rebuilt on B's tip

    assert branch_log(env, origin) == [f"evalgate: {NAME} @ {sha(i)[:12]}" for i in (4, 3, 2, 1, 0)]
    fresh = GitBranchStore(clone(env, origin, tmp_path / "c"), environ=env)
    assert [r.key.commit for r in fresh.history(NAME)] == [sha(i) for i in (4, 3, 2, 1, 0)]


def test_git_threads_pushing_at_once_all_land(
    origin: Path, env: dict[str, str], tmp_path: Path
) -> None:
    run = make_run(tmp_path / "run")
    stores = [GitBranchStore(clone(env, origin, tmp_path / f"c{i}"), environ=env) for i in range(3)]
    barrier = threading.Barrier(len(stores))
    errors: list[BaseException] = []

    def job(i: int, store: GitBranchStore) -> None:
        try:
            barrier.wait()
            for j in range(2):
                store.save(RunKey(sha(f"{i}-{j}"), NAME), run)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=job, args=(i, s)) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert len(branch_log(env, origin)) == 6
    found = GitBranchStore(tmp_path / "c0", environ=env).history(NAME)
    assert sorted(r.key.commit for r in found) == sorted(
        sha(f"{i}-{j}") for i in range(3) for j in range(2)
    )


def test_git_missing_remote_branch_is_an_empty_store(
    origin: Path, env: dict[str, str], tmp_path: Path
) -> None:
    user = clone(env, origin, tmp_path / "user")
    store = GitBranchStore(user, environ=env, branch="results/v1")
    assert store.load(RunKey(sha(1), NAME)) is None
    assert store.find([sha(1)], NAME) is None
    assert store.history(NAME) == []

    store.save(RunKey(sha(1), NAME), make_run(tmp_path / "run"))
    assert git(env, origin, "rev-list", "--count", "results/v1").strip() == "1"

    # Deleted on the remote after we read it: empty again after a refresh.
    git(env, origin, "branch", "-D", "results/v1")
    store.refresh()
    assert store.load(RunKey(sha(1), NAME)) is None
    assert store.history(NAME) == []


def test_git_failures_are_one_line_store_errors(
    origin: Path, env: dict[str, str], tmp_path: Path
) -> None:
    user = clone(env, origin, tmp_path / "user")
    run = make_run(tmp_path / "run")
    key = RunKey(sha(1), NAME)

    def failure(call: Callable[[], object]) -> str:
        with pytest.raises(StoreError) as err:
            call()
        assert err.value.exit_code == ExitCode.INFRA
        message = str(err.value)
        assert message and "\n" not in message
        return message

    gone = str(tmp_path / "does-not-exist.git")
    message = failure(lambda: GitBranchStore(user, remote=gone, environ=env).load(key))
    assert "does not appear to be a git repository" in message and "fetch" in message
    git(env, user, "remote", "set-url", "origin", gone)
    assert "does not appear" in failure(lambda: GitBranchStore(user, environ=env).save(key, run))
    git(env, user, "remote", "set-url", "origin", str(origin))

    plain = tmp_path / "plain"
    plain.mkdir()
    assert "not a git repository" in failure(lambda: GitBranchStore(plain, environ=env).load(key))

    no_git = {**env, "PATH": str(tmp_path / "empty-bin")}
    assert "git is not installed" in failure(lambda: GitBranchStore(user, environ=no_git).load(key))

    # A push the server refuses for good (branch protection) is not retried.
    hook = origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'protected branch' >&2\nexit 1\n")
    hook.chmod(0o755)
    message = failure(lambda: GitBranchStore(user, environ=env).save(key, run))
    assert "pre-receive hook declined" in message and "allow pushes" in message
    hook.unlink()

    # Losing the race every time ends, with a message that says what to do.
    store = GitBranchStore(user, environ=env, max_attempts=2)
    store._push = lambda new: False  # type: ignore[method-assign]
    assert "re-run the job" in failure(lambda: store.save(key, run))


def test_git_corrupt_branch_is_a_store_error(
    origin: Path, env: dict[str, str], tmp_path: Path
) -> None:
    # Someone pushed a run folder by hand, without its metadata.
    hand = tmp_path / "hand"
    git(env, tmp_path, "init", "-q", "-b", BRANCH, str(hand))
    folder = hand / "runs" / sha(1) / NAME
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("{}\n")
    (folder / "run_config.json").write_text("{}\n")
    git(env, hand, "add", ".")
    git(env, hand, "commit", "-q", "-m", "by hand")
    git(env, hand, "push", "-q", str(origin), f"{BRANCH}:{BRANCH}")

    store = GitBranchStore(clone(env, origin, tmp_path / "user"), environ=env)
    with pytest.raises(StoreError, match=r"without metadata\.json; save that run again"):
        store.load(RunKey(sha(1), NAME))
    # The hand-made commit counts in history by the paths it changed (older than ours)...
    store.save(RunKey(sha(2), NAME), make_run(tmp_path / "run"))
    assert [run.key.commit for run in store.history(NAME, limit=1)] == [sha(2)]
    # ...and reading it is still an error, not a silently missing baseline.
    with pytest.raises(StoreError, match="save that run again"):
        store.history(NAME)


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[list[str]]

    def do_GET(self) -> None:
        self.seen.append(self.headers.get_all("Authorization") or [])
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[list[str]]]]:
    """A loopback HTTP server that records Authorization headers and answers 404."""
    seen: list[list[str]] = []
    handler = type("Handler", (_Recorder,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def test_git_token_is_a_header_never_an_argument(
    origin: Path,
    env: dict[str, str],
    tmp_path: Path,
    recorder: tuple[str, list[list[str]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    host, seen = recorder
    token = "ghs_s3cretT0ken"
    user = clone(env, origin, tmp_path / "user")
    url = f"http://x-access-token:{token}@{host}/owner/repo.git"
    git(env, user, "remote", "set-url", "origin", url)
    # What actions/checkout persists: a header for the host. Ours must replace it, not add one.
    git(env, user, "config", f"http.http://{host}/.extraheader", "AUTHORIZATION: basic OLD")

    argv_seen: list[list[str]] = []
    real_run = subprocess.run

    def spy(argv: list[str], *args: object, **kwargs: object) -> object:
        argv_seen.append(list(argv))
        return real_run(argv, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr("evalgate._git.subprocess.run", spy)
    with pytest.raises(StoreError) as err:
        GitBranchStore(user, environ=env, token=token).load(RunKey(sha(1), NAME))

    import base64

    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    assert seen and all(headers == [f"basic {basic}"] for headers in seen)
    message = str(err.value)
    assert "\n" not in message and token not in message and basic not in message
    assert not any(token in arg or basic in arg for argv in argv_seen for arg in argv)


# -- open_store -----------------------------------------------------------------------------------


def test_open_store_picks_the_backend(tmp_path: Path) -> None:
    local = open_store("local:results", repo=tmp_path)
    assert isinstance(local, LocalDirStore) and local.root == tmp_path / "results"
    absolute = open_store(f"local:{tmp_path / 'abs'}", repo=Path("/elsewhere"))
    assert isinstance(absolute, LocalDirStore) and absolute.root == tmp_path / "abs"

    default = open_store("git-branch", repo=tmp_path)
    assert isinstance(default, GitBranchStore) and default.branch == BRANCH
    custom = open_store("git-branch:evals/results", repo=tmp_path, remote="upstream")
    assert isinstance(custom, GitBranchStore)
    assert (custom.branch, custom.remote) == ("evals/results", "upstream")

    for bad in ("s3:bucket", "local:", "git-branch:", "git-branch:a..b", "git-branch:-x", ""):
        with pytest.raises(ConfigError) as err:
            open_store(bad, repo=tmp_path)
        assert isinstance(err.value, EvalgateError) and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"known: local:PATH, git-branch\[:BRANCH\]"):
        open_store("s3:bucket", repo=tmp_path)


# -- as a container action runs: root, on a checkout that belongs to the runner's user ----------

RUNNER_UID = 1001  # the uid GitHub's hosted runners check out as; a docker action runs as root


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown a checkout to another uid")
@pytest.mark.parametrize("where", [".", "evals/sub"])
def test_git_store_works_as_root_on_a_checkout_owned_by_another_user(
    origin: Path, env: dict[str, str], tmp_path: Path, where: str
) -> None:
    user = clone(env, origin, tmp_path / "user")
    (user / where).mkdir(parents=True, exist_ok=True)  # the Action's working_directory
    for repo in (user, origin):  # the remote (a local path here) belongs to that user too
        subprocess.run(["chown", "-R", f"{RUNNER_UID}:{RUNNER_UID}", str(repo)], check=True)
    key = RunKey(sha(1), NAME)

    store = open_store("git-branch", repo=user / where, environ=env)
    assert "evalgate-results" in store.save(key, make_run(tmp_path / "run", "mine"))
    stored = open_store("git-branch", repo=user / where, environ=env).load(key)
    assert stored is not None and tag_of(stored.path) == "mine"
    assert f"runs/{key.relpath}/results.jsonl" in branch_paths(
        {**env, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory",
         "GIT_CONFIG_VALUE_0": str(origin)}, origin
    )  # fmt: skip


def test_git_trusts_only_the_repository_it_was_given(tmp_path: Path) -> None:
    """safe.directory names the checkout (any folder may be its top level) and nothing else."""
    from evalgate._git import Git

    repo = tmp_path / "ws" / "sub"
    git = Git(repo, environ={})
    git.trust_local_remote(tmp_path / "origin.git")
    count = int(git.env["GIT_CONFIG_COUNT"])
    safe = [git.env[f"GIT_CONFIG_VALUE_{i}"] for i in range(count)
            if git.env[f"GIT_CONFIG_KEY_{i}"] == "safe.directory"]  # fmt: skip
    real = Path(os.path.realpath(repo))
    assert safe == [str(p) for p in (real, *real.parents)] and "*" not in safe
    origin = os.path.realpath(tmp_path / "origin.git")
    assert git.pack_args("fetch") == [f"--upload-pack=git -c safe.directory={origin} upload-pack"]
    assert Git(repo, environ={}).pack_args("push") == []
