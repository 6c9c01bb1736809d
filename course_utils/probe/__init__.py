"""The kernel side: the pieces every probe is built from (see docs/architecture.md).

A probe runs in the student's kernel, calls the learner's answer on the checker's inputs and
reports plain, JSON-able facts. The grader sends this package's source (:func:`bundle.source`),
then the probe's, so everything here is self-contained: plain Python and torch, imports inside
functions, no module-level state, and no import of any other part of ``course_utils``.
"""
from .collectives import marked_world
from .facts import (
    ErrorFacts,
    LearnerRun,
    LineFacts,
    NotSimulated,
    StopProbe,
    describe,
    describe_error,
    error_facts,
    learner_line,
    run_learner,
    type_name,
    whole_number,
)
from .instruments import (
    ForwardRecorder,
    Spy,
    StopAfter,
    TrackedBatches,
    loss_watch,
    meta_generators,
    meta_recorder,
    meta_stand_in,
    patched,
    track_moves,
)
from .models import build_mlp, optimizer_state_values, parameter_values
from .portable import portable_answers
from .simulated_clock import SimulatedClock
from .simulated_machine import SimulatedMachine
from .structures import build_structure, fingerprint, observe_structure
from .syncs import HOST_READS, DeviceJudge, HostRead, host_read_counter, read_by

__all__ = [
    "HOST_READS",
    "DeviceJudge",
    "ErrorFacts",
    "ForwardRecorder",
    "HostRead",
    "LearnerRun",
    "LineFacts",
    "NotSimulated",
    "SimulatedClock",
    "SimulatedMachine",
    "Spy",
    "StopAfter",
    "StopProbe",
    "TrackedBatches",
    "build_mlp",
    "build_structure",
    "describe",
    "describe_error",
    "error_facts",
    "fingerprint",
    "host_read_counter",
    "learner_line",
    "loss_watch",
    "marked_world",
    "meta_generators",
    "meta_recorder",
    "meta_stand_in",
    "observe_structure",
    "optimizer_state_values",
    "parameter_values",
    "patched",
    "portable_answers",
    "read_by",
    "run_learner",
    "track_moves",
    "type_name",
    "whole_number",
]
