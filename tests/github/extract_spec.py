"""Cut GitHub's official OpenAPI description down to what evalgate's GitHub layer uses.

The fake GitHub in ``tests/github`` validates every request and response against the operations
kept here, so the tests break when evalgate sends something GitHub would reject, or expects
something GitHub does not send. The full description (``@octokit/openapi``, 13 MB) is not
committed; this subset is, so the tests need no node at run time.

Regenerate after bumping ``PINNED_VERSION``:

    python tests/github/extract_spec.py --npm            # npm-installs the pinned package
    python tests/github/extract_spec.py PACKAGE_DIR      # or reads an installed copy

Only the named operations and webhooks are kept, with every ``components`` entry they reference
(transitively). Media-type ``examples`` are dropped: they pull in large example components and
validate nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["OPERATIONS", "PACKAGE", "PINNED_VERSION", "SUBSET_PATH", "WEBHOOKS", "extract"]

PACKAGE = "@octokit/openapi"
PINNED_VERSION = "23.0.2"
SOURCE = "generated/api.github.com.json"
SUBSET_PATH = Path(__file__).resolve().parent / "data" / "api.github.com.subset.json"

# operationId -> why evalgate needs it
OPERATIONS = {
    "issues/list-comments": "find the sticky comment by its marker",
    "issues/create-comment": "post the scorecard the first time",
    "issues/update-comment": "replace the scorecard on later runs",
    # Not repos/list-pull-requests-associated-with-commit: asked on the base repository it answers
    # [] for a commit that exists only in a fork, the one case publish mode needs it for.
    "pulls/get": "publish mode: verify the artifact's PR number against the run's head commit",
}
# The webhooks whose payloads the Action reads from GITHUB_EVENT_PATH (test fixture validation):
# a pull request (run mode) and a finished workflow run (publish mode).
WEBHOOKS = ("pull-request-opened", "workflow-run-completed")
# Kept even when unreferenced: the fake validates undocumented fault statuses (a 5xx, a 403 on
# PATCH) against GitHub's generic error shape.
ALWAYS_KEEP = ("#/components/schemas/basic-error",)


def _strip_examples(node: Any) -> Any:
    if isinstance(node, dict):
        # Only media types, parameters and headers carry "examples" next to a "schema"; a schema's
        # own "properties" may legitimately name a field "examples".
        drop = "schema" in node and "examples" in node
        return {k: _strip_examples(v) for k, v in node.items() if not (drop and k == "examples")}
    if isinstance(node, list):
        return [_strip_examples(v) for v in node]
    return node


def _resolve(spec: dict[str, Any], ref: str) -> Any:
    if not ref.startswith("#/"):
        raise ValueError(f"external $ref not supported: {ref}")
    node: Any = spec
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _collect_refs(spec: dict[str, Any], node: Any, seen: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref not in seen:
            seen.add(ref)
            _collect_refs(spec, _strip_examples(_resolve(spec, ref)), seen)
        for value in node.values():
            _collect_refs(spec, value, seen)
    elif isinstance(node, list):
        for value in node:
            _collect_refs(spec, value, seen)


def extract(spec: dict[str, Any], package_version: str) -> dict[str, Any]:
    """Return the subset description: kept paths, kept webhooks, referenced components."""
    paths: dict[str, Any] = {}
    found: set[str] = set()
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if isinstance(op, dict) and op.get("operationId") in OPERATIONS:
                kept = paths.setdefault(path, {})
                if "parameters" in item:
                    kept["parameters"] = item["parameters"]
                kept[method] = _strip_examples(op)
                found.add(op["operationId"])
    missing = set(OPERATIONS) - found
    if missing:
        raise SystemExit(f"operations not in the description: {sorted(missing)}")
    webhooks = {name: _strip_examples(spec["x-webhooks"][name]) for name in WEBHOOKS}

    refs: set[str] = set(ALWAYS_KEEP)
    _collect_refs(spec, {"paths": paths, "x-webhooks": webhooks}, refs)
    for ref in ALWAYS_KEEP:
        _collect_refs(spec, _resolve(spec, ref), refs)
    components: dict[str, dict[str, Any]] = {}
    for ref in sorted(refs):
        _, section, kind, name = ref.split("/", 3)
        assert section == "components", ref
        components.setdefault(kind, {})[name] = _strip_examples(_resolve(spec, ref))
    leftover = [
        r for r in _all_refs({"paths": paths, "components": components}) if "/examples/" in r
    ]
    if leftover:
        raise SystemExit(f"example references survived stripping: {leftover[:3]}")

    info = dict(spec["info"])
    info["x-evalgate-subset"] = {
        "package": PACKAGE,
        "version": package_version,
        "source": SOURCE,
        "operations": sorted(OPERATIONS),
        "webhooks": list(WEBHOOKS),
        "generator": "tests/github/extract_spec.py",
    }
    return {
        "openapi": spec["openapi"],
        "info": info,
        "servers": spec["servers"],
        "paths": paths,
        "x-webhooks": webhooks,
        "components": {kind: components[kind] for kind in sorted(components)},
    }


def _all_refs(node: Any) -> list[str]:
    seen: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("$ref"), str):
                seen.add(item["$ref"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return sorted(seen)


def _npm_install(target: Path) -> Path:
    # --ignore-scripts: the package is data; nothing of it should run here.
    cmd = ["npm", "install", "--no-save", "--ignore-scripts", "--prefix", str(target)]
    subprocess.run([*cmd, f"{PACKAGE}@{PINNED_VERSION}"], check=True)
    return target / "node_modules" / PACKAGE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package_dir", nargs="?", type=Path, help=f"an installed {PACKAGE}")
    parser.add_argument("--npm", action="store_true", help="npm-install the pinned version first")
    parser.add_argument("-o", "--output", type=Path, default=SUBSET_PATH)
    args = parser.parse_args(argv)
    if (args.package_dir is None) == (not args.npm):
        parser.error("give PACKAGE_DIR or --npm (not both)")

    with tempfile.TemporaryDirectory(prefix="octokit-openapi-") as tmp:
        package_dir = _npm_install(Path(tmp)) if args.npm else args.package_dir
        meta = json.loads((package_dir / "package.json").read_text(encoding="utf-8"))
        if meta.get("name") != PACKAGE or meta.get("version") != PINNED_VERSION:
            # A different version would silently change what the tests check against.
            raise SystemExit(
                f"{package_dir} holds {meta.get('name')}@{meta.get('version')}; expected "
                f"{PACKAGE}@{PINNED_VERSION} (bump PINNED_VERSION to move on)"
            )
        spec = json.loads((package_dir / SOURCE).read_text(encoding="utf-8"))
    subset = extract(spec, meta["version"])
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(subset, indent=1, ensure_ascii=False) + "\n", "utf-8")
    kept = sum(len(v) for v in subset["components"].values())
    print(f"wrote {args.output} ({len(subset['paths'])} paths, {kept} components)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
