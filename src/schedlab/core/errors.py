"""The lab's error type, apart so that every module can raise it (procs.py too)."""

from __future__ import annotations


class LabError(Exception):
    """An error the user can act on; printed without a traceback."""
