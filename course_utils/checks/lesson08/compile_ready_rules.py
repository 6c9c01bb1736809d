"""score()'s values on the trusted side: the original's, and what a learner's differing values
show about what their score() did (the dimension its softmax ran over, the scale it used, the
quantity it compared with the threshold)."""
from __future__ import annotations

# What a score() may compare with 10 (and divide by) where the original takes the largest
# |score|: each is tried against the scale every batch's values show.
QUANTITIES = {
    "the smallest |score| (amin, a min where the max belongs)": lambda s: s.abs().amin(),
    "the mean |score|": lambda s: s.abs().mean(),
    "the median |score|": lambda s: s.abs().median(),
    "the sum of |score|": lambda s: s.abs().sum(),
    "the largest score without abs() (a large negative score is missed)": lambda s: s.amax(),
    "each row's own largest |score| (amax over dim=-1, not over the batch)":
        lambda s: s.abs().amax(dim=-1),
}


def expected_scores(inputs: dict) -> list:
    """(the original's scores, the raw scores, their largest magnitude) per batch, float64."""
    import torch

    weight, out = torch.tensor(inputs["weight"], dtype=torch.float64), []
    for scores in (torch.tensor(x, dtype=torch.float64) @ weight for x in inputs["batches"]):
        largest = scores.abs().max().item()
        out.append(((scores * (10 / max(largest, 10))).softmax(-1), scores, largest))
    return out


def seen_scales(values, scores):
    """Per row, the factor c of softmax(c * scores) that the values show:
    log p_i - log p_j = c * (s_i - s_j) for the row's largest and smallest score."""
    top, low = scores.argmax(-1, keepdim=True), scores.argmin(-1, keepdim=True)
    logs = values.clamp_min(1e-300).log()
    return ((logs.gather(-1, top) - logs.gather(-1, low)) /
            (scores.gather(-1, top) - scores.gather(-1, low))).squeeze(-1)


def seen_scale(values, scores) -> float:
    """The scale the first row of values shows."""
    return seen_scales(values, scores)[0].item()


def compared_instead(seen: list) -> list[str]:
    """The QUANTITIES whose comparison with 10 gives the scale seen in every row of every
    batch, from (values, scores) pairs of softmax rows."""
    import torch

    def fits(quantity) -> bool:
        for values, scores in seen:
            q = quantity(scores).expand(len(scores))
            scale, want = seen_scales(values, scores), torch.where(q > 10, 10 / q, 1.0)
            if not torch.allclose(scale, want, rtol=1e-3, atol=1e-6):
                return False
        return True
    return [name for name, quantity in QUANTITIES.items() if fits(quantity)]


def what_differs(values, scores, largest: float, seen: list) -> str:
    """The first sentence for score() values that differ from the original's: what the values
    show, where they show it, else where the batch lies against the threshold 10; ``seen`` is
    every batch's (values, scores), to tell which quantity was compared with 10."""
    import torch

    what = f"score() on a batch of {len(scores)} whose largest |score| is {largest:.2f}"
    ones = torch.ones((), dtype=torch.float64)
    if not torch.allclose(values.sum(-1), ones, atol=1e-4):
        if torch.allclose(values.sum(0), ones, atol=1e-4):
            return (f"{what} returned columns that each sum to 1: its softmax ran over dim 0 "
                    "(the batch), not over dim=-1 (the classes of each row).")
        return f"{what} returned rows that do not sum to 1: no softmax over dim=-1."
    rows = [(v, s) for v, s in seen if torch.allclose(v.sum(-1), ones, atol=1e-4)]
    instead = compared_instead(rows)
    told = (f": on every batch its values are those of comparing {' or '.join(instead)} "
            "with 10, where the original compares the largest |score| (amax)") if instead else ""
    scale = seen_scale(values, scores)
    if scale > 0 and abs(scale - 10 / max(largest, 10)) > 1e-3 and abs(scale - 1) > 1e-3:
        return (f"{what} scaled the scores by 10 / {10 / scale:.4g}" + (told or (
            ": the original scales by 10 / the largest |score| only when it exceeds 10")) + ".")
    if largest > 10 and abs(scale - 1) < 1e-3:
        return (f"{what}, over the threshold 10, left these scores unscaled" + (told or (
            ": what it compared with 10 was not this batch's largest |score|")) + ".")
    return (f"{what}, {'just ' * (abs(largest - 10) < 1)}{'over' if largest > 10 else 'under'} "
            "the threshold 10, differs from the original's values (which " + (
                "scale these scores by 10 / largest)." if largest > 10 else
                "leave them as they are)."))
