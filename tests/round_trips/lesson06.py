from . import WrongAnswer

WRONG = WrongAnswer(
    "06_mixed_precision", "amp_step",
    "def amp_step(model, features, labels, loss_fn, optimizer, scaler, dtype, max_norm):\n"
    "    optimizer.zero_grad()\n"
    "    with torch.autocast(features.device.type, dtype=dtype):\n"
    "        loss = loss_fn(model(features), labels)\n"
    "    scaler.scale(loss).backward()\n"
    "    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n"
    "    scaler.step(optimizer)\n"
    "    scaler.update()\n"
    "    return loss.item()\n",
    "call scaler.unscale_(optimizer) before clip_grad_norm_")
