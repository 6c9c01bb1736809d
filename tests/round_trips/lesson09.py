from . import WrongAnswer

WRONG = WrongAnswer(
    "09_sharding", "predict_memory_per_rank",
    "def predict_memory_per_rank(param_count, world, strategy, bytes_per_value=4):\n"
    "    sharded = {'ddp': (), 'zero1': ('optimizer',), 'zero2': ('gradients', 'optimizer'),\n"
    "               'fsdp': ('parameters', 'gradients', 'optimizer')}\n"
    "    if strategy not in sharded:\n"
    "        raise ValueError(strategy)\n"
    "    whole = {part: param_count * bytes_per_value for part in sharded['fsdp']}\n"
    "    return {part: size / world if part in sharded[strategy] else size\n"
    "            for part, size in whole.items()}\n",
    "AdamW keeps two")
