# %% [markdown]
# # Lab 2 · Recompress the images and write TFRecord shards
#
# **Goal:** pack the images into a few large TFRecord files ("shards"), resized and
# recompressed, so that one request brings hundreds of images; show that none was lost.
#
# **You will:**
#
# 1. Crop each image's centre square and resize it to one size (TODO 1).
# 2. Recompress it as JPEG, and measure the bytes saved and what they cost (TODO 2).
# 3. Store it in a `tf.train.Example` record (TODO 3).
# 4. Write a shard safely: never a file that looks finished but is not (TODO 4).

# %% [markdown]
# ## Set-up
#
# Run this cell first: it finds the course's `utils` (beside `labs/` in a checkout) or
# installs it, installs TensorFlow where it is missing, and says which backend Keras runs on.

# %% tags=["setup"]
# The build puts the set-up code here (tools/setup_cell.py).

# %%
from pathlib import Path

import numpy as np
import tensorflow as tf

from utils import charts, checks, comparison, display, records, sampling
from utils.lab import (
    conversion,
    readable_images,
    shard_cache,
    shard_files,
    sources,
    validation,
)
from utils.lessons.write_tfrecords import recompression

# %% tags=["parameters"]
DATA_SOURCE = "embedded"  # "embedded", "flower_photos", a local folder, or "gs://.../*/*.jpg"
NUM_IMAGES = 3670  # Size of the embedded dataset (ignored for other sources).
TARGET_SIZE = 192  # Every image becomes TARGET_SIZE x TARGET_SIZE pixels.
JPEG_QUALITY = 90  # Quality of the recompressed JPEGs, 0-100.
NUM_SHARDS = 16  # Number of TFRecord files to write.
OUTPUT_DIR = None  # None: the course cache (labs 3 and 4 look there); or a folder of yours.
NUM_SAMPLE = 200  # Images in the recompression measurement, drawn from every class.
DECODE_TIMED_IMAGES = 2000  # Images decoded per timed run (a run of ~0.1 s is mostly noise).
DECODE_REPEATS = 5  # Rounds of the decode timings, taken in turns.
SEED = 42

# %% [markdown]
# ## The data
#
# The same source as lab 1. `OUTPUT_DIR` says where the shards go: by default the course
# cache, where labs 3 and 4 find them; or a local or `gs://` folder of your own.

