"""Break the patched code on purpose, one way at a time, and run the KUnit cases.

From the repository root, with the lab set up and the series applied:
    work/venv/bin/python docs/results/data/swb-breaks/run.py b1 b2 b3 b4
    work/venv/bin/python docs/results/data/swb-breaks/run.py \
        --glob 'sched_fair_wake.*' docs/results/data/wake-breaks/w1.py
Each break (bN: bN.py here; or a path) edits the patched fair.c in the lab's
tree; the break is committed on a detached head, built incrementally in the
patched/lab build folder and booted with kunit.filter_glob=GLOB (default
sched_fair_lb.swb*). The tree is left at the patched commit; the next
'./schedlab build' rebuilds it.
"""
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
sys.path.insert(0, str(REPO / "src"))
from schedlab import build, kunit, series, source  # noqa: E402
from schedlab.util import set_repo  # noqa: E402

set_repo(REPO)
tree = source.resolve_tree(None, None)
patched = series.ensure_variant(tree, "patched")


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(tree.path), *args], check=True,
                          capture_output=True, text=True).stdout.strip()


args = sys.argv[1:]
glob = "sched_fair_lb.swb*"
if args[:1] == ["--glob"]:
    glob, args = args[1], args[2:]
breaks = [Path(a).resolve() if a.endswith(".py") else HERE / f"{a}.py" for a in args]

try:
    for path in breaks:
        b = path.stem
        git("checkout", "-q", "--detach", patched)
        subprocess.run([sys.executable, str(path),
                        str(tree.path / "kernel/sched/fair.c")], check=True)
        git("-c", "user.name=break", "-c", "user.email=break@localhost", "commit", "-q",
            "-am", f"break {b}")
        res = build.build(tree, "patched", git("rev-parse", "HEAD"), "lab")
        print(f"=== {b}: {path.read_text().splitlines()[0]}", flush=True)
        kunit.run_on(tree.path, res.image, "2x12x8", 2, glob, 900)
finally:
    git("checkout", "-q", "--detach", patched)
