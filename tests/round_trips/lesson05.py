from . import WrongAnswer

WRONG = WrongAnswer(
    "05_memory", "train_with_accumulation",
    "def train_with_accumulation(model, loss_fn, optimizer, micro_batches, accumulation_steps):\n"
    "    steps = 0\n"
    "    for i, (inputs, targets) in enumerate(micro_batches):\n"
    "        loss = loss_fn(model(inputs), targets) / accumulation_steps\n"
    "        loss.backward()\n"
    "        if (i + 1) % accumulation_steps == 0:\n"
    "            optimizer.step()\n"
    "            optimizer.zero_grad()\n"
    "            steps += 1\n"
    "    return steps\n",
    "never reached optimizer.step()")
