"""Learner-modelled operators, written from how people get device code wrong.

Each operator names the mistake it models and the words a check's message needs in its first
sentence to count as naming it. To add one: write ``edits(node, place, env)`` yielding
:class:`~.operators.Edit` s (``changed(node, build)`` does most), and list it in LEARNER.
"""
from __future__ import annotations

import ast
import copy

from .operators import Edit, Operator, Place, call_name, calls_in, changed, names_in, show


def _method(node: ast.AST, *names: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr in names


def _call(obj: ast.expr, method: str, *args: ast.expr) -> ast.Call:
    return ast.Call(ast.Attribute(obj, method, ast.Load()), list(args), [])


def _parse(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def host_copy(node, place, env):
    """x.to(device) → x.cpu(); x.cuda() → x.cpu()."""
    if _method(node, "to", "cuda") and not (
            isinstance(node.func.value, ast.Name) and node.func.value.id in env.modules):
        yield changed(node, lambda n: _call(n.func.value, "cpu"))


def numpy_copy(node, place, env):
    if _method(node, "cpu"):
        yield changed(node, lambda n: _call(n, "numpy"))


def move_discarded(node, place, env):
    """x = x.to(device) → x.to(device): the moved copy thrown away."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and _method(value, "to"):
            yield changed(node, lambda n: ast.Expr(n.value))
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            for index, element in enumerate(value.elts):
                if _method(element, "to") and isinstance(element.func.value, ast.Name):
                    def keep(n, index=index):
                        n.value.elts[index] = n.value.elts[index].func.value
                        return n
                    yield changed(node, keep)


def _is_device_value(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "device" or \
        isinstance(node, ast.Attribute) and node.attr == "device"


def wrong_device(node, place, env):
    """A device argument (to(device), map_location=device) replaced by "cpu"."""
    if isinstance(node, ast.Call):
        for index, arg in enumerate(node.args):
            if _is_device_value(arg) and call_name(node) in ("to", "device"):
                def cpu(n, index=index):
                    n.args[index] = ast.Constant("cpu")
                    return n
                yield changed(node, cpu)
        for index, keyword in enumerate(node.keywords):
            if _is_device_value(keyword.value) and keyword.arg in ("map_location", "device"):
                def cpu(n, index=index):
                    n.keywords[index].value = ast.Constant("cpu")
                    return n
                yield changed(node, cpu)


def hard_coded_cuda(node, place, env):
    if _method(node, "to") and node.args and _is_device_value(node.args[0]):
        def cuda(n):
            n.args[0] = ast.Constant("cuda")
            return n
        yield changed(node, cuda)


def string_for_device(node, place, env):
    """torch.device("cuda") → "cuda": a string where a torch.device is asked for."""
    if call_name(node) == "device" and len(node.args) == 1 and not node.keywords and \
            isinstance(node.args[0], ast.Constant):
        yield changed(node, lambda n: n.args[0])


def non_blocking_copy_back(node, place, env):
    """x.cpu() → x.to("cpu", non_blocking=True): read before the copy has finished."""
    if _method(node, "cpu") and not node.args:
        yield changed(node, lambda n: ast.Call(ast.Attribute(n.func.value, "to", ast.Load()), [
            ast.Constant("cpu")], [ast.keyword("non_blocking", ast.Constant(True))]))


def forgot_detach(node, place, env):
    if _method(node, "detach"):
        yield changed(node, lambda n: n.func.value)


def item_instead_of_detach(node, place, env):
    if _method(node, "detach"):
        yield changed(node, lambda n: _call(n.func.value, "item"))


def forgot_no_grad(node, place, env):
    if isinstance(node, ast.With) and any(
            calls_in(item.context_expr) & {"no_grad", "inference_mode"} for item in node.items):
        yield changed(node, lambda n: n.body)


def forgot_sync(node, place, env):
    if isinstance(node, ast.Expr) and any("synchron" in name for name in calls_in(node)):
        yield changed(node, lambda n: [])


def forgot_warmup(node, place, env):
    if isinstance(node, ast.For) and any("warm" in name for name in names_in(node.iter)):
        yield changed(node, lambda n: [])


def forgot_zero_grad(node, place, env):
    if isinstance(node, ast.Expr) and "zero_grad" in calls_in(node):
        yield changed(node, lambda n: [])


def forgot_set_epoch(node, place, env):
    if isinstance(node, ast.Expr) and "set_epoch" in calls_in(node):
        yield changed(node, lambda n: [])


def forgot_move(node, place, env):
    """model.to(device) as a statement (Module.to moves in place) left out."""
    if isinstance(node, ast.Expr) and _method(node.value, "to", "cuda"):
        yield changed(node, lambda n: [])


READ_HINTS = ("loss", "total", "running", "correct")


def _read_candidate(node: ast.AST, place: Place) -> str | None:
    """The name a statement in a loop body assigns a device value to, if any."""
    if not isinstance(node, (ast.Assign, ast.AugAssign)) or place.field != "body" or \
            not isinstance(place.parent, (ast.For, ast.While)):
        return None
    target = node.targets[0] if isinstance(node, ast.Assign) else node.target
    if not isinstance(target, ast.Name):
        return None
    tensorish = calls_in(node.value) & {"detach", "sum", "mean", "loss_fn", "cross_entropy"}
    if tensorish or any(hint in target.id for hint in READ_HINTS):
        return target.id
    return None


def _insert_after(text: str) -> callable:
    def apply(node, place):
        body = getattr(place.parent, place.field)
        body.insert(place.index + 1, ast.parse(text).body[0])
    return apply


def host_read_in_loop(node, place, env):
    name = _read_candidate(node, place)
    if name:
        yield Edit(f"{show(node)} then `{name}.item()` in the loop", _insert_after(
            f"{name}.item()"))


def hidden_host_read(node, place, env):
    """A read hidden in a constructor or an f-string: float(loss), f"{loss}"."""
    name = _read_candidate(node, place)
    if name:
        for text in (f"float({name})", f'print(f"{{{name}}}", end="")'):
            yield Edit(f"{show(node)} then `{text}` in the loop", _insert_after(text))


TRAINING_CALLS = {"zero_grad", "backward", "step", "unscale_", "clip_grad_norm_", "update",
                  "load_state_dict", "to", "synchronize", "set_device", "barrier",
                  "destroy_process_group", "save", "set_epoch", "init_process_group"}


def reordered_calls(node, place, env):
    """Two neighbouring statements that call zero_grad/backward/step (and the like) swapped."""
    if place.index is None or not isinstance(node, ast.stmt):
        return
    body = getattr(place.parent, place.field)
    if place.index + 1 >= len(body):
        return
    first, second = calls_in(node) & TRAINING_CALLS, calls_in(body[place.index + 1]) & \
        TRAINING_CALLS
    if first and second and first != second and all(
            isinstance(s, (ast.Expr, ast.Assign)) for s in body[place.index:place.index + 2]):
        def swap(n, place):
            siblings = getattr(place.parent, place.field)
            i = place.index
            siblings[i], siblings[i + 1] = siblings[i + 1], siblings[i]
        pair = tuple(sorted(first | second))
        yield Edit(f"{show(node)} moved after {show(body[place.index + 1])}", swap, pair)


REDUCTIONS = {"mean": "sum", "sum": "mean", "median": "mean", "amax": "amin", "max": "min",
              "min": "max", "argmax": "argmin", "argmin": "argmax"}


def changed_reduction(node, place, env):
    name = call_name(node)
    if name in REDUCTIONS and not (isinstance(node.func, ast.Name) and len(node.args) > 1):
        def swap(n):
            if isinstance(n.func, ast.Attribute):
                n.func.attr = REDUCTIONS[name]
            else:
                n.func.id = REDUCTIONS[name]
            return n
        yield changed(node, swap, keywords=(name, REDUCTIONS[name]))


def changed_dimension(node, place, env):
    if isinstance(node, ast.keyword) and node.arg in ("dim", "axis"):
        value = ast.literal_eval(node.value) if isinstance(
            node.value, (ast.Constant, ast.UnaryOp)) else None
        if isinstance(value, int):
            new = 0 if value != 0 else 1
            yield Edit(f"`{node.arg}={value}` → `{node.arg}={new}`",
                       lambda n, place, new=new: setattr(n, "value", ast.Constant(new)))


UNITS = {(2, 30): "10 ** 9", (2, 20): "10 ** 6", (1024, 3): "1000 ** 3"}


def changed_unit(node, place, env):
    """Bytes per GiB taken as 10**9; a time difference reported in milliseconds."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and all(
            isinstance(side, ast.Constant) for side in (node.left, node.right)):
        new = UNITS.get((node.left.value, node.right.value))
        if new:
            yield changed(node, lambda n: _parse(new))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and (
            "perf_counter" in calls_in(node) or any(
                hint in name for name in names_in(node) for hint in ("start", "asked", "arrived"))):
        yield changed(node, lambda n: ast.BinOp(n, ast.Mult(), ast.Constant(1000)))


STRICTNESS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}


