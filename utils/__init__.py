"""Helpers for the tpu-speed-pipelines labs: data, storage, timing, display, checks."""
