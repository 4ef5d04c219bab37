"""Imports run downward (STYLE rule 1, issue 22): cli -> ui -> agent/fidelity/formats -> memory/tools ->
core, and inside the core: drivers -> fold -> stages -> log/policy. No layer imports one above it,
siblings do not import each other in a circle, and nothing below cli and ui imports Textual.

Every import counts, the ones inside functions and under TYPE_CHECKING too: a lazy import that runs
upward is still a layer that knows the one above it."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[1] / "app"

# Each group of modules and its rank: a module may import its own group and any of lower rank;
# groups of one rank (siblings) may import each other as long as no two do so both ways.
RANKS = {
    "cli": 6, "__main__": 6,
    "ui": 5,
    "agent": 4, "fidelity": 4, "formats": 4, "proxy": 4, "export": 4.5,   # export draws what fidelity and the core say
    "memory": 3, "tools": 3,
    "core": 2,            # core's drivers: simulate, replay, compare, review, overlay, figures
    "core.fold": 1.3,
    "core.stages": 1.2,
    "core.log": 1.1, "core.policy": 1.1,
    "breakwater": 0,      # the package's own __init__ (the version)
}
CORE_PARTS = ("log", "policy", "stages", "fold")
UI_ONLY = ("textual",)


def module_name(path: Path, root: Path = APP) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def group(module: str) -> str:
    """breakwater.core.fold.pipeline -> core.fold; breakwater.core.simulate -> core; breakwater.ui.x -> ui."""
    parts = module.split(".")
    if len(parts) == 1:
        return "breakwater"
    if parts[1] == "core" and len(parts) > 2 and parts[2] in CORE_PARTS:
        return f"core.{parts[2]}"
    return parts[1]


@cache
def imports_of(source: str, module: str) -> tuple[tuple[int, str], ...]:
    """(line, imported module) for each import in `source`; `from a import b` names a.b when b is a module."""
    found = []
    package = module if module.count(".") == 0 else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing module's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names if is_module(f"{base}.{alias.name}")]
    return tuple(found)


def is_module(name: str) -> bool:
    path = APP.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def violations(sources: dict[str, str]) -> list[str]:
    """What breaks the layering among `sources` (module name -> its text)."""
    problems = []
    edges: dict[tuple[str, str], str] = {}
    for module, source in sorted(sources.items()):
        mine = group(module)
        for line, target in imports_of(source, module):
            where = f"{module}:{line} imports {target}"
            if target.split(".")[0] in UI_ONLY and RANKS[mine] < RANKS["ui"]:
                problems.append(f"{where}: only ui and cli may import Textual")
            if not target.startswith("breakwater.") and target != "breakwater":
                continue
            theirs = group(target)
            if theirs == mine:
                continue
            if RANKS[theirs] > RANKS[mine]:
                problems.append(f"{where}: {mine} sits below {theirs}")
            edges.setdefault((mine, theirs), where)
    for (a, b), where in sorted(edges.items()):
        if (b, a) in edges and a < b:
            problems.append(f"{a} and {b} import each other: {where}; {edges[(b, a)]}")
    return problems


def app_sources() -> dict[str, str]:
    return dict(_app_sources())


@cache
def _app_sources() -> tuple[tuple[str, str], ...]:
    return tuple((module_name(p), p.read_text(encoding="utf-8")) for p in sorted(APP.rglob("*.py"))
                 if "egg-info" not in str(p))


def test_every_group_has_a_rank():
    assert {group(m) for m in app_sources()} <= set(RANKS)


def test_imports_run_downward():
    assert violations(app_sources()) == []


@pytest.mark.parametrize("module, source, says", [
    ("breakwater.core.log.message", "from breakwater.core.fold.pipeline import Pipeline", "core.log sits below core.fold"),
    ("breakwater.core.stages.snip", "def f():\n    from breakwater.core import simulate\n", "core.stages sits below core"),
    ("breakwater.core.simulate", "from breakwater.formats import load_session", "core sits below formats"),
    ("breakwater.tools.bash", "from breakwater.agent.config import config_path", "tools sits below agent"),
    ("breakwater.agent.chat", "import breakwater.ui.app", "agent sits below ui"),
    ("breakwater.ui.app", "from breakwater.cli import core", "ui sits below cli"),
    ("breakwater.core.fold.pipeline", "import textual.app", "only ui and cli may import Textual"),
    ("breakwater.memory.store", "from textual.widgets import Static", "only ui and cli may import Textual"),
    ("breakwater.core.log.tokens", "from ..fold import ledger", "core.log sits below core.fold"),
])
def test_a_violation_is_found(module, source, says):
    sources = app_sources()
    sources[module] = sources.get(module, "") + "\n" + source
    found = violations(sources)
    assert any(says in p for p in found), found


def test_siblings_importing_each_other_is_a_circle():
    sources = app_sources()
    sources["breakwater.formats.codex"] += "\nfrom breakwater.fidelity import probes\n"
    assert any("fidelity and formats import each other" in p for p in violations(sources))


def cycles(sources: dict[str, str], inside: str) -> list[list[str]]:
    """The sets of modules under `inside` that import each other in a circle (strongly connected parts
    of the import graph, every import counted)."""
    graph = {m: sorted({t for _, t in imports_of(s, m) if t in sources and t != m and t.startswith(inside)})
             for m, s in sources.items() if m.startswith(inside)}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in graph[v]:
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            part = []
            while not part or part[-1] != v:
                part.append(stack.pop())
            if len(part) > 1:
                found.append(sorted(part))

    for v in graph:
        if v not in order:
            visit(v)
    return found


def test_no_module_imports_in_a_circle():
    """Not even inside a layer (issue 22: ui/screens/compare.py and replay.py imported each other)."""
    assert cycles(app_sources(), "breakwater") == []


@pytest.mark.parametrize("module, imported", [
    ("breakwater.core.fold.materialize", "if TYPE_CHECKING:\n    from breakwater.core.fold.pipeline import Pipeline"),
    ("breakwater.ui.screens.compare", "def f():\n    from breakwater.ui.screens.replay import ReplayScreen"),
])
def test_a_circle_of_modules_is_found(module, imported):
    sources = app_sources()
    sources[module] += "\n" + imported + "\n"
    (circle,) = cycles(sources, "breakwater")
    assert module in circle and len(circle) > 1
