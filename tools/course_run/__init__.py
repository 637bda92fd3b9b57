"""The course run (`python -m tools.run_course`): estimate, table, heartbeat, kernels' setting."""
