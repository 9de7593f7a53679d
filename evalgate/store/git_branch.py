"""A result store on an orphan branch of the user's own repository.

Layout on the branch (default ``evalgate-results``)::

    runs/{commit}/{name}/run_config.json
    runs/{commit}/{name}/results.jsonl
    runs/{commit}/{name}/metadata.json

One commit per saved run, ``evalgate: {name} @ {commit[:12]}``, with two trailers that name the
run exactly (``Evalgate-Run: runs/{commit}/{name}``) and when it was stored
(``Evalgate-Stored-At:``, microseconds). History is the branch's commit order, newest first.

It needs nothing but git and push access: in GitHub Actions, actions/checkout persists the job's
token, or pass ``token=`` (sent as an HTTP header, see :mod:`evalgate._git`). Only plumbing
is used — blobs and trees are written straight into the object database and the commit is pushed
by its id — so the user's HEAD, index, working tree and branches are never touched. The fetched
tip is kept under a private ref, ``refs/evalgate/{remote}/{branch}``.

Concurrent jobs push at once: a push that is not a fast-forward is answered by fetching the new
tip, rebuilding the commit on it and pushing again (bounded attempts, jittered backoff).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import secrets
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from evalgate._git import Git, GitFailed
from evalgate.errors import ConfigError, UsageError
from evalgate.store.base import (
    RUN_FILES,
    RunKey,
    StoredRun,
    StoreError,
    check_name,
    iso_utc,
    run_files,
    utc_now,
)

__all__ = ["DEFAULT_BRANCH", "GitBranchStore"]

DEFAULT_BRANCH = "evalgate-results"
RUNS = "runs"

_BRANCH_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
_REMOTE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_RUN_TRAILER = re.compile(r"^Evalgate-Run: runs/([0-9a-f]{40})/(\S+)\s*$", re.MULTILINE)
_STORED_TRAILER = re.compile(r"^Evalgate-Stored-At: (\S+)\s*$", re.MULTILINE)
_RUN_PATH = re.compile(r"^runs/([0-9a-f]{40})/([^/]+)/", re.MULTILINE)
# Push outcomes that mean "someone else pushed first": fetch, rebuild and try again. The last
# three are the server losing a ref-lock race (GitHub says "cannot lock ref").
_RETRYABLE = re.compile(
    r"\[rejected\]|non-fast-forward|fetch first|stale info"
    r"|cannot lock ref|failed to update ref|incorrect old value"
)
_MISSING_BRANCH = "couldn't find remote ref"
_CHUNK = 500  # paths per ls-tree call: far below any argument-length limit


@dataclass(frozen=True)
class _Entry:
    mode: str
    type: str
    oid: str


@dataclass(frozen=True)
class _Found:
    tree: str  # the run folder's tree id: content-addresses the cache folder
    blobs: dict[str, str]  # file name -> blob id


class GitBranchStore:
    """Runs on an orphan branch of ``repo``'s remote, read back through a local cache."""

    def __init__(
        self,
        repo: Path,
        *,
        branch: str = DEFAULT_BRANCH,
        remote: str = "origin",
        cache_dir: Path | None = None,
        environ: Mapping[str, str] | None = None,
        token: str | None = None,
        timeout: float = 120.0,
        max_attempts: int = 10,
    ) -> None:
        _check_branch(branch)
        if not remote or remote.startswith("-") or "\n" in remote:
            raise ConfigError(f"invalid git remote {remote!r}: name a remote such as 'origin'")
        self.repo = Path(repo)
        self.branch = branch
        self.remote = remote
        self.max_attempts = max(1, max_attempts)
        self._git = Git(self.repo, environ=environ, token=token, timeout=timeout, error=StoreError)
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        # A remote given as a URL or path still needs a ref-safe, stable name.
        slug = remote
        if not _REMOTE_NAME_RE.fullmatch(remote):
            slug = "url-" + hashlib.sha1(remote.encode()).hexdigest()[:12]
        self.ref = f"refs/evalgate/{slug}/{branch}"
        self._ready = False
        self._fetched = False
        self._tip: str | None = None
        self._log_cache: tuple[str, dict[RunKey, tuple[int, str]]] | None = None

    def __repr__(self) -> str:
        return f"GitBranchStore({str(self.repo)!r}, branch={self.branch!r}, remote={self.remote!r})"

    @property
    def cache_dir(self) -> Path:
        self._prepare()
        assert self._cache_dir is not None
        return self._cache_dir

    # -- the store contract -------------------------------------------------------------------

    def save(self, key: RunKey, run_dir: Path) -> str:
        files = run_files(run_dir)
        self._prepare()
        paths = [os.path.abspath(path) for path in files.values()]
        # --no-filters: store the bytes as they are, whatever the repo's .gitattributes say.
        blobs = self._run("store the run", "hash-object", "-w", "--no-filters", "--", *paths)
        listing = "".join(
            f"100644 blob {oid}\t{name}\0" for name, oid in zip(files, blobs.split(), strict=True)
        )
        run_tree = self._run("store the run", "mktree", "-z", input=listing.encode()).strip()
        for attempt in range(self.max_attempts):
            tip = self._fetch()
            root = self._put_tree(tip, [RUNS, key.commit, key.name], run_tree)
            message = (
                f"evalgate: {key.name} @ {key.commit[:12]}\n\n"
                f"Evalgate-Run: {RUNS}/{key.relpath}\n"
                f"Evalgate-Stored-At: {utc_now()}\n"
            )
            parents = ["-p", tip] if tip else []
            new = self._run(
                "commit the run",
                "commit-tree",
                "--no-gpg-sign",
                root,
                *parents,
                "-F",
                "-",
                input=message.encode(),
            ).strip()
            if self._push(new):
                self._run("record the new tip", "update-ref", self.ref, new)
                self._tip, self._fetched, self._log_cache = new, True, None
                return f"{self.remote}/{self.branch}:{RUNS}/{key.relpath} ({new[:12]})"
            if attempt + 1 < self.max_attempts:
                # Another job pushed first. Jitter, so jobs that collided do not collide again.
                time.sleep(random.uniform(0.5, 1.5) * min(0.25 * 2**attempt, 8.0))
        raise StoreError(
            f"could not push {key.relpath} to {self.remote}/{self.branch}: other jobs kept "
            f"pushing first, {self.max_attempts} attempts; re-run the job"
        )

    def load(self, key: RunKey) -> StoredRun | None:
        tip = self._read_tip()
        if tip is None:
            return None
        found = self._locate(tip, [key]).get(key)
        if found is None:
            return None
        return self._materialize([(key, found)], tip)[0]

    def find(self, commits: Sequence[str], name: str) -> StoredRun | None:
        check_name(name)
        keys = list(dict.fromkeys(RunKey(commit, name) for commit in commits))
        tip = self._read_tip()
        if tip is None or not keys:
            return None
        located = self._locate(tip, keys)
        for key in keys:
            if key in located:
                return self._materialize([(key, located[key])], tip)[0]
        return None

    def history(self, name: str, limit: int = 20) -> list[StoredRun]:
        check_name(name)
        tip = self._read_tip()
        if tip is None or limit <= 0:
            return []
        order = self._log(tip)
        keys = sorted((k for k in order if k.name == name), key=lambda k: order[k][0])
        chosen: list[tuple[RunKey, _Found]] = []
        # Runs deleted from the branch by hand still appear in its log: skip them.
        for start in range(0, len(keys), _CHUNK):
            batch = keys[start : start + _CHUNK]
            located = self._locate(tip, batch)
            chosen += [(key, located[key]) for key in batch if key in located]
            if len(chosen) >= limit:
                break
        return self._materialize(chosen[:limit], tip)

    def refresh(self) -> None:
        """Fetch again: reads otherwise see the branch as of this store's first read or save."""
        self._fetch()

    # -- fetching and pushing -----------------------------------------------------------------

    def _prepare(self) -> None:
        if self._ready:
            return
        try:
            git_dir = self._git.run("rev-parse", "--absolute-git-dir").strip()
        except GitFailed as err:
            raise StoreError(
                f"{self.repo} is not a git repository ({err}); run evalgate inside a checkout "
                "of your repository"
            ) from err
        if self._cache_dir is None:
            self._cache_dir = Path(git_dir) / "evalgate-cache"
        self._git.use_remote(self.remote)
        self._ready = True

    def _fetch(self) -> str | None:
        """Fetch the branch into the private ref; its tip, or None when the remote lacks it."""
        self._prepare()
        try:
            self._git.run(
                "fetch",
                *self._git.pack_args("fetch"),
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                "--no-recurse-submodules",
                # --refmap= : no "opportunistic" update of refs/remotes/*; only our private ref.
                "--refmap=",
                "--",
                self.remote,
                f"+refs/heads/{self.branch}:{self.ref}",
            )
        except GitFailed as err:
            if _MISSING_BRANCH not in err.stderr:
                raise StoreError(
                    f"could not fetch {self.branch} from {self.remote}: {err}",
                    hint=f"check that the remote exists and is reachable: git remote -v in "
                    f"{self.repo}",
                ) from err
            # No results branch yet (or it was deleted): an empty store.
            self._run("forget the old tip", "update-ref", "-d", self.ref)
            tip = None
        else:
            tip = self._run(
                "read the fetched tip", "rev-parse", "--verify", f"{self.ref}^{{commit}}"
            )
            tip = tip.strip()
        if tip != self._tip:
            self._log_cache = None
        self._tip, self._fetched = tip, True
        return tip

    def _read_tip(self) -> str | None:
        return self._tip if self._fetched else self._fetch()

    def _push(self, new: str) -> bool:
        """True when pushed; False when another push got there first (retry)."""
        try:
            self._git.run(
                "push",
                *self._git.pack_args("push"),
                "--porcelain",
                "--no-verify",
                "--",
                self.remote,
                f"{new}:refs/heads/{self.branch}",
            )
        except GitFailed as err:
            text = f"{err.stdout}\n{err.stderr}"
            if _RETRYABLE.search(text):
                return False
            raise StoreError(
                f"could not push to {self.remote}/{self.branch}: {_push_reason(err)}",
                hint=_push_hint(text, self.branch),
            ) from err
        return True

    # -- trees ----------------------------------------------------------------------------------

    def _ls(self, treeish: str) -> dict[str, _Entry]:
        out = self._run("read the results branch", "ls-tree", "--full-tree", "-z", treeish)
        entries = {}
        for record in out.split("\0"):
            if record:
                meta, _, name = record.partition("\t")
                mode, kind, oid = meta.split()
                entries[name] = _Entry(mode, kind, oid)
        return entries

    def _put_tree(self, base: str | None, parts: list[str], leaf: str) -> str:
        """The tree ``base`` (a tree-ish, or None for empty) with ``parts`` set to tree ``leaf``."""
        entries = self._ls(f"{base}^{{tree}}") if base else {}
        head = parts[0]
        if len(parts) == 1:
            oid = leaf
        else:
            child = entries.get(head)
            if child is not None and child.type != "tree":
                raise StoreError(
                    f"{self.remote}/{self.branch} has a file where the folder {head!r} belongs; "
                    "remove it from that branch"
                )
            oid = self._put_tree(child.oid if child else None, parts[1:], leaf)
        entries[head] = _Entry("040000", "tree", oid)
        listing = "".join(f"{e.mode} {e.type} {e.oid}\t{name}\0" for name, e in entries.items())
        return self._run("build the results tree", "mktree", "-z", input=listing.encode()).strip()

    def _locate(self, tip: str, keys: Sequence[RunKey]) -> dict[RunKey, _Found]:
        """Which of ``keys`` exist at ``tip``, with their tree and blob ids (one git call)."""
        wanted = {f"{RUNS}/{key.relpath}": key for key in keys}
        trees: dict[RunKey, str] = {}
        blobs: dict[RunKey, dict[str, str]] = {}
        paths = list(wanted)
        for start in range(0, len(paths), _CHUNK):
            chunk = paths[start : start + _CHUNK]
            out = self._run(
                "read the results branch",
                "ls-tree",
                "--full-tree",
                "-r",
                "-t",
                "-z",
                tip,
                "--",
                *chunk,
            )
            for record in out.split("\0"):
                if not record:
                    continue
                meta, _, path = record.partition("\t")
                _mode, kind, oid = meta.split()
                if path in wanted:
                    if kind != "tree":
                        raise StoreError(
                            f"{self.remote}/{self.branch} has a file at {path}, where a run "
                            "folder belongs; remove it from that branch"
                        )
                    trees[wanted[path]] = oid
                else:
                    folder, _, file = path.rpartition("/")
                    if folder in wanted and kind == "blob":
                        blobs.setdefault(wanted[folder], {})[file] = oid
        return {key: _Found(tree, blobs.get(key, {})) for key, tree in trees.items()}

    # -- reading runs into the cache ------------------------------------------------------------

    def _materialize(self, found: Sequence[tuple[RunKey, _Found]], tip: str) -> list[StoredRun]:
        """Local folders for the runs, from the cache or written now (one cat-file call)."""
        cache = self.cache_dir
        todo = []
        for key, item in found:
            missing = [name for name in RUN_FILES if name not in item.blobs]
            if missing:
                raise StoreError(
                    f"{self.remote}/{self.branch} holds {RUNS}/{key.relpath} without "
                    f"{', '.join(missing)}; save that run again"
                )
            if not all((cache / item.tree / name).is_file() for name in RUN_FILES):
                todo.append(item)
        if todo:
            contents = self._cat([item.blobs[name] for item in todo for name in RUN_FILES])
            for item in todo:
                self._write_cache(item, contents)
        stamps = self._log(tip)
        return [
            StoredRun(key=key, path=cache / item.tree, stored_at=self._stored_at(key, tip, stamps))
            for key, item in found
        ]

    def _write_cache(self, item: _Found, contents: dict[str, bytes]) -> None:
        # The folder is named by the run's tree id, so it never goes stale; it is written aside
        # and renamed, so a reader never sees half of it.
        final = self.cache_dir / item.tree
        tmp = self.cache_dir / f".tmp-{item.tree}-{secrets.token_hex(4)}"
        try:
            tmp.mkdir(parents=True)
            for name in RUN_FILES:
                (tmp / name).write_bytes(contents[item.blobs[name]])
            if final.exists():
                shutil.rmtree(final)  # an incomplete leftover (complete ones are reused)
            os.rename(tmp, final)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if all((final / name).is_file() for name in RUN_FILES):
                return  # another process wrote the same folder first
            raise StoreError(f"could not write the result cache {self.cache_dir}: {exc}") from exc

    def _cat(self, oids: Sequence[str]) -> dict[str, bytes]:
        unique = list(dict.fromkeys(oids))
        out = self._git.run_bytes(
            "cat-file", "--batch", input="".join(o + "\n" for o in unique).encode()
        )
        contents: dict[str, bytes] = {}
        pos = 0
        for oid in unique:
            end = out.index(b"\n", pos)
            header = out[pos:end].decode().split()
            if len(header) != 3 or header[1] != "blob":
                raise StoreError(
                    f"{self.remote}/{self.branch} refers to a missing object {oid}; "
                    f"run git fetch {self.remote} {self.branch} and try again"
                )
            size = int(header[2])
            contents[oid] = out[end + 1 : end + 1 + size]
            pos = end + 1 + size + 1  # the content is followed by a newline
        return contents

    # -- the branch's log: order and stored_at -------------------------------------------------

    def _log(self, tip: str) -> dict[RunKey, tuple[int, str]]:
        """Every run the branch's log mentions -> (position, newest first; stored_at)."""
        if self._log_cache is not None and self._log_cache[0] == tip:
            return self._log_cache[1]
        out = self._run(
            "read the results branch",
            # %x1e / %x1f: record and field separators no message or path contains.
            "log",
            "--no-renames",
            "--name-only",
            "--format=%x1e%H%x1f%ct%x1f%B%x1f",
            tip,
            "--",
        )
        seen: dict[RunKey, tuple[int, str]] = {}
        for record in out.split("\x1e")[1:]:
            _oid, ct, body, names = record.split("\x1f", 3)
            stamp = _STORED_TRAILER.search(body)
            stored_at = stamp.group(1) if stamp else iso_utc(int(ct))
            # The trailer names the run even when a save changed no byte; changed paths cover
            # commits that other tools made.
            pairs = _RUN_TRAILER.findall(body) + _RUN_PATH.findall(names)
            for commit, name in pairs:
                try:
                    key = RunKey(commit, name)
                except UsageError:
                    continue  # not a run folder evalgate would write: ignore it
                seen.setdefault(key, (len(seen), stored_at))
        self._log_cache = (tip, seen)
        return seen

    def _stored_at(self, key: RunKey, tip: str, stamps: dict[RunKey, tuple[int, str]]) -> str:
        if key in stamps:
            return stamps[key][1]
        # Not in the log we have (a shallow fetch): the tip's date is an upper bound.
        return iso_utc(int(self._run("read the results branch", "log", "-1", "--format=%ct", tip)))

    def _run(self, doing: str, *args: str, input: bytes | None = None) -> str:
        try:
            return self._git.run(*args, input=input)
        except GitFailed as err:
            raise StoreError(
                f"git {args[0]} failed to {doing} on {self.remote}/{self.branch}: {err}"
            ) from err


def _check_branch(branch: str) -> None:
    ok = (
        _BRANCH_RE.fullmatch(branch)
        and ".." not in branch
        and "//" not in branch
        and not branch.endswith(("/", ".", ".lock"))
        and "/." not in branch
    )
    if not ok:
        raise ConfigError(
            f"invalid results branch {branch!r}: use letters, digits, '.', '_', '-' and '/'"
        )


def _push_reason(err: GitFailed) -> str:
    # --porcelain puts the per-ref verdict on stdout: "!\tSRC:DST\t[remote rejected] (why)".
    for line in err.stdout.splitlines():
        if line.startswith("!"):
            return " ".join(line.split("\t")[2:]).strip() or str(err)
    return str(err)


def _push_hint(text: str, branch: str) -> str | None:
    lowered = text.lower()
    if "protected branch" in lowered or "hook declined" in lowered:
        return f"allow pushes to {branch}, or store results on another branch (git-branch:NAME)"
    if any(s in lowered for s in ("403", "denied", "authentication", "could not read username")):
        return "give the job's token write access: permissions: contents: write"
    return None
