"""Lab 6's Beam TODOs: the learner's `DoFn` and pipeline, run here on the judge's files.

For `dofn_process` and `beam_build` the judge's input files are written at the judge's own
paths (in this sandbox's private /tmp), the learner's `DoFn` or pipeline runs here on
them, and its outputs go back as data: each output, or the files the pipeline wrote. The
judge checks those (`tools/grading/judge/remote_beam.py`); no Python of the learner's runs
in the judge. Beam is imported only when the judge asks.
"""

import base64
import os
import tempfile

from tools.grading.kernel.inside import wire


def _write_files(files):
    """Writes the judge's files at the judge's own paths, in this sandbox's private /tmp."""
    for path, content in files.items():
        if not os.path.abspath(path).startswith(("/tmp/", tempfile.gettempdir() + os.sep)):
            raise ValueError(f"the judge's file is not a temporary one: {path}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as file:
            file.write(base64.b64decode(content))


def _output(output):
    import apache_beam as beam

    if isinstance(output, beam.pvalue.TaggedOutput):
        return {"tagged": [str(output.tag), _output(output.value)]}
    try:
        return {"value": wire.encode(output)}
    except TypeError:  # Said by its type's name only.
        return {"type": type(output).__name__}


def dofn_process(request, dofn_class):
    """`dofn_class().process(path)` on the judge's file: each output, or what it returned."""
    import apache_beam as beam

    _write_files(request["files"])
    returned = dofn_class().process(request["path"])
    single = (bytes, str, beam.pvalue.TaggedOutput, type(None))
    if isinstance(returned, single) or not hasattr(returned, "__iter__"):
        return {"returned": _output(returned)}
    return {"items": [_output(output) for output in returned]}


def beam_build(request, build):
    """Runs `build(pipeline, source, output_dir, num_shards)` on the judge's files, on Beam's
    DirectRunner here; returns the files it wrote into `output_dir`."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from utils.lab import sources

    _write_files(request["files"])
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
