"""What crosses from a learner's kernel to the judge: plain data, never code or pickles.

`encode` turns a value into JSON-ready data; `decode` turns it back. Only these cross:
None, bools, numbers, strings, bytes, `...`, tuples, lists, dicts with string keys,
arrays (numeric, bool or bytes; a tensor crosses as its array), dtypes, `TensorSpec`s,
`tf.train.Example`s (as their serialized bytes), `tf.io.FixedLenFeature` and
`VarLenFeature`, and `tf.distribute.InputContext`s.
Anything else raises `WireError`, naming its type. Arrays are read with
`allow_pickle=False`, so decoding data a learner's process sent runs none of its code.

It is part of the grader's kernel side (`tools/grading/kernel/inside/`): the learner's
kernel imports it, and so does the judge. Standard library, numpy and TensorFlow only.
"""

import base64
import io
import json

import numpy as np
import tensorflow as tf


class WireError(TypeError):
    """A value that does not cross to the judge (not plain data)."""


def _is_device(value) -> bool:
    """A JAX device (`jax.devices()`) or `tf.config.LogicalDevice`: a device, named."""
    jax_device = type(value).__name__ in ("Device", "CpuDevice", "GpuDevice", "TpuDevice")
    if jax_device and hasattr(value, "platform") and hasattr(value, "id"):
        return True
    return isinstance(value, tf.config.LogicalDevice)


def _device_name(device) -> str:
    """Keras's name of a device, as lab 4's check reads one: "cpu:0", "tpu:3"."""
    if hasattr(device, "platform") and hasattr(device, "id"):
        return f"{device.platform}:{device.id}"
    return ":".join(device.name.rsplit("/", 1)[-1].lower().split(":")[-2:])


def encode(value):
    """Returns `value` as JSON-ready data; raises `WireError` for anything else."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"v": value}
    if value is Ellipsis:
        return {"ellipsis": True}
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode()}
    if isinstance(value, tf.io.FixedLenFeature):
        return {
            "fixed_len_feature": [
                encode(list(value.shape)),
                value.dtype.name,
                encode(value.default_value),
            ]
        }
    if isinstance(value, tf.io.VarLenFeature):
        return {"var_len_feature": value.dtype.name}
    if type(value) in (tuple, list):
        return {type(value).__name__: [encode(item) for item in value]}
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {"dict": {key: encode(item) for key, item in value.items()}}
    if isinstance(value, tf.TensorSpec):
        return {
            "spec": [
                value.shape.as_list() if value.shape.rank is not None else None,
                value.dtype.name,
            ]
        }
    if isinstance(value, tf.dtypes.DType):
        return {"dtype": value.name}
    if isinstance(value, tf.train.Example):
        return {"example": base64.b64encode(value.SerializeToString()).decode()}
    if isinstance(value, tf.distribute.InputContext):
        return {
            "input_context": [
                value.num_input_pipelines,
                value.input_pipeline_id,
                value.num_replicas_in_sync,
            ]
        }
    if _is_device(value):  # A JAX device or TF's logical one: its Keras name ("cpu:0").
        return {"v": _device_name(value)}
    if tf.is_tensor(value) and hasattr(value, "numpy"):
        value = value.numpy()
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype.kind in "OSU":  # Strings: each as bytes.
            items = [
                item if isinstance(item, bytes) else str(item).encode()
                for item in array.reshape(-1).tolist()
            ]
            return {
                "strings": [base64.b64encode(item).decode() for item in items],
                "shape": list(array.shape),
            }
        if array.dtype.kind not in "biuf":
            raise WireError(f"an array of {array.dtype} does not cross to the judge")
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        return {"array": base64.b64encode(buffer.getvalue()).decode()}
    raise WireError(f"a {type(value).__name__} does not cross to the judge")


def decode(data):
    """Returns the value `encode` made `data` from; raises `WireError` on anything else."""
    if not isinstance(data, dict) or len(data) not in (1, 2):
        raise WireError(f"not wire data: {str(data)[:80]}")
    if "v" in data and isinstance(data["v"], (type(None), bool, int, float, str)):
        return data["v"]
    if "ellipsis" in data:
        return Ellipsis
    if "bytes" in data:
        return base64.b64decode(data["bytes"])
    if "tuple" in data:
        return tuple(decode(item) for item in data["tuple"])
    if "list" in data:
        return [decode(item) for item in data["list"]]
    if "dict" in data:
        return {str(key): decode(item) for key, item in data["dict"].items()}
    if "spec" in data:
        shape, dtype = data["spec"]
        return tf.TensorSpec(shape, tf.dtypes.as_dtype(str(dtype)))
    if "dtype" in data:
        return tf.dtypes.as_dtype(str(data["dtype"]))
    if "fixed_len_feature" in data:
        shape, dtype, default = data["fixed_len_feature"]
        return tf.io.FixedLenFeature(decode(shape), tf.dtypes.as_dtype(str(dtype)), decode(default))
    if "var_len_feature" in data:
        return tf.io.VarLenFeature(tf.dtypes.as_dtype(str(data["var_len_feature"])))
    if "example" in data:
        return tf.train.Example.FromString(base64.b64decode(data["example"]))
    if "input_context" in data:
        pipelines, index, replicas = (int(n) for n in data["input_context"])
        return tf.distribute.InputContext(pipelines, index, replicas)
    if "strings" in data:
        items = [base64.b64decode(item) for item in data["strings"]]
        return np.array(items, dtype=object).reshape([int(n) for n in data["shape"]])
    if "array" in data:
        return np.load(io.BytesIO(base64.b64decode(data["array"])), allow_pickle=False)
    raise WireError(f"not wire data: {str(data)[:80]}")


def dumps(value) -> bytes:
    """`value` (already JSON-ready) as the bytes of one message."""
    return json.dumps(value).encode()


def loads(message: bytes):
    """One message's JSON, parsed (no code runs)."""
    return json.loads(message.decode())
