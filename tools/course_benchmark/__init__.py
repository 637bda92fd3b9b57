"""The benchmarks (`python -m tools.benchmark [NAME]`), one module per job.

The course benchmark's jobs (`settings.py`, `pipelines.py`, `grain_best.py`, `cores.py`,
`growth.py`, `report.py`) and what they read with (`machine.py`, `read_routing.py`,
`grain_loader.py`, `grain_reads.py`, `example_proto.py`); the side benchmarks, one module each
(`decode.py`, `latency.py`, `service.py`, `training.py`, `big_folder.py`).
"""
