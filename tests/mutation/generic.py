"""Generic operators: delete a statement, swap an operator, shift a constant or a bound,
drop a call or an argument, negate a condition, keep one branch of a conditional."""
from __future__ import annotations

import ast

from .operators import Edit, Env, Operator, Place, call_name, changed

BINARY = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
          ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult}
COMPARE = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE,
           ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
           ast.In: ast.NotIn, ast.NotIn: ast.In}


def _is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and \
        isinstance(node.value.value, str)


def delete_statement(node, place: Place, env: Env):
    if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.ClassDef,
                                                            ast.Pass)) \
            and not _is_docstring(node):
        yield changed(node, lambda _: [])


def swap_operator(node, place: Place, env: Env):
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in BINARY:
        def swap(n):
            n.op = BINARY[type(n.op)]()
            return n
        yield changed(node, swap)
    elif isinstance(node, ast.Compare):
        for index, op in enumerate(node.ops):
            def swap(n, index=index, op=op):
                n.ops[index] = COMPARE[type(op)]()
                return n
            yield changed(node, swap)
    elif isinstance(node, ast.BoolOp):
        def swap(n):
            n.op = ast.Or() if isinstance(n.op, ast.And) else ast.And()
            return n
        yield changed(node, swap)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        yield changed(node, lambda n: n.operand)


def _shifted(value):
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value - 1]
    if isinstance(value, float):
        return [value * 2, value / 2]
    return []


def shift_constant(node, place: Place, env: Env):
    if isinstance(node, ast.Constant) and not (isinstance(place.parent, ast.UnaryOp)):
        for new in _shifted(node.value):
            yield changed(node, lambda n, new=new: ast.Constant(new))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and \
            isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, int):
        for new in (-node.operand.value + 1, -node.operand.value - 1):
            yield changed(node, lambda n, new=new: ast.Constant(new))


def _plus(node: ast.expr, amount: int) -> ast.expr:
    op = ast.Add() if amount > 0 else ast.Sub()
    return ast.BinOp(node, op, ast.Constant(abs(amount)))


def shift_bound(node, place: Place, env: Env):
    if call_name(node) == "range" and node.args and not isinstance(node.func, ast.Attribute):
        last = len(node.args) - 1
        for amount in (1, -1):
            def shift(n, amount=amount):
                n.args[last] = _plus(n.args[last], amount)
                return n
            yield changed(node, shift)
        if len(node.args) == 1:
            yield changed(node, lambda n: ast.Call(n.func, [ast.Constant(1), n.args[0]], []))
    elif isinstance(node, ast.Slice):
        for end in ("lower", "upper"):
            if getattr(node, end) is not None:
                for amount in (1, -1):
                    def shift(n, end=end, amount=amount):
                        setattr(n, end, _plus(getattr(n, end), amount))
                        return n
                    yield changed(node, shift)


def drop_call(node, place: Place, env: Env):
    """x.f(...) → x; f(x) → x: the call forgotten, its object or argument kept."""
    if not isinstance(node, ast.Call) or isinstance(place.parent, ast.Expr):
        return
    func = node.func
    if isinstance(func, ast.Attribute) and not (
            isinstance(func.value, ast.Name) and func.value.id in env.modules):
        yield changed(node, lambda n: n.func.value, keywords=(func.attr,))
    elif isinstance(func, ast.Name) and len(node.args) == 1 and not node.keywords:
        yield changed(node, lambda n: n.args[0], keywords=(func.id,))


def drop_argument(node, place: Place, env: Env):
    if isinstance(node, ast.Call):
        for index, keyword in enumerate(node.keywords):
            def drop(n, index=index):
                del n.keywords[index]
                return n
            yield changed(node, drop, keywords=tuple(filter(None, [keyword.arg])))


def negate_condition(node, place: Place, env: Env):
    if isinstance(node, (ast.If, ast.While, ast.IfExp)):
        def negate(n):
            n.test = ast.UnaryOp(ast.Not(), n.test)
            return n
        yield Edit(f"`{ast.unparse(node.test)}` → `not ({ast.unparse(node.test)})`",
                   lambda n, place: negate(n))


def one_branch(node, place: Place, env: Env):
    if isinstance(node, ast.IfExp):
        yield changed(node, lambda n: n.body)
        yield changed(node, lambda n: n.orelse)


def _generic(name, mistake, edits) -> Operator:
    return Operator(name, "generic", mistake, edits, construct=True)


GENERIC = (
    _generic("delete-statement", "a statement left out", delete_statement),
    _generic("swap-operator", "an arithmetic, comparison or boolean operator swapped",
             swap_operator),
    _generic("shift-constant", "a number shifted by one (or doubled, halved), a flag flipped",
             shift_constant),
    _generic("shift-bound", "a range's or a slice's bound shifted by one", shift_bound),
    _generic("drop-call", "a call left out, its object or argument kept", drop_call),
    _generic("drop-argument", "a keyword argument left out", drop_argument),
    _generic("negate-condition", "a condition negated", negate_condition),
    _generic("one-branch", "a conditional expression replaced by one of its branches",
             one_branch),
)
