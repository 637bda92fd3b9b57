"""The pipeline profile (`python -m tools.profile_pipeline`), one module per experiment."""
