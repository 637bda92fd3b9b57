"""What a conversion did: records written, bytes before and after, images skipped or enlarged."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from utils import display, readable_images, records


@dataclasses.dataclass(frozen=True)
class SkippedImage:
    """An input image that was not written, and why."""

    path: str
    error: str


@dataclasses.dataclass(frozen=True)
class SmallImage:
    """An input image smaller than the target on its shorter side: written, enlarged."""

    path: str
    size: tuple[int, int]


# At most this many skipped, small or transparent images are named in a report, on one line
# each kind; the count is complete.
_MAX_LISTED = 3


@dataclasses.dataclass(frozen=True)
class ConversionReport:
    """What `convert` did.

    Attributes:
        output_dir: the shards' folder.
        shards: the shard paths written, in order.
        shard_counts: records in each shard.
        num_input_images: images the source holds.
        skipped: images that could not be read or decoded, with the error of each.
        empty_class_folders: class folders with no images, not used as classes.
        input_bytes: bytes of the images written, as stored in the source.
        output_image_bytes: bytes of the same images recompressed.
        seconds: time taken.
        small_images: images written whose shorter side was under `target_size` pixels:
            kept (a small photo still shows its class, and dropping it would change the
            class counts without a word), enlarged, and listed so you can remove them.
        target_size: side of the square images written.
        composited: images written whose transparent pixels were composited on white,
            as a viewer shows them (their hidden colours are not what the model sees).
    """

    output_dir: str
    shards: list[str]
    shard_counts: list[int]
    num_input_images: int
    skipped: list[SkippedImage]
    empty_class_folders: list[str]
    input_bytes: int
    output_image_bytes: int
    seconds: float
    small_images: list[SmallImage] = dataclasses.field(default_factory=list)
    target_size: int = records.DEFAULT_TARGET_SIZE
    composited: list[str] = dataclasses.field(default_factory=list)

    @property
    def num_written(self) -> int:
        """Records written, in all shards."""
        return sum(self.shard_counts)

    @property
    def records_per_second(self) -> float:
        """Records written per second of the whole conversion."""
        return self.num_written / self.seconds if self.seconds else float("inf")

    def summary(self) -> str:
        """Returns the report `convert` prints.

        Returns:
            Lines of counts, bytes before and after, speed, and the files skipped, small or
            transparent: a line per kind (per reason skipped), a count and a few names.
        """
        written = max(self.num_written, 1)
        before, after = self.input_bytes / written, self.output_image_bytes / written
        lines = [
            f"Wrote {self.num_written:,} records in {len(self.shards)} shards to "
            f"{self.output_dir} in {self.seconds:.1f} s ({self.records_per_second:.0f} records/s).",
            f"Average bytes per image: {before:,.0f} before, {after:,.0f} after "
            f"({display.describe_saving(before, after)})."
            if before
            else "No image written.",
            f"Input images: {self.num_input_images:,} = {self.num_written:,} written "
            f"+ {len(self.skipped):,} skipped.",
        ]
        if self.skipped:
            skipped = [(image.path, image.error) for image in self.skipped]
            lines.append(readable_images.describe_skipped(skipped, "Skipped"))
        if self.small_images:
            side = self.target_size
            named = [
                f"{_short(image.path)} ({image.size[0]} x {image.size[1]})"
                for image in self.small_images
            ]
            lines.append(
                f"Smaller than {side} x {side}: {len(self.small_images):,} image(s), kept and "
                "enlarged (blurry; remove them from the folder if they are thumbnails): "
                + display.short_list(named, max_listed=_MAX_LISTED, shown=_MAX_LISTED)
            )
        if self.composited:
            lines.append(
                f"Transparent: {len(self.composited):,} image(s), composited on white as a "
                "viewer shows them: "
                + display.short_list(
                    [_short(path) for path in self.composited],
                    max_listed=_MAX_LISTED,
                    shown=_MAX_LISTED,
                )
            )
        if self.empty_class_folders:
            empty = ", ".join(self.empty_class_folders)
            lines.append(f"Empty class folder(s), not used as classes: {empty}")
        return "\n".join(lines)


def _short(path: str) -> str:
    """A path as `<class>/<name>`: what tells the file apart in a line of a few names."""
    return "/".join(Path(path).parts[-2:])
