"""What learners import: devices, data, timing, the input pipeline, memory, precision, training,
plots, errors, overhead and distributed training (docs/architecture.md).

May import :mod:`course_utils.probe` and :mod:`course_utils.paths`; never the checks, the
grader or the commands.
"""
