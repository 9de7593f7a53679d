"""Digests of what decides an item's score beyond its prompt and answer (``Item.exam``).

Base and PR items pair by id only while their content hash (``run.fingerprint.identity``) is
equal, so every part that decides the score must be in it: a task's check and its files, a
verifier, its tests and their modes, the environment an image is built from, a data row's other
columns. Files are hashed by content, mode and path in a stable order; a symlink is hashed as a
link (its target's name), never followed, so a link cannot pull a file from outside the task
into the hash (or hang it on a FIFO).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import JsonValue

__all__ = ["digest", "tree_digest"]

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _plain(value: object) -> JsonValue:
    """``value`` as JSON: bytes by their hash, dataclasses and tuples as mappings and lists."""
    if isinstance(value, bytes | bytearray):
        return {"sha256": hashlib.sha256(value).hexdigest()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_plain(v) for v in value]
        return sorted(items, key=json.dumps) if isinstance(value, set | frozenset) else items
    if value is None or isinstance(value, str | int | float | bool):
        return value
    tobytes = getattr(value, "tobytes", None)
    if callable(tobytes):  # an image or array in a dataset row
        return {type(value).__name__: _plain(tobytes())}
    # A date in a dataset row, a Path; never a repr that holds a memory address (it would
    # differ in every run, and no item would ever pair).
    return _ADDRESS.sub(" at 0x…", str(value))


def digest(value: object) -> str:
    """A stable hash of ``value`` (mappings in key order; bytes by content)."""
    try:  # plain JSON (a data row) as it is: _plain would rebuild it to the same text
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        text = json.dumps(_plain(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def tree_digest(root: str | Path, *, skip: frozenset[str] = frozenset()) -> str:
    """A hash of the folder ``root``: each entry's relative path, kind, mode, and a file's bytes
    or a link's target. ``skip``: relative paths left out (a reference solution, which decides
    no score), with everything under them."""
    from evalgate.sandbox.base import portable_mode  # the sandbox stage loads only when used

    root = Path(root)
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        rel_dir = here.relative_to(root).as_posix()
        dirnames[:] = sorted(
            d for d in dirnames if _rel(rel_dir, d) not in skip and not (here / d).is_symlink()
        )
        links = [d for d in os.listdir(here) if (here / d).is_symlink()]
        for name in sorted({*dirnames, *filenames, *links}):
            rel = _rel(rel_dir, name)
            if rel in skip:
                continue
            path = here / name
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                h.update(b"L\0" + rel.encode() + b"\0" + os.readlink(path).encode() + b"\0")
            elif stat.S_ISDIR(info.st_mode):
                h.update(b"D\0" + rel.encode() + b"\0")
            elif stat.S_ISREG(info.st_mode):
                mode = oct(portable_mode(info.st_mode)).encode()
                h.update(b"F\0" + rel.encode() + b"\0" + mode + b"\0")
                h.update(hashlib.sha256(path.read_bytes()).digest())
            else:  # a FIFO or a device: never opened, only named
                h.update(b"O\0" + rel.encode() + b"\0")
    return h.hexdigest()[:32]


def _rel(parent: str, name: str) -> str:
    return name if parent == "." else f"{parent}/{name}"
