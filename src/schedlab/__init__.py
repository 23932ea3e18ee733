"""schedlab: build, boot, test and measure a sched/fair patch series.

Stages and their modules (README, "Architecture"):
  cli          argument parsing, one function per command
  pipeline     the 'run' and 'test' commands' stages
  deps         setup: Debian packages and the project venv (pyproject.toml)
  source       base tree: Debian linux-source or the user's own kernel git tree
  series       patches/: apply, rebase, export; series_check: the per-patch checks
  build        kernel builds per variant and config (src/schedlab/configs/)
  vm           virtme-ng boots on simulated SMT/NUMA topologies
  topology     presets, qemu arguments and the guest topology check
  kunit        KUnit boots; kunit_report: the series' tables; kunit_tool: kunit.py
  kselftest    the series' kselftest in the VM
  plan, workloads, probes, measure, results   measurement plans and their runs
  compare, plots, ab                           comparisons base vs patched
  spec, procs, util                            typed requests, processes, paths
"""

__version__ = "0.1"