def threshold_boundary(node, place, env):
    """A threshold moved just across its boundary: < and <=, > and >=."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in STRICTNESS:
        def flip(n):
            n.ops[0] = STRICTNESS[type(n.ops[0])]()
            return n
        yield changed(node, flip)


def _availability(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "is_available" in calls_in(node.test)


def preference_reordered(node, place, env):
    """if cuda...; if mps... → the other way round."""
    if place.index is None or not _availability(node):
        return
    body = getattr(place.parent, place.field)
    if place.index + 1 < len(body) and _availability(body[place.index + 1]):
        def swap(n, place):
            siblings, i = getattr(place.parent, place.field), place.index
            siblings[i], siblings[i + 1] = siblings[i + 1], siblings[i]
        yield Edit(f"{show(node.test)} asked after {show(body[place.index + 1].test)}", swap)


def device_compared_with_string(node, place, env):
    if isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and \
            node.left.attr == "type" and any(isinstance(c, ast.Constant) for c in node.comparators):
        def plain(n):
            n.left = n.left.value
            return n
        yield changed(node, plain)


def local_for_global_rank(node, place, env):
    if call_name(node) == "get_rank":
        yield changed(node, lambda n: _parse('int(os.environ["LOCAL_RANK"])'))
    if isinstance(node, ast.Name) and node.id == "local_rank" and \
            isinstance(node.ctx, ast.Load):
        yield changed(node, lambda n: _parse("dist.get_rank()"))


def seed_per_rank(node, place, env):
    if call_name(node) == "DistributedSampler" and not any(
            k.arg == "seed" for k in node.keywords):
        def seed(n):
            n.keywords.append(ast.keyword("seed", _parse("dist.get_rank()")))
            return n
        yield changed(node, seed)


def reseeded_each_epoch(node, place, env):
    if isinstance(node, ast.keyword) and node.arg == "generator":
        yield Edit(f"`generator={ast.unparse(node.value)}` → a new generator seeded 0",
                   lambda n, place: setattr(n, "value", _parse(
                       "torch.Generator().manual_seed(0)")))


def train_eval_swapped(node, place, env):
    if _method(node, "train", "eval") and not node.args:
        other = {"train": "eval", "eval": "train"}[node.func.attr]
        yield changed(node, lambda n: _call(n.func.value, other))


def loss_not_averaged(node, place, env):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and (
            calls_in(node.left) & {"loss_fn", "cross_entropy"}):
        yield changed(node, lambda n: n.left)


def backward_inside_autocast(node, place, env):
    if place.index is None or not isinstance(node, ast.With) or "autocast" not in calls_in(
            node.items[0].context_expr):
        return
    body = getattr(place.parent, place.field)
    if place.index + 1 < len(body):
        def move(n, place):
            siblings = getattr(place.parent, place.field)
            n.body.append(siblings.pop(place.index + 1))
        yield Edit(f"{show(body[place.index + 1])} moved into the autocast block", move)


def broad_except(node, place, env):
    if isinstance(node, ast.ExceptHandler) and node.type is not None and \
            ast.unparse(node.type) not in ("Exception", "BaseException"):
        yield Edit(f"`except {ast.unparse(node.type)}` → `except Exception`",
                   lambda n, place: setattr(n, "type", ast.Name("Exception", ast.Load())))


def retry_inside_except(node, place, env):
    if place.index is None or not isinstance(node, ast.Try) or not node.handlers:
        return
    body = getattr(place.parent, place.field)
    if place.index + 1 < len(body):
        def move(n, place):
            siblings = getattr(place.parent, place.field)
            n.handlers[0].body.append(siblings.pop(place.index + 1))
        yield Edit(f"{show(body[place.index + 1])} moved into the except block", move)


def every_rank_acts(node, place, env):
    if isinstance(node, ast.If) and "rank" in names_in(node.test) and not node.orelse:
        yield changed(node, lambda n: n.body)


def saved_wrapper(node, place, env):
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and \
            node.value.attr == "module":
        yield changed(node, lambda n: ast.Attribute(n.value.value, n.attr, n.ctx))


SWAPPED_STRINGS = {"nccl": "gloo", "gloo": "nccl"}
SWAPPED_ATTRIBUTES = {"float16": "bfloat16", "bfloat16": "float16"}


def backend_swapped(node, place, env):
    if isinstance(node, ast.Constant) and node.value in SWAPPED_STRINGS:
        yield changed(node, lambda n: ast.Constant(SWAPPED_STRINGS[n.value]))


def dtype_swapped(node, place, env):
    if isinstance(node, ast.Attribute) and node.attr in SWAPPED_ATTRIBUTES:
        yield changed(node, lambda n: ast.Attribute(n.value, SWAPPED_ATTRIBUTES[n.attr], n.ctx))


def first_device_only(node, place, env):
    """Every GPU taken as GPU 0: range(device_count()) → range(1), a device index → 0."""
    if call_name(node) == "range" and "device_count" in calls_in(node):
        yield changed(node, lambda n: _parse("range(1)"))
    if call_name(node) in ("get_device_properties", "device", "set_device") and node.args:
        last = len(node.args) - 1
        if isinstance(node.args[last], ast.Name) and node.args[last].id != "device":
            def zero(n):
                n.args[last] = ast.Constant(0)
                return n
            yield changed(node, zero)


def python_branch_on_tensor(node, place, env):
    if call_name(node) == "where" and len(node.args) == 3:
        yield changed(node, lambda n: ast.IfExp(n.args[0], n.args[1], n.args[2]))


def ceil_to_floor(node, place, env):
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(
            node.operand, ast.BinOp) and isinstance(node.operand.op, ast.FloorDiv) and \
            isinstance(node.operand.left, ast.UnaryOp):
        yield changed(node, lambda n: ast.BinOp(n.operand.left.operand, ast.FloorDiv(),
                                                n.operand.right))


def mean_over_samples(node, place, env):
    if call_name(node) == "len" and node.args and any(
            "loader" in name for name in names_in(node.args[0])):
        yield changed(node, lambda n: ast.Call(n.func, [ast.Attribute(
            copy.deepcopy(n.args[0]), "dataset", ast.Load())], []))


def sync_every_or_never(node, place, env):
    if isinstance(node, ast.IfExp) and "no_sync" in calls_in(node):
        yield changed(node, lambda n: n.body)
        yield changed(node, lambda n: n.orelse)


def scaler_always_on(node, place, env):
    if isinstance(node, ast.keyword) and node.arg == "enabled" and not isinstance(
            node.value, ast.Constant):
        yield Edit(f"`enabled={ast.unparse(node.value)}` → `enabled=True`",
                   lambda n, place: setattr(n, "value", ast.Constant(True)))


def _named(node: ast.AST, *names: str) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def world_off_by_one(node, place, env):
    """x / world → x / (world - 1): the ranks counted without this one."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _named(
            node.right, "world", "world_size"):
        yield changed(node, lambda n: ast.BinOp(n.left, ast.Div(), ast.BinOp(
            n.right, ast.Sub(), ast.Constant(1))))


