"""schedlab: build, boot, test and measure a sched/fair patch series.

The package is in wings, each importing only from those before it in
WINGS; the commands (cli, cliargs, testcmd, pipeline, commitlint) sit on
top. docs/architecture.md names every module and draws the graph.
"""

__version__ = "0.1"

# The wings in their order: a module imports from its own wing and the
# wings before it, never from one after it (tests/test_architecture.py).
WINGS = ("core", "series", "measuring", "kit")