# %%
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
print(source.describe())
output_dir = OUTPUT_DIR or shard_cache.default_output_dir(
    source, target_size=TARGET_SIZE, num_shards=NUM_SHARDS
)
print("Shards will go to:", output_dir)
# Eight images from across the source; a file that does not decode is skipped and listed.
image_paths = conversion.source_paths(source)
spread = image_paths[:: max(1, len(image_paths) // 8)]
sample_paths, sample_images, _ = readable_images.readable_sample(spread + image_paths, 8)
sizes = [image.shape[:2] for image in sample_images]
print(f"Sizes of {len(sample_images)} images (height, width):", sizes)

# %% [markdown]
# ## 1. One size for every image (TODO 1)
#
# A batch is one tensor, so its images must share a size. Squashing an image to a square
# distorts it; its centre square, as wide as the *shorter* side, keeps its proportions.
# (The conversion turns every photo upright first.)
#
# **TODO 1.** Complete `resize_and_crop(image, target_size)`: the image's centre square,
# resized smoothly (antialiased) to `target_size` x `target_size`, as uint8. It runs inside
# `Dataset.map()`: TensorFlow ops (`tf.image` crops and resizes).
#
# *Hint:* inside `map()` the image's size is not known in advance (`image.shape` is
# `(None, None, 3)`): read it with `tf.shape(image)`, which gives int32 tensors that
# `tf.minimum` and `//` work on.


# %% tags=["save"]
def resize_and_crop(image, target_size):
    """Crops the centre square of `image`, then resizes it to `target_size` x `target_size`."""
    # TODO 1: crop the centre square, resize it, return uint8.
    ### BEGIN SOLUTION
    height, width = tf.shape(image)[0], tf.shape(image)[1]
    side = tf.minimum(height, width)
    cropped = tf.image.crop_to_bounding_box(
        image, (height - side) // 2, (width - side) // 2, side, side
    )
    resized = tf.image.resize(cropped, [target_size, target_size], antialias=True)
    square = tf.saturate_cast(tf.round(resized), tf.uint8)
    ### END SOLUTION
    return square


# %%
# NBVAL_CHECK_OUTPUT
checks.check_resize_and_crop(
    resize_and_crop, todo=1, sample_images=sample_images, target_size=TARGET_SIZE
)

# %%
# The same images, resized and cropped.
labels = [source.class_names.index(Path(p).parent.name) for p in sample_paths]
resized_images = [resize_and_crop(image, TARGET_SIZE).numpy() for image in sample_images]
resized_dataset = tf.data.Dataset.from_tensor_slices((np.stack(resized_images), labels))
figure = display.show_images(
    resized_dataset, class_names=source.class_names, num_images=len(resized_images), num_columns=4
)

# %% [markdown]
# ## 2. Recompress (TODO 2)
#
# The resized image is stored as JPEG again: raw pixels would take `TARGET_SIZE *
# TARGET_SIZE * 3` bytes each. The quality trades bytes (what storage sends) for fidelity.
#
# **TODO 2.** Complete `recompress(image, quality)`: the uint8 image as JPEG bytes at
# `quality`, as small as the encoder can make them at that quality.


# %% tags=["save"]
def recompress(image, quality):
    """Encodes a uint8 image as JPEG at `quality`; returns a scalar string tensor."""
    # TODO 2: encode as JPEG at this quality.
    ### BEGIN SOLUTION
    jpeg = tf.io.encode_jpeg(image, quality=quality, optimize_size=True)
    ### END SOLUTION
    return jpeg


# %%
# NBVAL_CHECK_OUTPUT
checks.check_recompress(recompress, todo=2, sample_images=resized_images, quality=JPEG_QUALITY)

# %% [markdown]
# ### What recompressing and resizing buy, and what they cost
#
# On `NUM_SAMPLE` images from every class: bytes per image before and after, and how close
# the recompressed image is to the resized one (PSNR: above 35 dB, differences are hard to
# see). To separate the size from the encoding, the originals are also recompressed at their
# own size, and the resized images at several qualities; decoding is timed in turns.

# %%
every_class = sampling.paths_from_every_class(image_paths)
trade_off_paths, _, _ = readable_images.readable_sample(every_class, NUM_SAMPLE)
per_class = [f"{name} {count}" for name, count in sampling.count_classes(trade_off_paths).items()]
print(f"Sample, images per class ({len(per_class):,} classes):", display.short_list(per_class))
original_bytes = [tf.io.read_file(path).numpy() for path in trade_off_paths]
resized = [resize_and_crop(tf.io.decode_jpeg(b, channels=3), TARGET_SIZE) for b in original_bytes]
recompressed_bytes = [recompress(image, JPEG_QUALITY).numpy() for image in resized]
psnr = recompression.mean_psnr(resized, recompressed_bytes)
before = sampling.mean_bytes(original_bytes)
after = sampling.mean_bytes(recompressed_bytes)
print(f"Bytes per image: {before:,.0f} -> {after:,.0f} ({display.describe_saving(before, after)})")
print(f"Quality: PSNR {psnr:.1f} dB at JPEG quality {JPEG_QUALITY}.")
QUALITIES = [50, 70, 80, 90, 95]
same_size_bytes = [
    recompress(tf.io.decode_jpeg(b, channels=3), JPEG_QUALITY).numpy() for b in original_bytes
]
same_size = sampling.mean_bytes(same_size_bytes)
by_quality = recompression.encode_at_qualities(resized, recompress, QUALITIES)
kilobytes = [sampling.mean_bytes(jpegs) / 1e3 for jpegs in by_quality.values()]
versions = {
    "originals": original_bytes,
    "original size, recompressed": same_size_bytes,
    "resized, recompressed": recompressed_bytes,
    **{f"resized, quality {quality}": jpegs for quality, jpegs in by_quality.items()},
}
decode_timers = {
    label: recompression.decode_timer(jpegs, num_images=DECODE_TIMED_IMAGES)
    for label, jpegs in versions.items()
}
decode_runs = comparison.measure_in_turns(decode_timers, repeats=DECODE_REPEATS)
decode_before = decode_runs["originals"]
decode_same_size = decode_runs["original size, recompressed"]
decode_after = decode_runs["resized, recompressed"]
quality_rates = [decode_runs[f"resized, quality {quality}"] for quality in QUALITIES]
print(
    f"\nBytes per image: originals {before:,.0f}; recompressed at quality {JPEG_QUALITY} "
    f"without resizing {same_size:,.0f} ({display.describe_saving(before, same_size)}); "
    f"resized and recompressed {after:,.0f} ({display.describe_saving(before, after)})."
)
print(comparison.describe_difference([decode_same_size, decode_before], name="Recompressing alone"))
print(
    comparison.describe_difference([decode_after, decode_before], name="Resizing and recompressing")
)
print(comparison.describe_difference(quality_rates, name="Decode speed across qualities"))
psnr_by_quality = [recompression.mean_psnr(resized, jpegs) for jpegs in by_quality.values()]
figure = charts.plot_quality_trade_off(
    QUALITIES,
    kilobytes,
    quality_rates,
    reference=("originals", before / 1e3, decode_before.median),
    psnr_db=psnr_by_quality,
)

# %% [markdown]
# The lines above say how much of the saving comes from recompressing alone and how much
# from resizing; the plot, what the quality alone moves. Fewer bytes: less waiting on
# storage in every epoch. The cost: converting once, and the detail the PSNR measures.
#
# ## 3. One record per image (TODO 3)
#
# A TFRecord file holds records, each here a `tf.train.Example`: a map from feature names to
# lists of one of three types (`bytes_list`, `int64_list`, `float_list`). One image's fields:

# %%
for name, meaning in records.SCHEMA.items():
    print(f"{name:>14}: {meaning}")

# %% [markdown]
# `size` keeps the image's size *before* resizing (the original course stored the size
# after resizing, always the same). The class index comes from the folder name.
#
# **TODO 3.** Complete `to_example(image_jpeg, class_index, original_size, class_names)`:
# the `tf.train.Example` holding the fields above, e.g.
# `tf.train.Feature(bytes_list=tf.train.BytesList(value=[image_jpeg]))` for the image;
# `one_hot_class` is 1.0 at the class index, 0.0 elsewhere.


# %% tags=["save"]
def to_example(image_jpeg, class_index, original_size, class_names):
    """Returns the tf.train.Example of one image (fields as in records.SCHEMA)."""
    # TODO 3: build the five features and the Example.
    ### BEGIN SOLUTION
    one_hot = [0.0] * len(class_names)
    one_hot[class_index] = 1.0
    label = class_names[class_index].encode()
    features = {
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image_jpeg])),
        "class": tf.train.Feature(int64_list=tf.train.Int64List(value=[class_index])),
        "label": tf.train.Feature(bytes_list=tf.train.BytesList(value=[label])),
        "size": tf.train.Feature(int64_list=tf.train.Int64List(value=list(original_size))),
        "one_hot_class": tf.train.Feature(float_list=tf.train.FloatList(value=one_hot)),
    }
    example = tf.train.Example(features=tf.train.Features(feature=features))
    ### END SOLUTION
    return example


