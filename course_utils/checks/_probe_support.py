"""Helpers that probes may call by name.

The grader sends this module's source to the student's kernel ahead of a probe,
so everything here must be self-contained: plain Python and torch, imports inside.
"""


def type_name(value):
    """The name of a value's type, e.g. 'Tensor', 'Linear', 'NoneType'."""
    return type(value).__name__


def error_text(error):
    """How a probe reports an exception: 'TypeError: message'."""
    return f"{type(error).__name__}: {error}"


def seeded_mlp(sizes, generator, device, dropout=None, scale=1.0):
    """Linear-ReLU-[Dropout]-Linear with weights drawn from ``generator``, never the global RNG.

    On the 'meta' device the model holds no values (probes use it as a stand-in for a GPU).
    """
    import torch

    n_in, hidden, n_out = sizes
    layers = [torch.nn.Linear(n_in, hidden, device="meta"), torch.nn.ReLU()]
    if dropout is not None:
        layers.append(torch.nn.Dropout(dropout))
    layers.append(torch.nn.Linear(hidden, n_out, device="meta"))
    model = torch.nn.Sequential(*layers)
    if str(device) != "meta":
        model.to_empty(device=device)
        with torch.no_grad():
            for param in model.parameters():
                param.copy_(torch.randn(param.shape, generator=generator) * scale)
    return model


def describe(value, max_values=64):
    """Plain, JSON-able facts about a value: type, then shape/dtype/device, then values."""
    import torch

    facts = {"type": type_name(value)}
    if isinstance(value, torch.Tensor):
        facts.update(
            shape=list(value.shape),
            dtype=str(value.dtype).replace("torch.", ""),
            device=str(value.device),
            requires_grad=bool(value.requires_grad),
            has_grad_fn=value.grad_fn is not None,
        )
        if value.device.type != "meta" and value.numel() <= max_values:
            facts["values"] = value.detach().to("cpu", torch.float64).flatten().tolist()
    elif isinstance(value, torch.nn.Module):
        params = list(value.parameters())
        facts.update(
            device=str(params[0].device) if params else None,
            devices=sorted({str(p.device) for p in params}),
            training=bool(value.training),
        )
    elif isinstance(value, torch.device):
        facts.update(device_type=value.type, index=value.index, text=str(value))
    elif isinstance(value, (bool, int, float, str)) or value is None:
        facts["value"] = value
    elif isinstance(value, (list, tuple)):
        facts["items"] = [describe(item, max_values) for item in value]
    elif isinstance(value, dict):
        facts["items"] = {str(key): describe(item, max_values) for key, item in value.items()}
    return facts


class patched:
    """Context manager: set attributes for the duration of a probe, then restore them.

    ``with patched([(torch.cuda, "is_available", lambda: False)]):``
    """

    def __init__(self, replacements):
        self.replacements = replacements
        self.saved = []

    def __enter__(self):
        for owner, name, replacement in self.replacements:
            self.saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, replacement)
        return self

    def __exit__(self, *exc_info):
        for owner, name, original in reversed(self.saved):
            setattr(owner, name, original)
        self.saved.clear()
        return False
