from . import WrongAnswer

WRONG = WrongAnswer(
    "03_timing", "time_fn",
    "def time_fn(fn, device, warmup=3, repeats=10):\n"
    "    for _ in range(warmup):\n"
    "        fn()\n"
    "    times = []\n"
    "    for _ in range(repeats):\n"
    "        start = time.perf_counter()\n"
    "        fn()\n"
    "        times.append(time.perf_counter() - start)\n"
    "    return statistics.median(times)\n",
    "never synchronises cuda")