# %%
# NBVAL_CHECK_OUTPUT
checks.check_to_example(to_example, todo=3, class_names=source.class_names)

# %%
# One record, printed (the image's bytes cut short).
image_jpeg = recompress(resized_images[0], JPEG_QUALITY).numpy()
example = to_example(image_jpeg, labels[0], list(sample_images[0].shape[:2]), source.class_names)
for name, feature in sorted(example.features.feature.items()):
    values = getattr(feature, feature.WhichOneof("kind")).value
    shown = [f"{len(v):,} bytes: {v[:12]!r}..." if len(str(v)) > 40 else v for v in values]
    if name == "one_hot_class":  # One float a class: where its 1.0 is.
        shown = f"{len(values):,} floats, 1.0 at index {list(values).index(1.0)}"
    print(f"{name:>14} {feature.WhichOneof('kind'):<10}", shown)
print(f"Serialized: {len(example.SerializeToString()):,} bytes")
print(records.describe_one_hot_cost(len(source.class_names)))

# %% [markdown]
# ## 4. Write a shard, safely (TODO 4)
#
# `tf.io.TFRecordWriter(path)` writes records into one file. A shard's name holds its
# record count (`flowers00-230.tfrec`), known only at the end, and a run can stop half way
# (a crash, a full disk): so a file gets its final name only once complete.
#
# **TODO 4.** Complete `write_shard(serialized_examples, output_dir, index)`: every record
# written to `shard_files.temporary_path(output_dir, index)`, and only then the file
# renamed to its final name, `shard_files.shard_name(index, num_records)` in `output_dir`;
# return that path (`tf.io.gfile` works alike on local disk and `gs://`).


