# %% [markdown]
# # Lab 2 · Recompress the images and write TFRecord shards
#
# **Goal:** by the end you can pack thousands of images into a few TFRecord files
# ("shards") with `tf.train.Example` and `tf.io.TFRecordWriter`, written so that a crash
# never leaves a file that looks finished, and show that no image was lost.
#
# **You will:**
#
# 1. Store one image and its label in a `tf.train.Example` record (TODO 1).
# 2. Write a shard of records safely (TODO 2).

# %% [markdown]
# ## Set-up
#
# Run this cell first: it finds or installs the course's `utils` and TensorFlow, and says
# which backend Keras runs on.

# %% tags=["setup"]
# The build puts the set-up code here (tools/building/setup_cell.py).

# %%
import tensorflow as tf

from utils import checks, records, shard_files
from utils.lab import conversion, shard_cache, sources, validation
from utils.lessons.write_tfrecords import recompression, report

# %% tags=["parameters"]
DATA_SOURCE = "embedded"  # "embedded", "flower_photos", a local folder, or "gs://.../*/*.jpg"
NUM_IMAGES = 3670  # Images in the embedded dataset.
TARGET_SIZE = 192  # Every image becomes TARGET_SIZE x TARGET_SIZE pixels.
JPEG_QUALITY = 90  # Quality of the recompressed JPEGs, 0-100.
NUM_SHARDS = 16  # TFRecord files to write.
OUTPUT_DIR = None  # None: the course cache, where labs 3 and 4 look; or a folder of yours.
NUM_SAMPLE = 200  # Images in the recompression measurement.
DECODE_TIMED_IMAGES = 2000  # Images decoded per timed round.
DECODE_REPEATS = 5  # Rounds of decode timings, taken in turns.
SEED = 42

# %% [markdown]
# ## The data
#
# The same source as lab 1. The shards go to `OUTPUT_DIR`: by default the course cache,
# where labs 3 and 4 find them.

# %%
source = sources.resolve_source(DATA_SOURCE, num_images=NUM_IMAGES, seed=SEED)
print(source.describe())
output_dir = OUTPUT_DIR or shard_cache.default_output_dir(
    source, target_size=TARGET_SIZE, num_shards=NUM_SHARDS
)
print("Shards will go to:", output_dir)

# %% [markdown]
# ## 1. One size, then JPEG again (given)
#
# A batch is one tensor, so its images must share a size: each image's centre square, as
# wide as its shorter side, resized (the figure below). The square is then stored as JPEG
# again, at `JPEG_QUALITY`, not as raw pixels. Read these two functions; the conversion
# below runs them on every image.


# %% tags=["save"]
def resize_and_crop(image, target_size):
    """Crops the centre square of `image`, then resizes it to `target_size` x `target_size`."""
    side = tf.reduce_min(tf.shape(image)[:2])
    square = tf.image.resize_with_crop_or_pad(image, side, side)  # Crops: side fits.
    resized = tf.image.resize(square, [target_size, target_size], antialias=True)
    return tf.saturate_cast(tf.round(resized), tf.uint8)


def recompress(image, quality):
    """Encodes a uint8 image as JPEG at `quality`; returns a scalar string tensor."""
    return tf.io.encode_jpeg(image, quality=quality, optimize_size=True)


# %%
figure = recompression.show_resized(source, resize_and_crop, target_size=TARGET_SIZE)

# %% [markdown]
# What do they buy, and what do they cost? On `NUM_SAMPLE` images from every class: the
# bytes per image before and after, the originals recompressed at their own size (to tell
# the resizing from the encoding), the PSNR of the result (higher: more detail
# kept), and the decoding speed, timed in turns (one image per call of a parallel `map()`,
# on all cores); the plot, at several qualities.

# %%
measured = recompression.measure_recompression(
    source,
    resize_and_crop,
    recompress,
    target_size=TARGET_SIZE,
    quality=JPEG_QUALITY,
    num_sample=NUM_SAMPLE,
    num_timed_images=DECODE_TIMED_IMAGES,
    repeats=DECODE_REPEATS,
)

# %% [markdown]
# The lines above say how much of the saving comes from recompressing alone and how much
# from resizing, and how much faster the smaller images decode; the cost is the detail the
# PSNR measures.
#
# ## 2. One record per image (TODO 1)
#
# A TFRecord file holds records, each here a `tf.train.Example`: a map from feature names
# to lists of one of three kinds (`bytes_list`, `int64_list`, `float_list`). One image's
# features, which lab 3 parses back:

