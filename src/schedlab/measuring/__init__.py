"""Measuring base against patched: plans, probes, workloads, result sets,
comparisons and plots, instruction counts under icount."""
