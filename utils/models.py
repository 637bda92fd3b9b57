"""The course's small image classifier: a convnet that learns the embedded flowers."""

from __future__ import annotations

import keras


def small_convnet(image_size: int, num_classes: int) -> keras.Model:
    """Returns an uncompiled convnet for uint8 images of (image_size, image_size, 3).

    Three blocks of convolution, batch normalization and pooling, then global average
    pooling and a softmax. The softmax is computed in float32 whatever the precision
    policy, so that mixed precision (bfloat16 on TPU, float16 on GPU) keeps a stable loss.

    Batch normalization takes its statistics over the global batch on every backend. On
    JAX the batch is one sharded array, so it does already; on TensorFlow each replica
    of a strategy would keep its own moving mean and variance (`synchronized=False`, the
    default), and the model saved (their average) would then predict differently from
    the one trained: on 8 replicas "Reloaded predictions match: False", a difference of
    0.15 in lab 4 (tensorflow/tensorflow#46488). `synchronized=True` all-reduces them.

    Args:
        image_size: side of the square input images, in pixels.
        num_classes: number of outputs.

    Returns:
        A `keras.Model` from uint8 images (batch, image_size, image_size, 3) to float32
        class probabilities (batch, num_classes).

    Example:
        with choice.strategy.scope():
            model = models.small_convnet(96, 5)
    """
    synchronized = keras.backend.backend() == "tensorflow"  # Only TensorFlow takes it.
    inputs = keras.Input(shape=(image_size, image_size, 3), dtype="uint8", name="image")
    x = keras.layers.Rescaling(1 / 255)(inputs)
    for filters in (32, 64, 128):
        x = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
        # momentum=0.9: short trainings, adapt fast.
        x = keras.layers.BatchNormalization(momentum=0.9, synchronized=synchronized)(x)
        x = keras.layers.Activation("relu")(x)
        x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dropout(0.2)(x)
    logits = keras.layers.Dense(num_classes)(x)
    outputs = keras.layers.Activation("softmax", dtype="float32", name="probabilities")(logits)
    return keras.Model(inputs, outputs, name="flowers_convnet")
