"""The course benchmark (`python -m tools.benchmark`), one module per job."""
