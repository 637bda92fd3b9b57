"""`tf.train.Example`'s messages without TensorFlow: what a JAX process parses records with.

The same field numbers as TensorFlow's `example.proto` and `feature.proto`, so the same
bytes parse to the same values; built in a pool of their own (package `course_example`),
so they never clash with TensorFlow's classes where both are loaded. Grain's worker
processes then start without importing TensorFlow (about 0.7 GB and seconds per worker).
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_FIELD = descriptor_pb2.FieldDescriptorProto


def _message(file, name: str, fields: list[tuple]) -> descriptor_pb2.DescriptorProto:
    message = file.message_type.add(name=name)
    for field_name, number, kind, label, type_name in fields:
        field = message.field.add(name=field_name, number=number, type=kind, label=label)
        if type_name:
            field.type_name = type_name
        if kind in (_FIELD.TYPE_FLOAT, _FIELD.TYPE_INT64) and label == _FIELD.LABEL_REPEATED:
            field.options.packed = True
    return message


def _example_class():
    file = descriptor_pb2.FileDescriptorProto(
        name="course_example/example.proto", package="course_example", syntax="proto3"
    )
    repeated, optional = _FIELD.LABEL_REPEATED, _FIELD.LABEL_OPTIONAL
    for name, kind in (
        ("BytesList", _FIELD.TYPE_BYTES),
        ("FloatList", _FIELD.TYPE_FLOAT),
        ("Int64List", _FIELD.TYPE_INT64),
    ):
        _message(file, name, [("value", 1, kind, repeated, None)])
    feature = _message(
        file,
        "Feature",
        [
            (name, number, _FIELD.TYPE_MESSAGE, optional, f".course_example.{kind}")
            for number, (name, kind) in enumerate(
                [
                    ("bytes_list", "BytesList"),
                    ("float_list", "FloatList"),
                    ("int64_list", "Int64List"),
                ],
                start=1,
            )
        ],
    )
    feature.oneof_decl.add(name="kind")
    for field in feature.field:
        field.oneof_index = 0
    features = _message(
        file,
        "Features",
        [("feature", 1, _FIELD.TYPE_MESSAGE, repeated, ".course_example.Features.FeatureEntry")],
    )
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=_FIELD.TYPE_STRING, label=optional)
    entry.field.add(
        name="value",
        number=2,
        type=_FIELD.TYPE_MESSAGE,
        label=optional,
        type_name=".course_example.Feature",
    )
    _message(
        file,
        "Example",
        [("features", 1, _FIELD.TYPE_MESSAGE, optional, ".course_example.Features")],
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("course_example.Example"))


Example = _example_class()
