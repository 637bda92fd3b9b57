"""Batch sizes that fit the data and the replicas: capped to the images, even over batches."""

from __future__ import annotations

import math


def cap_batch_size(
    global_batch_size: int, *, num_images: int, num_replicas: int, purpose: str
) -> int:
    """Returns the batch size capped to the data: at most `num_images`, a multiple of replicas.

    A batch larger than the data would give no batch at all (`drop_remainder=True`); a
    batch that is not a multiple of the replicas cannot be split evenly over them. Prints a
    line when it caps.

    Args:
        global_batch_size: the batch size asked for, over all replicas.
        num_images: the images the batches are taken from.
        num_replicas: the replicas a batch is split over.
        purpose: what the batches are for ("training", "validation"), for the messages.

    Returns:
        `global_batch_size`, or the largest multiple of `num_replicas` up to `num_images`.

    Raises:
        ValueError: if there are fewer images than replicas (not one image per replica).

    Example:
        batch = batch_sizes.cap_batch_size(1024, num_images=687, num_replicas=8,
                                        purpose="validation")  # 680
    """
    if num_images < num_replicas:
        raise ValueError(
            f"{num_images} {purpose} image(s) cannot feed {num_replicas} replicas (one image "
            f"each at least): use more images, or fewer {purpose} shards or replicas."
        )
    if global_batch_size <= num_images:
        return global_batch_size
    capped = num_images // num_replicas * num_replicas
    print(
        f"The {purpose} batch of {global_batch_size} is larger than the {num_images} "
        f"{purpose} images: capped to {capped} ({capped // num_replicas} per replica)."
    )
    return capped


def even_batch_size(num_images: int, *, max_batch_size: int, num_replicas: int) -> int:
    """Returns the validation batch size that leaves the fewest images out of full batches.

    The size is at most `max_batch_size` and a multiple of `num_replicas`.

    Args:
        num_images: the validation images.
        max_batch_size: the largest batch allowed.
        num_replicas: the replicas a batch is split over.

    Returns:
        The batch size, at least `num_replicas`.

    Raises:
        ValueError: if there are fewer images than replicas.

    Example:
        batch_sizes.even_batch_size(687, max_batch_size=256, num_replicas=8)  # 224: 3 batches
    """
    if num_images < num_replicas:
        raise ValueError(
            f"{num_images} image(s) cannot feed {num_replicas} replicas (one image each at "
            "least): use more images, or more validation shards, or fewer replicas."
        )
    num_batches = math.ceil(num_images / max(min(max_batch_size, num_images), 1))
    return max(num_images // num_batches // num_replicas * num_replicas, num_replicas)