def bytes_dropped(node, place, env):
    """count * bytes_per_value → count: values counted, not bytes."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        if _named(node.right, "bytes_per_value", "element_size"):
            yield changed(node, lambda n: n.left)
        elif _named(node.left, "bytes_per_value", "element_size"):
            yield changed(node, lambda n: n.right)


def two_dropped(node, place, env):
    """2 * parameters → parameters: Adam's two moments, or FSDP's two gathers, counted once."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and isinstance(
            node.left, ast.Constant) and node.left.value == 2 and set(names_in(node.right)) & {
            "param_count", "parameter_bytes", "units", "one"}:
        yield changed(node, lambda n: n.right)


def slope_for_bandwidth(node, place, env):
    """1 / slope → slope: seconds per byte returned as the bandwidth."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(
            node.left, ast.Constant) and node.left.value == 1 and "slope" in names_in(node.right):
        yield changed(node, lambda n: n.right)


def latency_once(node, place, env):
    """calls * latency → latency: one latency for all the calls of a step."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and _named(
            node.right, "latency") and set(names_in(node.left)) & {"calls", "units"}:
        yield changed(node, lambda n: n.right)


def log_dropped(node, place, env):
    """np.log(x) → x: a quantity left on its raw scale where the rule takes its logarithm."""
    if call_name(node) in ("log", "log2", "log10") and len(node.args) == 1:
        yield changed(node, lambda n: n.args[0])


