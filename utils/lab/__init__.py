"""The lab's equipment: what every lab runs on, which a learner need not open to follow it.

The embedded data and the sources of images, the simulated storage, the conversion into
shards, the shards' files and cache, their validation, the machine-load watch, and the
set-up cell's runtime and package installer.
"""
