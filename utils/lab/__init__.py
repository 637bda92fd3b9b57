"""The lab's equipment: what every lab runs on, which a learner never calls nor needs to open.

The embedded data and the sources of images, the storage's waits, the conversion into
shards, the shards' sidecar and cache, their validation, the machine-load watch, and the
set-up cell's runtime and package installer. What a lesson calls is at the top of `utils`:
the simulated storage (`utils.storage`), shard files (`utils.shard_files`), image files
(`utils.readable_images`).
"""
