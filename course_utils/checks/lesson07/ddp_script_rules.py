"""check_ddp_script's rules: how the torchrun run ended, and each case's rule on the ranks'
reports (CASES). The rules on the script as one rank of a simulated node are in
ddp_node_rules.py."""
from __future__ import annotations

from itertools import pairwise

from ..framework import expect_no_error, fail, is_kind


def expect_run_finished(run, stall_s: float) -> None:
    """Every rank ran the script to its end without an error, a deadlock or the time limit."""
    # A rank whose peer died reports a broken connection: show the error that came first.
    reports = sorted(run.ranks, key=lambda r: is_kind(r.error, "DistError"))
    for report in reports:
        if any(e.get("backend") == "nccl" for e in report.named("init")) and \
                not report.visible_gpus:
            fail(f"Rank {report.rank} asked for the nccl backend on a machine without a GPU: "
                 "NCCL works between NVIDIA GPUs only.", "on the CPU use gloo: "
                 "`backend = 'nccl' if torch.cuda.is_available() else 'gloo'`.")
        expect_no_error(report.error, "your script", where=f"On 2 CPU ranks, rank {report.rank}",
                        hints={"ValueError": lambda e: "on the CPU give DDP no device_ids: "
                               "`DDP(model)`; device_ids=[local_rank] is for a model on a GPU."
                               if "parallel/distributed" in (e["raised_in"] or "") else None})
    waiting = run.where_ranks_stopped()
    if run.stalled:
        fail(f"Your script stopped: for {stall_s:.0f} s no rank did anything, so the ranks are "
             f"waiting for each other ({waiting}).", "every rank must make the same collective "
             "calls in the same order (barrier, the all-reduce in backward): look for one "
             "inside `if rank == 0:`, such as a dist.barrier() that only rank 0 reaches.")
    if run.timed_out:
        fail(f"The check could not finish: after {run.seconds:.0f} s the ranks were still "
             f"busy ({waiting or 'still starting'}); a busy machine, or slow work in the "
             "script.", "run the check again in a moment; keep the script to the exercise.")
    if len(run.ranks) != 2:  # complete reports are judged, however the processes ended
        missing = sorted({0, 1} - {report.rank for report in run.ranks})
        fail(f"Rank(s) {missing} ended without finishing the script (torchrun's exit code "
             f"{run.returncode}): {run.error_line()}", "read that line; the launch "
             "cell's output shows the whole run.")


def _each_sample_once(ranks, config, coverage) -> None:
    samples = len(config.labels)
    if len(coverage) != config.epochs:
        fail(f"The ranks went through the data {len(coverage)} times, not "
             f"{config.epochs}.", "loop `for epoch in range(config.epochs):`.")
    for epoch in coverage:
        if all(count == samples for count in epoch.per_rank):
            fail(f"In epoch {epoch.epoch} each rank drew all {samples} samples: without a "
                 "DistributedSampler every rank goes through the whole data set, so the "
                 "ranks repeat each other's work.", "give the DataLoader "
                 "`sampler=DistributedSampler(config.dataset)`: each rank gets its share.")
        if epoch.repeated or epoch.distinct != samples:
            fail(f"In epoch {epoch.epoch} the ranks drew {epoch.distinct} different samples "
                 f"of {samples}, {epoch.repeated} draw(s) of a sample twice.",
                 "use `sampler=DistributedSampler(config.dataset)` and no other sampler.")


def _new_order(ranks, config, coverage) -> None:
    for before, after in pairwise(coverage):
        if before.order == after.order:
            fail(f"Epoch {after.epoch} drew the samples in the same order as epoch "
                 f"{before.epoch}: " + _why_repeated(ranks[0], after.epoch),
                 "call `sampler.set_epoch(epoch)` at the start of every epoch, before the loop "
                 "over the loader, on the sampler the DataLoader was given (shuffle=True).")


