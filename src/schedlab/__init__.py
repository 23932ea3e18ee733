"""schedlab: build, boot, test and measure a sched/fair patch series.

Stages and their modules:
  deps     setup: Debian packages and the project venv
  source   base tree: Debian linux-source or the user's own kernel git tree
  series   patches/: apply, rebase, export, check
  build    kernel builds per variant and config (configs/)
  vm       virtme-ng boots on simulated SMT/NUMA topologies
  topology presets, qemu arguments and the guest topology check
"""

__version__ = "0.1"
