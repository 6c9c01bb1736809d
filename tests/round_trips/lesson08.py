from . import WrongAnswer

WRONG = WrongAnswer(
    "08_overhead", "train_without_syncs",
    "def train_without_syncs(model, batches, loss_fn, optimizer):\n"
    "    total = 0.0\n"
    "    for features, labels in batches:\n"
    "        optimizer.zero_grad()\n"
    "        loss = loss_fn(model(features), labels)\n"
    "        loss.backward()\n"
    "        optimizer.step()\n"
    "        total += loss.item()\n"
    "    return total / len(batches)\n",
    "call .item() once, after the loop")
