"""score()'s values on the trusted side: the original's, and what a learner's differing values
show about what their score() did (the dimension its softmax ran over, the scale it used)."""
from __future__ import annotations


def expected_scores(inputs: dict) -> list:
    """(the original's scores, the raw scores, their largest magnitude) per batch, float64."""
    import torch

    weight, out = torch.tensor(inputs["weight"], dtype=torch.float64), []
    for scores in (torch.tensor(x, dtype=torch.float64) @ weight for x in inputs["batches"]):
        largest = scores.abs().max().item()
        out.append(((scores * (10 / max(largest, 10))).softmax(-1), scores, largest))
    return out


def what_differs(values, scores, largest: float) -> str:
    """The first sentence for score() values that differ from the original's: what the values
    show, where they show it, else where the batch lies against the threshold 10."""
    import torch

    what = f"score() on a batch of {len(scores)} whose largest |score| is {largest:.2f}"
    ones = torch.ones((), dtype=torch.float64)
    if not torch.allclose(values.sum(-1), ones, atol=1e-4):
        if torch.allclose(values.sum(0), ones, atol=1e-4):
            return (f"{what} returned columns that each sum to 1: its softmax ran over dim 0 "
                    "(the batch), not over dim=-1 (the classes of each row).")
        return f"{what} returned rows that do not sum to 1: no softmax over dim=-1."
    # softmax(c * s) in a row: log p_i - log p_j = c * (s_i - s_j), so the scale c shows
    top, low = int(scores[0].argmax()), int(scores[0].argmin())
    logs = values[0].clamp_min(1e-300).log()
    scale = ((logs[top] - logs[low]) / (scores[0, top] - scores[0, low])).item()
    if scale > 0 and abs(scale - 10 / max(largest, 10)) > 1e-3 and abs(scale - 1) > 1e-3:
        smallest = scores.abs().min().item()
        named = " (the smallest |score|, a min where the max belongs)" if abs(
            10 / scale - smallest) < 1e-3 * max(smallest, 1e-3) else ""
        return (f"{what} scaled the scores by 10 / {10 / scale:.4g}{named}: the original "
                "scales by 10 / the largest |score| only when it exceeds 10.")
    if largest > 10 and abs(scale - 1) < 1e-3:
        return (f"{what}, over the threshold 10, left these scores unscaled: what it compared "
                "with 10 was not this batch's largest |score|.")
    return (f"{what}, {'just ' * (abs(largest - 10) < 1)}{'over' if largest > 10 else 'under'} "
            "the threshold 10, differs from the original's values (which " + (
                "scale these scores by 10 / largest)." if largest > 10 else
                "leave them as they are)."))