# %%
for name, meaning in records.SCHEMA.items():
    print(f"{name:>14}: {meaning}")

# %% [markdown]
# **TODO 1.** Complete `to_example(image_jpeg, class_index, original_size, class_names)`:
# the `tf.train.Example` of one image, with the five features above, each of its kind.
# A feature is a `tf.train.Feature` holding one list, `tf.train.BytesList`,
# `tf.train.Int64List` or `tf.train.FloatList`, made with `value=[...]` (text goes in as
# bytes: `str.encode()`); the Example takes them in `tf.train.Features`.


# %% tags=["save"]
def to_example(image_jpeg, class_index, original_size, class_names):
    """Returns the tf.train.Example of one image (fields as in records.SCHEMA)."""
    # TODO 1: build the five features and the Example.
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
checks.check_to_example(to_example, todo=1, class_names=source.class_names)

# %%
# A record of a grey image, 300 x 400 pixels before resizing, of the last class.
grey = tf.fill([300, 400, 3], tf.constant(128, tf.uint8))
image_jpeg = recompress(resize_and_crop(grey, TARGET_SIZE), JPEG_QUALITY).numpy()
example = to_example(image_jpeg, len(source.class_names) - 1, [300, 400], source.class_names)
print(report.describe_example(example))

# %% [markdown]
# ## 3. Write a shard, safely (TODO 2)
#
# `tf.io.TFRecordWriter(path)` writes records into one file. A shard's name holds its
# record count (`flowers00-230.tfrec`), known only at the end, and a run can stop half way
# (a crash, a full disk): a file must get its final name only once it is complete.
#
# **TODO 2.** Complete `write_shard(serialized_examples, output_dir, index)`: every record
# written to `shard_files.temporary_path(output_dir, index)`, then the file given its final
# name, `shard_files.shard_name(index, num_records)` in `output_dir`, with
# `tf.io.gfile.rename(..., overwrite=True)` so that it replaces any shard of that name;
# return its path.


# %% tags=["save"]
def write_shard(serialized_examples, output_dir, index):
    """Writes the records to shard `index` in `output_dir`; returns the shard's path."""
    # TODO 2: write under the temporary name, then rename to the final name.
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
checks.check_write_shard(write_shard, todo=2)

# %% [markdown]
# ## Write every shard
#
# `conversion.convert()` runs your functions over every image: shuffled once (each shard
# mixes the classes), decoded in a parallel `map()`, split into `NUM_SHARDS` shards. An
# image that cannot be decoded is skipped and listed. How many shards? TensorFlow's
# TFRecord guide says "at least 10 times as many files as there will be hosts reading
# data", each "at least 10 MB+ and ideally 100 MB+"
# (tensorflow.org/tutorials/load_data/tfrecord). One host reads many shards at once here
# (lab 3), so a small dataset gives shards under that size (printed below).

# %%
steps = conversion.ConversionSteps(resize_and_crop, recompress, to_example, write_shard)
converted = conversion.convert(
    source,
    output_dir,
    target_size=TARGET_SIZE,
    num_shards=NUM_SHARDS,
    jpeg_quality=JPEG_QUALITY,
    seed=SEED,
    steps=steps,
)

# %% [markdown]
# ## Check that nothing was lost
#
# `validation.validate()` reads every shard back: every record parsed and decoded, each
# shard's count against its name, and records written plus images skipped against the
# input images.

# %%
# NBVAL_CHECK_OUTPUT
validated = validation.validate(output_dir, verbose=False)
print(report.describe_shards(validated))

# %% [markdown]
# ## What you measured

# %% tags=["summary"]
print(report.describe_lab(measured, converted, validated))

# %% [markdown]
# **Takeaway.** Resized and recompressed, each image takes a fraction of its bytes, at a
# PSNR printed above; the dataset is now `NUM_SHARDS` files instead of thousands. A shard
# gets its final name only when complete, and reading every record back proves that
# nothing was lost. Lab 3 reads these shards many at a time.
#
# *Changed from the original course:* the original size is stored, shards are written
# safely, every record is validated (docs/lessons.md).