def _why_repeated(report, epoch: int) -> str:
    """What rank ``report`` shows about an epoch that repeated the previous one's order."""
    told, last = [], 0  # the sampler's epoch (0 until set_epoch) at each pass over a loader
    for event in report.events:
        if event["event"] == "set_epoch":
            last = event["epoch"]
        elif event["event"] == "loader":
            told.append(last)
    values = [event["epoch"] for event in report.named("set_epoch")]
    drawn = [i for batch in report.epochs()[epoch] for i in batch]
    if drawn == sorted(drawn):
        return "the sampler did not shuffle at all (shuffle=False?)."
    if not values:
        return ("the sampler shuffles with its seed plus the epoch number, and nobody told it "
                "the epoch changed.")
    if told[epoch] == told[epoch - 1]:
        return (f"when its pass began, the sampler still had epoch {told[epoch]}: " + (
            "set_epoch ran after the loop over the loader had started (it takes effect at the "
            "next pass)." if len(set(values)) > 1 else
            f"set_epoch was called once, with {values[0]}, not at the start of every epoch."
            if len(values) == 1 else f"set_epoch was given {values[0]} every time."))
    return ("set_epoch got a new epoch, yet the order repeated: it was not told to the sampler "
            "the DataLoader draws from.")


def _same_weights(ranks, config, coverage) -> None:
    from ...lab import distributed as ddp
    from ..distributed.reference import global_steps, reference_parameters

    if any(report.parameters is None for report in ranks):
        fail("A rank never built the model.", "build it with `config.build_model()`.")
    if ddp.max_difference(ranks[0].parameters, ranks[1].parameters) > 1e-5:
        wrapped = [event for r in ranks for event in r.named("ddp")]
        fail("The two ranks ended with different weights: " + (
            "the loop calls the plain model, and DDP averages the gradients only of "
            "forward passes through the wrapper." if wrapped else
            "the model was never wrapped in DDP, so nothing averaged their gradients."),
            "train `ddp_model = DDP(model)`: call `ddp_model(features)` in the loop.")
    steps = global_steps(ranks)
    if not steps or ddp.max_difference(ranks[0].parameters,
                                       reference_parameters(config, steps)) > 1e-4:
        fail("The weights differ from one process trained on the same batches.",
             "keep the given loop: SGD with config.lr, one step per batch.")


def _rank_0_prints(ranks, config, coverage) -> None:
    talkers = [r.rank for r in ranks if r.printed.strip()]
    if talkers != [0]:
        fail(f"Rank(s) {talkers} printed: " + ("each line appears once per rank." if
             len(talkers) > 1 else "rank 0 printed nothing."),
             "print the loss once per epoch, `if rank == 0:` (rank = dist.get_rank()).")


def _rank_0_saves(ranks, config, coverage) -> None:
    saves = [(r.rank, event) for r in ranks for event in r.named("save")]
    if [rank for rank, _ in saves] != [0]:
        fail(f"The checkpoint was saved by rank(s) {[rank for rank, _ in saves]}: the "
             "copies are identical, and ranks writing one file at once can corrupt it.",
             "save once: `if rank == 0: torch.save(ddp_model.module.state_dict(), "
             "config.checkpoint)`, then `dist.barrier()`.")
    keys = saves[0][1]["keys"] or []
    if sorted(keys) != ["0.bias", "0.weight", "2.bias", "2.weight"]:
        fail(f"The checkpoint holds {keys[:2] or saves[0][1]['type']}…: " + (
             "the DDP wrapper's state_dict, whose 'module.' keys a plain model cannot "
             "load." if any(k.startswith("module.") for k in keys) else "not the model's "
             "state_dict."), "save `ddp_model.module.state_dict()`.")


def _group_destroyed(ranks, config, coverage) -> None:
    open_ranks = [r.rank for r in ranks if r.initialized_at_exit or not r.named("destroy")]
    if open_ranks:
        fail(f"Rank(s) {open_ranks} ended with the process group still open: its sockets "
             "(NCCL communicators on GPUs) are never released.",
             "end main() with `dist.destroy_process_group()` on every rank.")


CASES = [  # (case, weight, rule(ranks, config, coverage))
    ("each epoch, every sample exactly once over the 2 ranks (DistributedSampler)", 1,
     _each_sample_once),
    ("a new order every epoch (sampler.set_epoch)", 1, _new_order),
    ("the same weights as one process on the full batches", 2, _same_weights),
    ("only rank 0 prints", 1, _rank_0_prints),
    ("only rank 0 saves model.module's state_dict", 1, _rank_0_saves),
    ("destroy_process_group() on every rank", 1, _group_destroyed),
]
