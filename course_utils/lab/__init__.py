"""What learners import: devices (and backends, what each type of device can do), data, timing,
the matmul sweep, report, the input pipeline, memory, precision, training, plots, errors,
overhead and distributed training (docs/architecture.md).

May import :mod:`course_utils.probe` and :mod:`course_utils.paths`; never the checks, the
grader or the commands.
"""
import logging


class _NoCudaRuntimeNote(logging.Filter):
    """Drops torch.utils.cpp_extension's "No CUDA runtime is found, using CUDA_HOME=..." warning.

    PyPI's Linux torch is a CUDA build; on a machine with a CUDA toolkit (nvcc on the PATH or
    /usr/local/cuda) and no GPU, importing torch.utils.benchmark (which loads cpp_extension
    for its Valgrind tools) logs it on stderr, in every lesson's first cell. The course builds
    no CUDA extension, so the note only alarms learners. It works only when installed before
    cpp_extension is first imported: hence every lesson imports the course's helpers before
    torch's (docs/authoring.md; tests/test_hygiene.py holds the lessons to it).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("No CUDA runtime is found")


logging.getLogger("torch.utils.cpp_extension").addFilter(_NoCudaRuntimeNote())
