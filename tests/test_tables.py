"""tables.py, the ground floor of the tables: rows, the wall-clock note, and
an import graph without a cycle (function-local imports included)."""

import ast
from pathlib import Path

from schedlab import tables

PACKAGE = Path(tables.__file__).parent


def _imports() -> dict:
    """Each module of the package -> the package's modules it imports, anywhere in it."""
    mods = {p.stem for p in PACKAGE.glob("*.py")}
    graph = {}
    for p in PACKAGE.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps |= {node.module.split(".")[0]} if node.module else \
                    {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("schedlab"):
                parts = node.module.split(".")
                deps |= {parts[1]} if len(parts) > 1 else {a.name for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name.split(".")[1] for a in node.names
                         if a.name.startswith("schedlab.")}
        graph[p.stem] = sorted(d for d in deps if d in mods and d != p.stem)
    return graph


def _cycle(graph: dict) -> list:
    """One import cycle of GRAPH, or []."""
    state: dict = {}
    path: list = []

    def visit(m):
        state[m] = "open"
        path.append(m)
        for d in graph[m]:
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


def test_the_package_has_no_import_cycle():
    graph = _imports()
    assert _cycle(graph) == []
    assert _cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    # compare builds on plots, plots on tables; tables on neither.
    assert "plots" in graph["compare"] and "compare" not in graph["plots"]
    assert not {"compare", "plots", "equivalence", "ab"} & set(graph["tables"])
    assert "compare" not in graph["equivalence"]


def _runs(accel, values, metric="should_we_balance mean time (funclatency)", unit="ns",
          kind="time"):
    return [{"workload": "stress-50", "complete": True, "accel": accel,
             "metrics": {metric: {"value": v, "unit": unit, "kind": kind,
                                  "higher_is_better": False}}} for v in values]


def test_short_functions_times_under_tcg_are_marked():
    (row,) = tables.rows(_runs("tcg-single", [1e4, 2e4]), _runs("tcg-single", [3e4, 2e4]))
    assert row.wallclock and row.label().endswith(tables.WALLCLOCK_MARK)
    assert "--accel icount" in tables.WALLCLOCK_NOTE
    # icount's ns are instructions; a workload's own time is no short function
    (row,) = tables.rows(_runs("icount", [1e4, 2e4]), _runs("icount", [3e4, 2e4]))
    assert not row.wallclock and row.label() == \
        "should_we_balance mean time (funclatency) (ns)"
    (row,) = tables.rows(*[_runs("tcg-single", [1.0, 2.0], "hackbench time", "s")] * 2)
    assert not row.wallclock
    # The accelerator of older runs is in their setting, or nowhere.
    assert tables.accel_of({"setting": {"accel": "tcg"}}) == "tcg"
    assert tables.accel_of({}) == "" and not tables.under_tcg([{}])
