"""Right alternatives: imported from tests/checks/lesson00/test_gpu_inventory.py, and own."""
from __future__ import annotations

import torch

from ...checks.lesson00.test_gpu_inventory import gpu_inventory_other_apis


def gpu_inventory_comprehension():
    """Own: a comprehension over the properties, GiB as 1024**3."""
    props = [torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count())]
    return [{"index": i, "name": p.name, "memory_gib": p.total_memory / 1024**3,
             "capability": str(p.major) + "." + str(p.minor), "sm_count": p.multi_processor_count}
            for i, p in enumerate(props)]


def gpu_inventory_dict_builder():
    """Own: dict() with keywords, capability from get_device_capability."""
    inventory = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        major, minor = torch.cuda.get_device_capability(index)
        inventory.append({"index": index, "name": str(props.name),
                              "memory_gib": float(props.total_memory) / (1 << 30),
                              "capability": f"{major}.{minor}",
                              "sm_count": int(props.multi_processor_count)})
    return inventory


def gpu_inventory_while_loop():
    """Own: a while loop, the keys added one by one."""
    inventory, index, count = [], 0, torch.cuda.device_count()
    while index < count:
        props = torch.cuda.get_device_properties(f"cuda:{index}")
        entry = {}
        entry["index"] = index
        entry["name"] = props.name
        entry["memory_gib"] = props.total_memory / 2 ** 30
        entry["capability"] = ".".join(map(str, (props.major, props.minor)))
        entry["sm_count"] = props.multi_processor_count
        inventory.append(entry)
        index += 1
    return inventory


def gpu_inventory_guarded():
    """Own: asks is_available() first, then walks torch.device objects."""
    if not torch.cuda.is_available():
        return []
    devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    return [{"index": d.index, "name": torch.cuda.get_device_name(d),
             "memory_gib": torch.cuda.get_device_properties(d).total_memory / 2**30,
             "capability": "{}.{}".format(*torch.cuda.get_device_capability(d)),
             "sm_count": torch.cuda.get_device_properties(d).multi_processor_count}
            for d in devices]


ALTERNATIVES = [gpu_inventory_other_apis, gpu_inventory_comprehension, gpu_inventory_dict_builder,
                gpu_inventory_while_loop, gpu_inventory_guarded]
