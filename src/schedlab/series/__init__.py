"""The patch series: applying, checking, mailing, the config matrix, and the
tests that boot it (KUnit, kselftest, soak, peer tests, deliberate breaks)."""
