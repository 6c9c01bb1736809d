"""Right alternatives for the DDP script: the solution's text with right edits (several like
tests/checks/lesson07/test_ddp_script.py's RIGHT_ALTERNATIVE and RIGHT_SET_UPS, and own).

Not imported from there: the tests edit the script without its solution markers, these edit
the exercise's source with them, so the texts differ."""
from __future__ import annotations

from ..exercises import exercise

SOLUTION = exercise("lesson07/ddp_script").source


def changed(*edits: tuple[str, str]) -> str:
    text = SOLUTION
    for old, new in edits:
        if old not in text:
            raise LookupError(f"the solution no longer contains {old!r}")
        text = text.replace(old, new)
    return text


ALTERNATIVES = [
    changed(  # torch picks the backend; device_id; save the inner model
        ("    dist.init_process_group(backend, device_id=", ("    dist.init_process_group("
         "device_id=")),
        ("torch.save(ddp_model.module.state_dict()", "torch.save(model.state_dict()"),
        ('device_ids=[local_rank] if device.type == "cuda" else None',
         'device_ids=[device] if device.type == "cuda" else None')),
    changed(("        torch.cuda.set_device(device)\n",
             "        torch.accelerator.set_device_index(local_rank)\n")),
    changed(("    sampler = DistributedSampler(config.dataset)",
             ("    sampler = DistributedSampler(config.dataset, rank=rank, "
             "num_replicas=dist.get_world_size(), shuffle=True)"))),
    changed(("        if rank == 0:\n            print(", ("        if dist.get_rank() == 0:\n"
             "            print("))),
    changed(("    if rank == 0:\n        torch.save(", "    if not rank:\n        torch.save(")),
]
