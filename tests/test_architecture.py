"""The package's shape: wings in a declared order, no import cycle, no
module over 500 lines, every module named in docs/architecture.md."""

import ast
from pathlib import Path
from typing import Dict, List, Set

import schedlab

SRC = Path(schedlab.__file__).resolve().parent
DOC = SRC.parents[1] / "docs" / "architecture.md"
MAX_LINES = 500


def modules(root: Path) -> Dict[str, Path]:
    """Dotted name under the package ('core.util', 'cli') -> file."""
    out = {}
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = p
    return out


def _target(name: str, mods: Dict[str, Path]) -> str:
    """The package's module that an import of NAME reaches, or ''."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name


def imports(root: Path) -> Dict[str, Set[str]]:
    """Each module -> the package's modules it imports, anywhere in it
    (function-local imports too). A package's __init__ counts as the
    package, '' being the top one."""
    mods = modules(root)
    graph: Dict[str, Set[str]] = {}
    for name, path in mods.items():
        pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".") if pkg else []
                    base = base[:len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                elif (node.module or "").split(".")[0] == "schedlab":
                    mod = node.module.partition(".")[2]
                else:
                    continue
                for a in node.names:
                    sub = f"{mod}.{a.name}" if mod else a.name
                    found.add(sub if sub in mods else _target(mod, mods))
            elif isinstance(node, ast.Import):
                found |= {_target(a.name.partition(".")[2], mods) for a in node.names
                          if a.name.startswith("schedlab.")}
        graph[name] = {m for m in found if m != name and m in mods and m}
    return graph


def cycle(graph: Dict[str, Set[str]]) -> List[str]:
    """One import cycle of GRAPH, or []."""
    state: Dict[str, str] = {}
    path: List[str] = []

    def visit(m: str) -> List[str]:
        state[m] = "open"
        path.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == "open":
                return path[path.index(d):] + [d]
            if d not in state:
                found = visit(d)
                if found:
                    return found
        state[m] = "done"
        path.pop()
        return []

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return []


def wing(module: str) -> str:
    """The wing a module belongs to: its subpackage, or 'commands' for the
    modules at the top of the package."""
    head, dot, _ = module.partition(".")
    if dot or head in schedlab.WINGS:
        return head
    return "commands"


def upward(graph: Dict[str, Set[str]]) -> List[str]:
    """Imports from a wing into one that comes later in schedlab.WINGS."""
    order = {w: i for i, w in enumerate(schedlab.WINGS + ("commands",))}
    return [f"{m} -> {d}" for m in sorted(graph) for d in sorted(graph[m])
            if order[wing(d)] > order[wing(m)]]


def too_long(root: Path) -> List[str]:
    return [f"{name}: {len(p.read_text().splitlines())} lines"
            for name, p in modules(root).items()
            if len(p.read_text().splitlines()) > MAX_LINES]


def wing_graph(graph: Dict[str, Set[str]]) -> Set[str]:
    """'a -> b' for each pair of different wings with an import between them."""
    return {f"{wing(m)} -> {wing(d)}" for m in graph for d in graph[m] if wing(m) != wing(d)}


def test_the_package_keeps_its_shape():
    graph = imports(SRC)
    assert len(graph) > 40
    assert cycle(graph) == []
    assert upward(graph) == []
    assert too_long(SRC) == []


def test_the_checks_find_what_they_look_for(tmp_path):
    pkg = tmp_path / "schedlab"
    (pkg / "core").mkdir(parents=True)
    (pkg / "kit").mkdir()
    for f in ("__init__.py", "core/__init__.py", "kit/__init__.py"):
        (pkg / f).write_text("")
    (pkg / "core" / "a.py").write_text("from schedlab.core import b\n")
    (pkg / "core" / "b.py").write_text("def f():\n    from . import a\n")
    (pkg / "kit" / "c.py").write_text("from schedlab.core.a import x\n")
    (pkg / "cli.py").write_text("from schedlab.kit import c\n" + "x = 1\n" * MAX_LINES)
    graph = imports(pkg)
    assert graph["core.a"] == {"core.b"} and graph["core.b"] == {"core.a"}
    assert cycle(graph) == ["core.a", "core.b", "core.a"]
    assert upward(graph) == []
    (pkg / "core" / "a.py").write_text("x = 1\n")
    (pkg / "core" / "b.py").write_text("from schedlab.kit import c\n")
    graph = imports(pkg)
    assert cycle(graph) == [] and upward(graph) == ["core.b -> kit.c"]
    assert too_long(pkg) == [f"cli: {MAX_LINES + 1} lines"]


def test_the_architecture_page_names_every_module_and_the_wing_graph():
    text = DOC.read_text()
    files = [p.relative_to(SRC).as_posix() for p in modules(SRC).values()
             if p.name != "__init__.py"]
    assert len(files) > 40
    assert [f for f in files if f"`{f}`" not in text] == []
    assert wing_graph(imports(SRC)) <= {line.strip("` ") for line in text.splitlines()}
