from . import WrongAnswer

WRONG = WrongAnswer(
    "04_input_pipeline", "find_bottleneck",
    "def find_bottleneck(loader, step, device):\n"
    "    loader_total, model_total, batches = 0.0, 0.0, 0\n"
    "    asked = time.perf_counter()\n"
    "    for batch in loader:\n"
    "        arrived = time.perf_counter()\n"
    "        step(batch)\n"
    "        finished = time.perf_counter()\n"
    "        loader_total += arrived - asked\n"
    "        model_total += finished - arrived\n"
    "        batches += 1\n"
    "        asked = time.perf_counter()\n"
    "    loader_seconds, model_seconds = loader_total / batches, model_total / batches\n"
    "    culprit = 'loader' if loader_seconds > model_seconds else 'model'\n"
    "    return culprit, loader_seconds, model_seconds\n",
    "it never waited for the device it was given")