# %% tags=["save"]
def write_shard(serialized_examples, output_dir, index):
    """Writes the records to shard `index` in `output_dir`; returns the shard's path."""
    # TODO 4: write under the temporary name, then rename to the final name.
    ### BEGIN SOLUTION
    temporary = shard_files.temporary_path(output_dir, index)
    num_records = 0
    with tf.io.TFRecordWriter(temporary) as writer:
        for record in serialized_examples:
            writer.write(record)
            num_records += 1
    final_path = f"{output_dir}/{shard_files.shard_name(index, num_records)}"
    tf.io.gfile.rename(temporary, final_path, overwrite=True)
    ### END SOLUTION
    return final_path


# %%
# NBVAL_CHECK_OUTPUT
checks.check_write_shard(write_shard, todo=4)

# %% [markdown]
# ## Write every shard
#
# `conversion.convert()` runs your four functions over every image: shuffled once (each
# shard mixes the classes), decoded in a parallel `map()` on all cores, split into
# `NUM_SHARDS` shards. An image that cannot be decoded is skipped and listed; a sidecar
# JSON (classes, size, counts) is written last.
#
# How many shards? TensorFlow's TFRecord tutorial gives the rule of thumb: "at least 10
# times as many files as there will be hosts reading data", each file "at least 10 MB+
# and ideally 100 MB+" (tensorflow.org/tutorials/load_data/tfrecord). Here one host reads
# many shards at once (lab 3's `NUM_PARALLEL_READS`), so `NUM_SHARDS` is at least that
# many; a small dataset then gives shards under the rule's size (printed below).

# %%
steps = conversion.ConversionSteps(resize_and_crop, recompress, to_example, write_shard)
report = conversion.convert(
    source,
    output_dir,
    target_size=TARGET_SIZE,
    num_shards=NUM_SHARDS,
    jpeg_quality=JPEG_QUALITY,
    seed=SEED,
    steps=steps,
)

# %%
for path in shard_files.list_shards(output_dir):
    print(f"{Path(path).name:<24} {tf.io.gfile.stat(path).length / 1e6:6.2f} MB")

# %% [markdown]
# ## Check that nothing was lost
#
# `validation.validate()` reads every shard back: every record parsed and decoded, each
# shard's count against its name, and records written plus images skipped against the
# input images.

# %%
# NBVAL_CHECK_OUTPUT
validation_report = validation.validate(output_dir)

# %%
# The images as stored, read back from the first shard.
stored = tf.data.TFRecordDataset(report.shards[0]).map(records.parse_record)
stored = stored.map(lambda r: (tf.io.decode_jpeg(r["image"], channels=3), r["class"]))
figure = display.show_images(stored, class_names=source.class_names, num_images=8, num_columns=4)

# %% [markdown]
# ## What you measured

# %% tags=["summary"]
print(
    f"Recompressed at quality {JPEG_QUALITY}: {before:,.0f} -> {after:,.0f} bytes per image "
    f"({display.describe_saving(before, after)}), PSNR {psnr:.1f} dB.\n"
    f"Recompressed at the original size, without resizing: {same_size:,.0f} bytes per image "
    f"({display.describe_saving(before, same_size)})."
)
print(
    f"Decoding (medians of {decode_before.num_runs} rounds in turns): "
    f"{decode_before.median:,.0f} images/s for the originals, "
    f"{decode_same_size.median:,.0f} for the originals recompressed at their size, "
    f"{decode_after.median:,.0f} for the resized and recompressed images."
)
print(comparison.describe_difference(quality_rates, name="Decode speed across qualities"))
print(
    f"Conversion: {report.num_written} images in {report.seconds:.1f} s "
    f"({report.records_per_second:.0f} images/s) into {len(report.shards)} shards.\n"
    f"Validation: {'valid' if validation_report.ok else 'INVALID'}; "
    f"{validation_report.num_input_images} input images = {validation_report.num_records} "
    f"written + {len(validation_report.skipped)} skipped."
)

# %% [markdown]
# **Takeaway.** The dataset is now `NUM_SHARDS` files instead of thousands, each image
# smaller, every input accounted for. Lab 3 reads them in parallel from the same storage.
#
# *Changed from the original course:* the original size is stored, shards are written
# safely, every record is validated (docs/lessons.md).
