"""schedlab: build, boot, test and measure a sched/fair patch series.

Stages and their modules (docs/architecture.md):
  cli          one function per command; cliargs: option groups, argument types
  testcmd      the test tiers as stage records (stages: records, outcomes, verdict)
  pipeline     'run' (build, boot, check) and the measurement integration checks
  deps         setup: Debian packages and the project venv (pyproject.toml)
  source       base tree: Debian linux-source or the user's own kernel git tree
  series       patches/: apply, rebase, export; series_check: the per-patch checks
  build        kernel builds per variant and config (src/schedlab/configs/)
  targets      boot targets per arch, as data; guests: boot and check one
  vm, pseries  virtme-ng (x86_64) and pseries (ppc64le) boots
  topology     presets, qemu arguments and the guest topology check
  kunit        KUnit boots; kunit_report: the series' tables; kunit_tool: kunit.py
  kselftest    the series' kselftest in the VM
  plan, workloads, probes, bpfgen, probe_parsers, measure, results
               measurement plans, probes (registry, bpftrace, parsers), runs
  tables, compare, plots, ab, resume           comparisons base vs patched
  spec, procs, errors, util                    typed requests, processes, paths
"""

__version__ = "0.1"
