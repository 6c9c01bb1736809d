from . import WrongAnswer

WRONG = WrongAnswer(
    "07_multi_gpu", "accumulation_step",
    "def accumulation_step(ddp_model, micro_batches, loss_fn, optimizer):\n"
    "    optimizer.zero_grad()\n"
    "    for features, labels in micro_batches:\n"
    "        loss = loss_fn(ddp_model(features), labels) / len(micro_batches)\n"
    "        loss.backward()\n"
    "    optimizer.step()\n",
    "inside `with ddp_model.no_sync():`")
