"""The lab's core: the kernel tree, builds, boot targets, topologies, VMs.
Nothing here knows the series, a measurement or the kit."""