def _learner(name: str, mistake: str, keywords: tuple[str, ...], edits) -> Operator:
    return Operator(name, "learner", mistake, edits, keywords)


MOVE = ("cpu", "move", "moved", "device", "main memory", "host")
READ = ("item", "read", "copy", "copies", "sync", "host", "each step", "every step", "loop",
        "per batch", "per step", "waits")
LEARNER = (
    _learner("host-copy", "a host copy (.cpu()) instead of a move to the device", MOVE,
             host_copy),
    _learner("numpy-copy", "a NumPy array (.numpy()) returned instead of a tensor",
             ("numpy", "ndarray", "tensor"), numpy_copy),
    _learner("move-discarded", "x.to(device) called but its result not assigned: x stays",
             MOVE + ("assign", "discard", "thrown away", "stays"), move_discarded),
    _learner("wrong-device", "a tensor put on the CPU instead of the device asked for",
             MOVE, wrong_device),
    _learner("hard-coded-cuda", "the device hard-coded as 'cuda'",
             ("cuda", "device", "hard-coded", "gpu", "not compiled"), hard_coded_cuda),
    _learner("string-for-device", "a device name (a string) returned instead of a torch.device",
             ("string", "str", "torch.device"), string_for_device),
    _learner("non-blocking-copy-back", "a non_blocking copy to the CPU read without waiting",
             ("non_blocking", "synchron", "wait", "pinned", "finished"), non_blocking_copy_back),
    _learner("forgot-detach", "detach() forgotten: the graph is kept alive",
             ("detach", "graph", "autograd", "grad"), forgot_detach),
    _learner("item-instead-of-detach", ".item() (a host read every step) instead of "
             "detach()", READ, item_instead_of_detach),
    _learner("forgot-no-grad", "no_grad()/inference_mode() forgotten",
             ("no_grad", "inference_mode", "inference mode", "autograd", "gradient", "grad"),
             forgot_no_grad),
    _learner("forgot-sync", "a synchronisation forgotten: the clock reads queued work",
             ("synchron", "wait", "queued", "asynchron"), forgot_sync),
    _learner("forgot-warmup", "the warm-up forgotten", ("warm",), forgot_warmup),
    _learner("forgot-zero-grad", "zero_grad() forgotten: gradients add up across steps",
             ("zero_grad", "accumulat", "add up", "fresh", "gradients"), forgot_zero_grad),
    _learner("forgot-set-epoch", "set_epoch() forgotten: the same shuffle every epoch",
             ("set_epoch", "epoch", "shuffle"), forgot_set_epoch),
    _learner("forgot-move", "model.to(device) forgotten", MOVE, forgot_move),
    _learner("host-read-in-loop", "a host read (.item()) added inside the loop", READ,
             host_read_in_loop),
    _learner("hidden-host-read", "a host read hidden in float() or an f-string, in the loop",
             READ, hidden_host_read),
    _learner("reordered-calls", "zero_grad/backward/step (or another pair of ordered calls) "
             "swapped", ("order", "before", "after"), reordered_calls),
    _learner("changed-reduction", "another reduction (mean/sum/median, max/min)",
             ("reduction", "average", "mean", "median", "sum", "total"), changed_reduction),
    _learner("changed-dimension", "a reduction over the wrong dimension",
             ("dim", "dimension", "axis", "row", "column", "class", "sample"),
             changed_dimension),
    _learner("changed-unit", "another unit (10**9 bytes for a GiB; milliseconds)",
             ("unit", "gib", "byte", "second", "millisecond", "1024", "2**30"), changed_unit),
    _learner("threshold-boundary", "a threshold moved just across its boundary (< and <=)",
             ("equal", "tie", "boundary", "strict", "exactly", "same"), threshold_boundary),
    _learner("preference-reordered", "the device preference reordered (MPS before CUDA)",
             ("prefer", "first", "order", "before", "cuda", "mps"), preference_reordered),
    _learner("device-compared-with-string", "a torch.device compared with a string",
             ("type", "string", "torch.device", "str"), device_compared_with_string),
    _learner("local-for-global-rank", "the local rank used for the global one (or back)",
             ("rank", "local", "global"), local_for_global_rank),
    _learner("seed-per-rank", "a sampler seeded per rank: ranks shuffle differently",
             ("seed", "rank", "same", "shuffle", "differ", "overlap", "twice"), seed_per_rank),
    _learner("reseeded-each-epoch", "a generator seeded afresh every epoch: the same order",
             ("epoch", "same order", "seed", "shuffle", "generator", "order"),
             reseeded_each_epoch),
    _learner("train-eval-swapped", "model.train() and model.eval() swapped",
             ("train", "eval", "mode", "dropout", "batch norm"), train_eval_swapped),
    _learner("loss-not-averaged", "the loss not divided by the number of micro-batches",
             ("divid", "mean", "scale", "average", "accumulat", "sum", "times"),
             loss_not_averaged),
    _learner("backward-inside-autocast", "backward() run inside the autocast block",
             ("autocast", "backward"), backward_inside_autocast),
    _learner("broad-except", "every exception caught instead of OutOfMemoryError",
             ("outofmemory", "except", "catch", "caught", "other error", "memory"),
             broad_except),
    _learner("retry-inside-except", "the retry made inside the except block",
             ("except", "inside", "free", "memory", "handler"), retry_inside_except),
    _learner("every-rank-acts", "every rank prints or saves, not rank 0 alone",
             ("rank 0", "every rank", "each rank", "all ranks", "once", "rank"),
             every_rank_acts),
    _learner("saved-wrapper", "the DDP wrapper's state saved (module. prefixes)",
             ("module", "prefix", "wrapper", "ddp"), saved_wrapper),
    _learner("backend-swapped", "nccl and gloo swapped", ("backend", "nccl", "gloo"),
             backend_swapped),
    _learner("dtype-swapped", "float16 and bfloat16 swapped",
             ("float16", "bfloat16", "dtype"), dtype_swapped),
    _learner("first-device-only", "GPU 0 taken for every GPU or rank",
             ("every", "each", "index", "device 0", "gpu 0", "all", "cuda:0"),
             first_device_only),
    _learner("python-branch-on-tensor", "a Python branch on a tensor instead of torch.where",
             ("graph break", "torch.where", "branch", "data-dependent", "if"),
             python_branch_on_tensor),
    _learner("ceil-to-floor", "the batch count rounded down: the last partial batch lost",
             ("last", "partial", "len", "drop_last", "batch"), ceil_to_floor),
    _learner("mean-over-samples", "the mean over samples instead of over batches",
             ("batch", "mean", "len", "sample"), mean_over_samples),
    _learner("sync-every-or-never", "no_sync() on every micro-batch, or on none",
             ("no_sync", "all-reduce", "allreduce", "once", "every micro-batch", "sync"),
             sync_every_or_never),
    _learner("log-dropped", "the logarithm left out: raw values where the rule takes logs",
             ("log", "raw", "scale"), log_dropped),
    _learner("world-off-by-one", "divided by world - 1 instead of the world size",
             ("world", "ranks"), world_off_by_one),
    _learner("bytes-dropped", "values counted instead of bytes (bytes_per_value forgotten)",
             ("bytes", "bytes_per_value"), bytes_dropped),
    _learner("two-dropped", "a factor of two forgotten (Adam's two moments, FSDP's two gathers)",
             ("two", "twice", "moment"), two_dropped),
    _learner("slope-for-bandwidth", "the slope (seconds per byte) returned as the bandwidth",
             ("slope", "per byte", "inverse"), slope_for_bandwidth),
    _learner("latency-once", "one latency for all the calls of a step",
             ("latency", "once", "per call"), latency_once),
    _learner("scaler-always-on", "the gradient scaler enabled for every dtype",
             ("scaler", "enabled", "gradscaler", "float16", "bfloat16"), scaler_always_on),
)
