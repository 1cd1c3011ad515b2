"""Generate the sync twin of an async module (psycopg's approach: one implementation, the other
written by a program): ``python tools/async_to_sync.py`` rewrites every file in ``PAIRS``;
``--check`` exits 1 when a checked-in output differs from what the source gives (the CI check,
tests/core/test_client_twins.py).

The transform works on the syntax tree: ``async def`` / ``async with`` / ``async for`` lose
``async``, ``await x`` becomes ``x``, ``await asyncio.to_thread(f, *args)`` becomes
``f(*args)``, and names are renamed: ``AsyncX`` -> ``X``, ``x_async`` -> ``x``, plus the table
``NAMES`` (``asyncio.sleep`` -> ``time.sleep``, ``__aenter__`` -> ``__enter__``...). Comments do
not survive (``ast.unparse``); docstrings do, with the same renames. The output is formatted
with ruff, as the rest of the tree.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# source (async, hand-written) -> output (sync, generated)
PAIRS = {
    "kestrel_core/api/async_operations.py": "kestrel_core/api/operations.py",
}

# Renames beyond the two rules (``AsyncX`` -> ``X``, ``x_async`` -> ``x``).
NAMES = {
    "asyncio": "time",  # left are asyncio.sleep (-> time.sleep); asyncio.to_thread is dropped
    "asynccontextmanager": "contextmanager",
    "aclose": "close",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
    "StopAsyncIteration": "StopIteration",
    "is_async": "is_async",  # a workflow's flag, not a twin
}

# The field that holds a node's own name, by node type (exactly: an ``async def`` keeps its
# name); renamed once the node's children are.
NAME_FIELDS: dict[type[ast.AST], str] = {
    ast.Name: "id",
    ast.Attribute: "attr",
    ast.FunctionDef: "name",
    ast.ClassDef: "name",
    ast.arg: "arg",
}

_WORD = re.compile(r"\b(Async([A-Z]\w*)|(\w+)_async|asynccontextmanager|__aenter__|__aexit__)\b")


def rename(name: str) -> str:
    """The sync name of ``name``."""
    if name in NAMES:
        return NAMES[name]
    if name.startswith("Async") and name[5:6].isupper():
        return name[5:]
    if name.endswith("_async") and len(name) > 6:
        return name[: -len("_async")]
    return name


def rename_dotted(name: str) -> str:
    """The sync name of a dotted ``name`` (a module path), part by part."""
    return ".".join(rename(part) for part in name.split("."))


def rename_text(text: str) -> str:
    """The same renames in prose (docstrings), and ``await `` dropped."""
    text = _WORD.sub(lambda m: rename(m.group(0)), text)
    return re.sub(r"\bawait(ed)? ", "", text).replace("async with", "with").replace("async def", "def")


class AsyncToSync(ast.NodeTransformer):
    """The syntax tree's sync twin (see the module's docstring)."""

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        self.generic_visit(node)
        fields = {f: getattr(node, f) for f in node._fields}
        return ast.copy_location(ast.FunctionDef(**fields), node)

    def visit_AsyncWith(self, node: ast.AsyncWith) -> ast.AST:
        self.generic_visit(node)
        return ast.copy_location(ast.With(items=node.items, body=node.body, type_comment=None), node)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> ast.AST:
        self.generic_visit(node)
        return ast.copy_location(
            ast.For(target=node.target, iter=node.iter, body=node.body, orelse=node.orelse, type_comment=None), node
        )

    def visit_Await(self, node: ast.Await) -> ast.AST:
        value = node.value
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == "to_thread"
            and isinstance(value.func.value, ast.Name)
            and value.func.value.id == "asyncio"
        ):
            fn, *args = value.args
            value = ast.Call(func=fn, args=args, keywords=value.keywords)
        return self.visit(value)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "Awaitable":
            return node.slice  # Awaitable[X] -> X
        return node

    def generic_visit(self, node: ast.AST) -> ast.AST:
        """The node's children transformed, then its own name (``NAME_FIELDS``) renamed."""
        node = super().generic_visit(node)
        field = NAME_FIELDS.get(type(node))
        if field is not None:
            setattr(node, field, rename(getattr(node, field)))
        return node

    def visit_alias(self, node: ast.alias) -> ast.AST:
        node.name = rename_dotted(node.name)
        if node.asname:
            node.asname = rename(node.asname)
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
        self.generic_visit(node)
        if node.module:
            node.module = rename_dotted(node.module)
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, str):
            node.value = rename_text(node.value)
        return node


def generate(source: str, source_path: str) -> str:
    """The sync module (formatted) for the async module text ``source``."""
    tree = AsyncToSync().visit(ast.parse(source))
    docstring = ast.get_docstring(tree, clean=False)
    if docstring is not None:  # the source's says how the pair is made; this one points to it
        module = source_path.removesuffix(".py").replace("/", ".")
        tree.body[0] = ast.Expr(ast.Constant(f"The sync twin of ``{module}``, generated: read that module."))
    ast.fix_missing_locations(tree)
    header = (
        f"# Generated from {source_path} by tools/async_to_sync.py: do not edit.\n"
        "# Change the async source and run `python tools/async_to_sync.py`.\n"
    )
    text = header + ast.unparse(tree) + "\n"
    target = str(ROOT / PAIRS[source_path])
    for command in (["check", "--select", "I,F401", "--fix", "--quiet"], ["format"]):  # imports sorted, formatted
        text = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--stdin-filename", target, "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if an output is not current; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for source_path, output_path in PAIRS.items():
        wanted = generate((ROOT / source_path).read_text(encoding="utf-8"), source_path)
        output = ROOT / output_path
        current = output.read_text(encoding="utf-8") if output.exists() else ""
        if current != wanted:
            stale.append(output_path)
            if not args.check:
                output.write_text(wanted, encoding="utf-8")
    if args.check and stale:
        print("not current (run python tools/async_to_sync.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
