from . import WrongAnswer

WRONG = WrongAnswer(
    "02_training_loop", "train_one_epoch",
    "def train_one_epoch(model, loader, loss_fn, optimizer, device):\n"
    "    model.train()\n"
    "    total = 0.0\n"
    "    for features, labels in loader:\n"
    "        features, labels = features.to(device), labels.to(device)\n"
    "        loss = loss_fn(model(features), labels)\n"
    "        loss.backward()\n"
    "        optimizer.step()\n"
    "        total += loss.item()\n"
    "    return total / len(loader)\n",
    "without zero_grad, gradients accumulate")
