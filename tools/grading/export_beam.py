"""The learner's kernel's answers for lab 6's Beam TODOs: a `DoFn` and a pipeline, run here.

Sent as text into the kernel after `export_objects.py` (rules as for `export_values.py`;
Beam is imported only when the judge asks). A `DoFn` class is described as one; for
`dofn_process` and `beam_build` the judge's input files are written at the judge's own
paths (in this sandbox's private /tmp), the learner's `DoFn` or pipeline runs here on
them, and its outputs go back as data: each output, or the files the pipeline wrote. The
judge checks those (`remote_beam.py`); no Python of the learner's runs in the judge.
"""

_grader_describe_data = _grader_describe  # noqa: F821 (export_values.py)


def _grader_describe(wire, value, namespace):
    """A Beam `DoFn` class is described as one (the judge asks `dofn_process`); else as before."""
    if isinstance(value, type) and any(kind.__name__ == "DoFn" for kind in value.__mro__[1:]):
        return {"kind": "dofn"}
    return _grader_describe_data(wire, value, namespace)


def _grader_write_files(files):
    """Writes the judge's files at the judge's own paths, in this sandbox's private /tmp."""
    import base64
    import os
    import tempfile

    for path, content in files.items():
        if not os.path.abspath(path).startswith(("/tmp/", tempfile.gettempdir() + os.sep)):
            raise ValueError(f"the judge's file is not a temporary one: {path}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as file:
            file.write(base64.b64decode(content))


def _grader_output(wire, output):
    import apache_beam as beam

    if isinstance(output, beam.pvalue.TaggedOutput):
        return {"tagged": [str(output.tag), _grader_output(wire, output.value)]}
    try:
        return {"value": wire.encode(output)}
    except TypeError:  # Said by its type's name only.
        return {"type": type(output).__name__}


def _grader_dofn_process(wire, request, dofn_class):
    """`dofn_class().process(path)` on the judge's file: each output, or what it returned."""
    import apache_beam as beam

    _grader_write_files(request["files"])
    returned = dofn_class().process(request["path"])
    single = (bytes, str, beam.pvalue.TaggedOutput, type(None))
    if isinstance(returned, single) or not hasattr(returned, "__iter__"):
        return {"returned": _grader_output(wire, returned)}
    return {"items": [_grader_output(wire, output) for output in returned]}


def _grader_beam_build(wire, request, build):
    """Runs `build(pipeline, source, output_dir, num_shards)` on the judge's files, on Beam's
    DirectRunner here; returns the files it wrote into `output_dir`."""
    import base64
    import os

    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from utils.lab import sources

    _grader_write_files(request["files"])
    source, output_dir = sources.resolve_source(request["root"]), request["output_dir"]
    with beam.Pipeline(options=PipelineOptions(["--runner=DirectRunner"])) as pipeline:
        build(pipeline, source, output_dir, int(request["num_shards"]))
    names = sorted(os.listdir(output_dir)) if os.path.isdir(output_dir) else []
    paths = [os.path.join(output_dir, name) for name in names]
    return {
        os.path.basename(path): base64.b64encode(open(path, "rb").read()).decode()
        for path in paths
        if os.path.isfile(path)
    }


_grader_more_ops["dofn_process"] = _grader_dofn_process  # noqa: F821 (export_calls.py)
_grader_more_ops["beam_build"] = _grader_beam_build  # noqa: F821
