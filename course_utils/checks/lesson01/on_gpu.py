"""on_gpu: the learner's predictions of which lines leave data on the GPU, one point-share each.

The visible lines a-d are explained in the package; the answers to the hidden lines e-h are
read from the instructor's solutions/ when grading and ship nowhere else.
"""
from __future__ import annotations

from ...probe import describe
from ..answer_keys import solution_value
from ..framework import a, case, check, expect_type, fail

LINES = "abcdefgh"
VISIBLE = {"a": False, "b": True, "c": False, "d": True}
WHY = {  # the visible lines: why the answer is what it is
    "a": "`x.to(device)` returns a new tensor on the GPU and leaves `x` where it was; that new "
         "tensor was thrown away. This is the classic bug: write `x = x.to(device)`.",
    "b": "`Module.to()` moves the module's parameters in place (and returns the same module), "
         "so the model is on the GPU although the result was not assigned.",
    "c": "the GPU copy is called `y`; `.to()` never changes the tensor it is called on, so `x` "
         "is where it was.",
    "d": "`device=` creates the tensor directly on the GPU: no CPU tensor, no copy.",
}
HINTS = {  # the hidden lines: a nudge that does not give the answer away
    "e": "ask where an operation puts its result when its inputs are on one device.",
    "f": "ask whether changing a tensor's dtype also changes its device.",
    "g": "ask what type of object `.item()` returns.",
    "h": "ask what `.cuda()` does and what the assignment does with its result.",
}


def make_inputs(seed: int, hidden: bool) -> dict:
    return {"lines": list(LINES if hidden else LINES[:4])}  # the hidden part decides the score


def probe(on_gpu, inputs):
    """Describe the learner's predictions; any mapping (an OrderedDict, a defaultdict) as the
    dict of its entries: they answer the same question."""
    from collections.abc import Mapping

    return describe(dict(on_gpu) if isinstance(on_gpu, Mapping) else on_gpu)


@check(success=lambda inputs: f"Your predictions for lines {', '.join(inputs['lines'])} are "
                              "right.", make_inputs=make_inputs, probe=probe)
def check_on_gpu(inputs, observations, hidden):
    expect_type(observations, "dict", "on_gpu",
                'write `on_gpu = {"a": True, "b": False, ...}` with one entry per line a to h.')
    answers = observations["items"]
    if sorted(answers) != list(LINES):
        missing, extra = sorted(set(LINES) - set(answers)), sorted(set(answers) - set(LINES))
        fail(f"on_gpu should have the keys 'a' to 'h'; missing {missing}, unexpected {extra}.",
             "use the lowercase line labels as keys, one entry per line.")
    if all(answers[line]["type"] == "NoneType" for line in inputs["lines"]):
        fail(f"on_gpu is not answered yet: lines {', '.join(inputs['lines'])} are None.",
             "replace each None with True or False.")
    expected = solution_value("01_tensors_devices", "on_gpu", "on_gpu") if hidden else VISIBLE
    for line in inputs["lines"]:
        with case(f"line {line}"):
            answer = answers[line]
            if answer["type"] == "NoneType":
                fail(f"Line {line} is not answered yet (None).",
                     f"replace None with True or False for line {line}.")
            if answer["type"] != "bool":
                fail(f"on_gpu[{line!r}] is {a(answer['type'])}, not True or False.",
                     "answer each line with the bool True or False (no quotes).")
            if answer["value"] != expected[line]:
                if line in HINTS:
                    fail(f"Your prediction for line {line} is not right.", HINTS[line])
                fail(f"Your prediction for line {line} is not right: {WHY[line]}",
                     f"change on_gpu[{line!r}] and re-read the rule for that line.")
