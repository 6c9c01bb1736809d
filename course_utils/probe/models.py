"""A model from plain numbers, and its parameters and optimizer state back as numbers."""


def build_mlp(spec, device="cpu", dropout=None):
    """Linear-ReLU-[Dropout]-Linear with the weights given as plain lists in ``spec``.

    ``spec`` holds ``w1`` (hidden x in), ``b1``, ``w2`` (out x hidden), ``b2``. On the
    'meta' device the model has the shapes and no values (a stand-in for a GPU).
    """
    import torch

    hidden, n_in = len(spec["w1"]), len(spec["w1"][0])
    n_out = len(spec["w2"])
    layers = [torch.nn.Linear(n_in, hidden, device="meta"), torch.nn.ReLU()]
    if dropout is not None:
        layers.append(torch.nn.Dropout(dropout))
    layers.append(torch.nn.Linear(hidden, n_out, device="meta"))
    model = torch.nn.Sequential(*layers)
    if str(device) != "meta":
        model.to_empty(device=device)
        linears = [layer for layer in model if isinstance(layer, torch.nn.Linear)]
        with torch.no_grad():
            for layer, weight, bias in zip(linears, ("w1", "w2"), ("b1", "b2"), strict=True):
                layer.weight.copy_(torch.tensor(spec[weight]))
                layer.bias.copy_(torch.tensor(spec[bias]))
    return model


def parameter_values(module):
    """Every parameter's values as nested lists (float64), in ``parameters()`` order."""
    import torch

    return [p.detach().to("cpu", torch.float64).tolist() for p in module.parameters()]


def optimizer_state_values(optimizer):
    """Each parameter's optimizer state (e.g. Adam's step, exp_avg) as plain numbers, in order."""
    import torch

    return [{key: value.detach().to("cpu", torch.float64).tolist()
             for key, value in optimizer.state.get(param, {}).items()}
            for group in optimizer.param_groups for param in group["params"]]
