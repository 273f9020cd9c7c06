# ruff: noqa: B023, C901 - side() runs only inside the loop that binds calls / env
"""Read (input, expected value) pairs off a Python test file without running it (bench/repair_eval_build3.py).

Usage: ``python pyextract.py TEST.py FUNC[,FUNC...]``: one JSON line ``[input, expected, test function, how]`` per
``assert FUNC(x) == y`` / ``assertEqual(FUNC(x), y)`` / ``json.loads(FUNC(x)) == y`` / parametrize row / ``Fixture(raw=,
expected=)`` whose input and value are literals.
"""

import ast
import json
import pathlib
import sys

STRF = {"repair_json", "repair_to_str", "fix_json", "repair_str"}


def lit(node, env):
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "dedent" and node.args:
        import textwrap

        v = lit(node.args[0], env)
        return textwrap.dedent(v) if isinstance(v, str) else NO
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" and node.args:
        return NO
    try:
        return ast.literal_eval(node)
    except Exception:
        return NO


NO = object()


def callname(c):
    f = c.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return ""


def unwrap(node):
    # json.loads(F(x)) -> F(x), flagged as string-returning
    if (
        isinstance(node, ast.Call)
        and callname(node) == "loads"
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "json"
        and node.args
    ):
        inner = node.args[0]
        if isinstance(inner, ast.Call):
            return inner, True
        return inner, True
    return node, False


def extract(path, funcs):
    tree = ast.parse(pathlib.Path(path).read_text())
    out = []
    menv = {}
    for n in tree.body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            v = lit(n.value, {})
            if v is not NO:
                menv[n.targets[0].id] = v
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.Module)):
            continue
        env = dict(menv)
        calls = {}
        body = list(ast.walk(fn)) if isinstance(fn, ast.FunctionDef) else []
        for n in fn.body if isinstance(fn, ast.FunctionDef) else []:
            for s in ast.walk(n):
                if (
                    isinstance(s, ast.Assign)
                    and len(s.targets) == 1
                    and isinstance(s.targets[0], ast.Tuple)
                    and isinstance(s.value, ast.Call)
                    and callname(s.value) in funcs
                    and s.value.args
                    and len(s.targets[0].elts) >= 2
                    and isinstance(s.targets[0].elts[1], ast.Name)
                ):
                    a = lit(s.value.args[0], env)
                    if isinstance(a, str):
                        calls[s.targets[0].elts[1].id] = (a, True)
                if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                    v = lit(s.value, env)
                    if v is not NO:
                        env[s.targets[0].id] = v
                    else:
                        if isinstance(s.value, ast.Call) and callname(s.value) == "Fixture":
                            kw = {k.arg: lit(k.value, env) for k in s.value.keywords}
                        val, js = unwrap(s.value)
                        if isinstance(val, ast.Call) and callname(val) in funcs and val.args:
                            a = lit(val.args[0], env)
                            if isinstance(a, str):
                                calls[s.targets[0].id] = (a, js or callname(val) in STRF)

        def side(node):
            node, js = unwrap(node)
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("data", "value")
                and isinstance(node.value, ast.Name)
                and node.value.id in calls
            ):
                return calls[node.value.id][0], calls[node.value.id][1] or js
            if isinstance(node, ast.Name) and node.id in calls:
                return calls[node.id][0], calls[node.id][1] or js
            if isinstance(node, ast.Call) and callname(node) in funcs and node.args:
                a = lit(node.args[0], env)
                kw = {k.arg for k in node.keywords}
                if isinstance(a, str) and not (kw & {"skip_json_loads", "stream_stable"}):
                    return a, js or (callname(node) in STRF and "return_objects" not in kw)
            return None

        for s in body:
            pairs = []
            if isinstance(s, ast.Compare) and len(s.ops) == 1 and isinstance(s.ops[0], ast.Eq):
                pairs.append((s.left, s.comparators[0]))
                pairs.append((s.comparators[0], s.left))
            if (
                isinstance(s, ast.Call)
                and callname(s) in ("assertEqual", "assertEquals", "assertDictEqual", "assertListEqual")
                and len(s.args) >= 2
            ):
                pairs.append((s.args[0], s.args[1]))
                pairs.append((s.args[1], s.args[0]))
            for a, b in pairs:
                got = side(a)
                if got is None:
                    continue
                exp = lit(b, env)
                if exp is NO:
                    continue
                inp, js = got
                if js and isinstance(exp, str):
                    try:
                        exp = json.loads(exp)
                    except ValueError:
                        continue
                out.append((inp, exp, fn.name if isinstance(fn, ast.FunctionDef) else "", "call"))
                break
    for c in ast.walk(tree):
        if isinstance(c, ast.Call) and callname(c) == "Fixture":
            kw = {k.arg: lit(k.value, menv) for k in c.keywords}
            if isinstance(kw.get("raw"), str) and kw.get("expected", NO) is not NO:
                out.append((kw["raw"], kw["expected"], str(kw.get("label", "")), "fixture"))
    # tuple rows (parametrize tables): (str, literal, ...)
    for t in ast.walk(tree):
        if isinstance(t, ast.Tuple) and len(t.elts) >= 2:
            a = lit(t.elts[0], menv)
            b = lit(t.elts[1], menv)
            if isinstance(a, str) and b is not NO and not isinstance(b, (set, tuple, bytes)):
                out.append((a, b, "", "row"))
    return out


if __name__ == "__main__":
    path = sys.argv[1]
    funcs = set(sys.argv[2].split(","))
    for inp, exp, fn, how in extract(path, funcs):
        print(json.dumps([inp, exp, fn, how], default=str))
