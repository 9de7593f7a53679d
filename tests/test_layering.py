"""The tree reads as the pipeline, and the imports say so: a module imports (at module level)
only from its own stage or an earlier one, and there are no import cycles. Imports inside
functions (lazy, for start-up time) keep the same order: only the modules on top (pipeline,
action, commands, cli) reach later stages; a seam that must cross would be listed in
``LAZY_EXCEPTIONS`` with the reason (none is), so a new one fails here."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "evalgate"

# Stage ranks, in data-flow order (README, "Development").
STAGE = {
    "errors": 0, "_lazy": 0, "_text": 0, "_git": 0, "_repo_code": 0, "_templating": 0, "_jinja": 0,
    "_json": 0, "_tls": 0, "_collector": 0, "evalgate": 0, "stats": 0,
    "config": 1,
    "serve": 2,
    "sandbox": 3,
    "score": 4,
    "suites": 5,
    "run": 6,
    "compare": 7,
    "gate": 8,
    "report": 9,
    "store": 10, "publish": 10,
    "pipeline": 11, "gating": 11,
    "action": 12, "commands": 12, "cli": 12, "__main__": 13,
}  # fmt: skip


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(path: Path, modules: dict[str, Path], *, lazy: bool = False) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    deps = set()
    for node in ast.walk(tree) if lazy else tree.body:  # module level only, unless lazy
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("evalgate"):
            deps.add(node.module)
            deps |= {f"{node.module}.{a.name}" for a in node.names} & modules.keys()
        elif isinstance(node, ast.Import):
            deps |= {a.name for a in node.names if a.name.startswith("evalgate")}
    return deps & modules.keys()


def _stage(module: str) -> int:
    parts = module.split(".")
    return STAGE[parts[1] if len(parts) > 1 else parts[0]]


def test_every_package_has_a_stage() -> None:
    assert {m.split(".")[1] for m in _modules() if "." in m} <= STAGE.keys()


def test_modules_import_only_from_their_stage_or_earlier() -> None:
    modules = _modules()
    wrong = [
        f"{name} (stage {_stage(name)}) imports {dep} (stage {_stage(dep)})"
        for name, path in modules.items()
        for dep in _imports(path, modules)
        if _stage(dep) > _stage(name)
    ]
    assert wrong == []


def test_no_import_cycles() -> None:
    modules = _modules()
    graph = {
        # a package importing its own submodules (re-exports) is not a cycle
        name: {d for d in _imports(path, modules) if not d.startswith(name + ".")}
        for name, path in modules.items()
    }
    state: dict[str, int] = {}  # 1 visiting, 2 done
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append([*trail[trail.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*trail, dep])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


# (importer, imported): where a stage still reaches a later one lazily, and why. None today: a
# later stage's need is met by a protocol (serve.client's ReplyCache) or by moving what is
# shared to the earlier stage (run.baseline); keep it that way.
LAZY_EXCEPTIONS: set[tuple[str, str]] = set()


def test_lazy_imports_keep_the_stage_order_too() -> None:
    modules = _modules()
    wrong = {
        (name, dep)
        for name, path in modules.items()
        for dep in _imports(path, modules, lazy=True)
        if _stage(dep) > _stage(name)
    }
    assert wrong - LAZY_EXCEPTIONS == set(), "a stage imports a later one (lazily)"
    assert LAZY_EXCEPTIONS - wrong == set(), "an exception no longer needed: remove it"


def test_the_package_map_in_the_docs_gives_these_stages() -> None:
    # docs/development.md's map numbers each package with its stage: the same numbers as here,
    # for every package (a renumbering or a new package changes both, or this fails).
    import re

    text = (PACKAGE.parent / "docs" / "development.md").read_text(encoding="utf-8")
    block = text.split("```\nevalgate/", 1)[1].split("```", 1)[0]
    found: dict[str, int] = {}
    for line in block.splitlines():
        m = re.match(r"  (\S.*?)\s+(\d+) ", line)
        if m:
            for name in re.split(r"[ ,]+", m.group(1)):
                found[name.removesuffix("/").removesuffix(".py")] = int(m.group(2))
    assert found == {k: v for k, v in STAGE.items() if k != "evalgate"}
