"""The lab's equipment: what every lab runs on, which a learner never calls nor needs to open.

The embedded data and the sources of images, the conversion into shards, the sidecar's
writing and the shards' cache, their validation, and the set-up cell's runtime and package
installer. It builds on the top of `utils`, what a lesson calls (the simulated storage,
shard files and their sidecar, image files, argument checks, the machine-load watch), and
the top never imports it (pyproject.toml's import contracts).
"""
