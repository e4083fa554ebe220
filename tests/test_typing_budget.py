"""How loosely the package is typed, counted, with a budget that only goes down (issue 25).

`dict[str, Any]` is allowed at an honest JSON edge only (JSON Schema documents, provider
request and response bodies, YAML/TOML read raw); everything else is a struct, a TypedDict or
a precise type. An alias of it (`JsonObject = dict[str, Any]`) hides nothing: each use of
the alias counts as one more. `Any` overall has a budget too. Both lists are printed, with
file:line, so a failure says where to look.
"""

from __future__ import annotations

import ast
from pathlib import Path

import zeroclaw

PACKAGE = Path(zeroclaw.__file__).parent

# Lower these when you remove uses; never raise them to let a new one in.
DICT_STR_ANY_BUDGET = 36
ANY_BUDGET = 270  # +1: _spawn.open_child forwards **popen_options to subprocess.Popen


def _is_any(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (
        isinstance(node, ast.Attribute) and node.attr == "Any"
    )


def _is_dict_str_any(node: ast.AST) -> bool:
    """`dict[str, Any]` (or typing's `Dict[str, Any]`)."""
    if not isinstance(node, ast.Subscript):
        return False
    base = node.value
    name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
    if name not in ("dict", "Dict") or not isinstance(node.slice, ast.Tuple):
        return False
    key, *rest = node.slice.elts
    return isinstance(key, ast.Name) and key.id == "str" and len(rest) == 1 and _is_any(rest[0])


def _annotations(tree: ast.Module) -> list[ast.expr]:
    out: list[ast.expr | None] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign):
            out.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.append(node.returns)
    return [a for a in out if a is not None]


def _trees() -> list[tuple[str, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # Quoted annotations are code too: parse them where they stand.
        for node in [n for a in _annotations(tree) for n in ast.walk(a)]:
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                try:
                    inner = ast.parse(node.value, mode="eval")
                except SyntaxError:
                    continue
                for sub in ast.walk(inner):
                    ast.copy_location(sub, node)
                tree.body.append(ast.Expr(inner.body, lineno=node.lineno, col_offset=0))
        out.append((path.relative_to(PACKAGE.parent).as_posix(), tree))
    return out


def _aliases(trees: list[tuple[str, ast.Module]]) -> set[str]:
    """Names bound to `dict[str, Any]` at a module's top level (`X = ...`, `X: TypeAlias =
    ...`, and from 3.12 `type X = ...`)."""
    names = set()
    for _, tree in trees:
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and _is_dict_str_any(stmt.value):
                names |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
            elif (
                isinstance(stmt, ast.AnnAssign)
                and stmt.value is not None
                and _is_dict_str_any(stmt.value)
                and isinstance(stmt.target, ast.Name)
            ):
                names.add(stmt.target.id)
            elif type(stmt).__name__ == "TypeAlias" and _is_dict_str_any(stmt.value):  # 3.12
                names.add(stmt.name.id)  # type: ignore[attr-defined]
    return names


def dict_str_any_uses() -> list[str]:
    trees = _trees()
    aliases = _aliases(trees)
    found = []
    for rel, tree in trees:
        for node in ast.walk(tree):
            if _is_dict_str_any(node):
                found.append(f"{rel}:{getattr(node, 'lineno', 0)}")
            elif isinstance(node, ast.Name) and node.id in aliases:
                found.append(f"{rel}:{node.lineno} (alias {node.id})")
    return found


def any_uses() -> list[str]:
    found = []
    for rel, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Name | ast.Attribute) and _is_any(node):
                found.append(f"{rel}:{node.lineno}")
    return found


def test_dict_str_any_stays_within_its_budget() -> None:
    found = dict_str_any_uses()
    print(f"dict[str, Any]: {len(found)} (budget {DICT_STR_ANY_BUDGET})", *found, sep="\n  ")
    assert len(found) <= DICT_STR_ANY_BUDGET, "\n".join(found)


def test_any_stays_within_its_budget() -> None:
    found = any_uses()
    print(f"Any: {len(found)} (budget {ANY_BUDGET})", *found, sep="\n  ")
    assert len(found) <= ANY_BUDGET, "\n".join(found)


def test_an_alias_of_dict_str_any_is_counted_at_each_use() -> None:
    tree = ast.parse("JsonObject = dict[str, Any]\ndef f(x: JsonObject) -> 'JsonObject': ...\n")
    assert _aliases([("m.py", tree)]) == {"JsonObject"}
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "JsonObject"]
    assert len(uses) == 2  # the binding target and one use; the quoted one is parsed in _trees
