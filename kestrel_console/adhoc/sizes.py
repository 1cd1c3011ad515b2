"""What a query may build in the server's memory: the guard's rule for values and rows the
query makes rather than reads.

The rule: **a function whose result can be larger than its arguments by more than a constant
factor is a builder, and runs only with the arguments that set its size known in the text,
within a budget for the whole query.** Every other allowlisted function makes a value at most
a constant factor of its arguments (``md5``, ``lower``, ``substr``, ``translate``: at most as
many characters as its input; ``encode``, ``quote_literal``, ``to_json``: a few times it).
The builders, each reviewed against PostgreSQL 15's source:

- generators, whose size is a number: ``repeat(text, n)`` (the text a literal too),
  ``lpad``/``rpad(text, n)``, and ``format``'s widths and precisions: literals, and all of them
  together within ``MAX_BUILT`` characters per query (``repeat(...) || repeat(...)`` counts
  twice); a ``*`` width (taken from an argument) is refused, and so is a format string that is
  not a literal (its widths cannot be read);
- copiers, which copy one argument once per match or element of another (a product of two
  sizes): ``replace``'s and ``regexp_replace``'s replacement, ``array_to_string``'s separator
  and null text, ``concat_ws``'s separator, ``string_agg``'s delimiter (once per row),
  ``ts_headline``'s options (StartSel, StopSel, FragmentDelimiter: once per highlighted word or
  fragment; in the three-argument call the last one is the options or the query: a literal, or
  a ``to_tsquery``-family call or a cast to ``tsquery``), and a ``format`` argument named by
  more than one specifier (``%1$s%1$s``): the copied argument must be a literal of at most
  ``MAX_COPIED`` characters (a constant factor), and a ``format`` argument is used at most once;
- ``array_fill`` (an array of any size from two small arguments) and ``jsonb_pretty`` (it
  indents every line by its depth: quadratic in the nesting of a 28 KB literal, 780 MB):
  refused;
- accumulators, which build one value from every row they read (``array_agg``, ``string_agg``,
  ``json_agg``, ``jsonb_agg``, ``json_object_agg``, ``jsonb_object_agg``, ``xmlagg``,
  ``range_agg``, ``ARRAY(SELECT ...)``): their size is the number of rows times the size of
  each. Rows a query reads from tables cost what the data costs; rows it makes do not. The
  rows a query makes: ``VALUES`` lists (their rows), ``generate_series`` with literal bounds
  (its count), and the set-returning functions of ``LITERAL_BOUNDED_ROWS`` whose arguments are
  all literals (at most one row per character of them, plus one); every other set-returning
  function (``SET_RETURNING``: with an argument that is not a literal, or reading the server's
  state), and a recursive CTE, makes rows no literal bounds. An accumulator is refused in a
  query that makes unbounded rows or more than ``MAX_MADE_ROWS`` (the product of all the
  counts: they may be joined). And its rows copy what they hold: in a query with an
  accumulator, the generators' characters times the rows made must stay within
  ``MAX_BUILT``, and where rows are read from relations (a table, a view, a CTE: their count
  is not in the text), the generators may make at most ``MAX_COPIED`` characters (a constant
  factor per row read).

What no rule of the text bounds (constant factors composed: ``v || v || ... || v`` over one
CTE column, nested encoders, joins multiplying rows) is left to the backend memory watchdog
(``backend_memory``) and the wall clock (``hard_limit``); ``docs/guarantees.md`` says which
holds where.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from pglast import ast
from pglast.enums import SubLinkType

__all__ = [
    "LITERAL_BOUNDED_ROWS",
    "MAX_BUILT",
    "MAX_COPIED",
    "MAX_MADE_ROWS",
    "SET_RETURNING",
    "SizeRefused",
    "check_sizes",
]

# Characters all the generators of one query may make together.
MAX_BUILT = 1_000_000
# The longest text a copier may copy once per match or element.
MAX_COPIED = 100
# Rows the query's generate_series calls may make together where an accumulator reads.
MAX_MADE_ROWS = 100_000

# name -> index of the argument that sets the size (repeat: its text too).
_SIZE_ARGUMENT = {"repeat": 1, "lpad": 1, "rpad": 1}
# name -> indexes of the arguments copied once per match or element.
_COPIED = {
    "replace": (2,),
    "regexp_replace": (2,),
    "array_to_string": (1, 2),
    "concat_ws": (0,),
    "string_agg": (1,),
    "ts_headline": (3,),
}
_COPIED_WHAT = {"replace": "replacement", "regexp_replace": "replacement", "ts_headline": "options"}
_NEVER_BUILT = {
    "array_fill": "builds an array of any size from two small arguments",
    "jsonb_pretty": "indents every line by its depth, a size quadratic in its input's nesting (use ::text)",
}
# ts_headline(config, document, query): a last argument that is a query, not options.
_TSQUERY_MAKERS = frozenset({"to_tsquery", "plainto_tsquery", "phraseto_tsquery", "websearch_to_tsquery"})
# Every allowlisted set-returning function (pg_proc.proretset; a test checks it against the
# catalog and the allowlist).
SET_RETURNING = frozenset(
    {
        "aclexplode", "generate_series", "generate_subscripts", "json_array_elements",
        "json_array_elements_text", "json_each", "json_each_text", "json_object_keys",
        "json_populate_recordset", "json_to_recordset", "jsonb_array_elements",
        "jsonb_array_elements_text", "jsonb_each", "jsonb_each_text", "jsonb_object_keys",
        "jsonb_path_query", "jsonb_path_query_tz", "jsonb_populate_recordset", "jsonb_to_recordset",
        "pg_available_extension_versions", "pg_available_extensions", "pg_cursor",
        "pg_event_trigger_ddl_commands", "pg_event_trigger_dropped_objects",
        "pg_extension_update_paths", "pg_get_catalog_foreign_keys", "pg_get_keywords",
        "pg_get_publication_tables", "pg_listening_channels", "pg_mcv_list_items",
        "pg_options_to_table", "pg_prepared_statement", "pg_show_all_settings", "pg_snapshot_xip",
        "pg_stat_get_backend_idset", "pg_stat_get_progress_info", "pg_stat_get_slru",
        "pg_stat_get_subscription", "pg_stat_get_wal_senders", "pg_tablespace_databases",
        "pg_timezone_abbrevs", "pg_timezone_names", "regexp_matches", "regexp_split_to_table",
        "string_to_table", "ts_debug", "ts_parse", "ts_token_type", "txid_snapshot_xip", "unnest",
    }
)  # fmt: skip
# Set-returning functions making at most one row per character of their literal arguments
# (plus one): elements, keys, matches, pieces or tokens of the text. Not jsonb_path_query: a
# path like $[0,0][0,0]... makes a number of items exponential in its length.
LITERAL_BOUNDED_ROWS = frozenset(
    {
        "unnest", "generate_subscripts", "json_array_elements", "json_array_elements_text",
        "jsonb_array_elements", "jsonb_array_elements_text", "json_each", "json_each_text",
        "jsonb_each", "jsonb_each_text", "json_object_keys", "jsonb_object_keys",
        "json_populate_recordset", "jsonb_populate_recordset", "json_to_recordset",
        "jsonb_to_recordset", "regexp_matches", "regexp_split_to_table", "string_to_table",
        "ts_parse", "ts_debug", "aclexplode", "pg_options_to_table", "txid_snapshot_xip",
        "pg_snapshot_xip",
    }
)  # fmt: skip
ACCUMULATORS = frozenset(
    {"array_agg", "string_agg", "json_agg", "jsonb_agg", "json_object_agg", "jsonb_object_agg", "xmlagg", "range_agg"}
)
_SERVER = "in the server's memory, which no setting bounds"
# A format() specifier: %[n$][flags][width][.precision]type (PostgreSQL 15: flags '-', width a
# number, '*' or '*n$'; it has no precision, read here anyway to refuse it as a width would be).
_SPECIFIER = re.compile(
    r"%(?:(?P<pos>\d+)\$)?(?P<flags>-*)(?P<width>\*(?:\d+\$)?|\d+)?(?:\.(?P<prec>\d+))?(?P<type>.?)"
)


class SizeRefused(Exception):
    """The query builds more than the rule allows; ``reason`` says what."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _literal(node: Any) -> Any:
    """The value of an integer, numeric or string constant (through a cast), else None."""
    while isinstance(node, ast.TypeCast):
        node = node.arg
    if isinstance(node, ast.A_Const) and not node.isnull:
        value = node.val
        if isinstance(value, ast.Integer):
            return value.ival
        if isinstance(value, ast.Float):
            try:
                return Decimal(value.fval)
            except InvalidOperation:
                return None
        if isinstance(value, ast.String):
            return value.sval
    return None


def _name(node: ast.FuncCall) -> str:
    return [n.sval for n in node.funcname if isinstance(n, ast.String)][-1]


def check_sizes(nodes: list[ast.Node]) -> None:
    """Raise SizeRefused unless the builders among ``nodes`` (every node of one statement)
    keep to the rule above."""
    built = 0
    made_rows, made_product = 0, 1  # joined, the rows multiply; side by side, they add
    unbounded_rows: str | None = None
    accumulator: str | None = None
    reads_relations = False
    for node in nodes:
        count: int | None = None
        if isinstance(node, ast.WithClause) and node.recursive:
            unbounded_rows = unbounded_rows or "a recursive CTE"
        elif isinstance(node, ast.SubLink) and node.subLinkType == SubLinkType.ARRAY_SUBLINK:
            accumulator = accumulator or "ARRAY(SELECT ...)"
        elif isinstance(node, ast.RangeVar):
            reads_relations = True
        elif isinstance(node, ast.SelectStmt) and node.valuesLists:
            count = len(node.valuesLists)
        elif isinstance(node, ast.FuncCall):
            name = _name(node)
            args = list(node.args or ())
            if name in _NEVER_BUILT:
                raise SizeRefused(f"function {name}: {_NEVER_BUILT[name]}: it would build it {_SERVER}")
            if name in ACCUMULATORS:
                accumulator = accumulator or name
            elif name in SET_RETURNING:
                count = _set_rows(name, args)
                if count is None:
                    unbounded_rows = unbounded_rows or _unbounded(name)
            if name == "ts_headline":
                _check_headline(args)
            built += _generated(name, args)
            if name == "format":
                built += _format_widths(args)
            for index in _COPIED.get(name, ()):
                _check_copied(name, args, index)
            if built > MAX_BUILT:
                raise SizeRefused(
                    f"function {name}: the query's repeat, lpad, rpad and format widths make more than "
                    f"{MAX_BUILT:,} characters together (it builds them {_SERVER})"
                )
        if count is not None:
            made_rows += count
            made_product *= max(count, 1)
    if accumulator is not None:
        _check_accumulated(accumulator, max(made_rows, made_product), unbounded_rows, reads_relations, built)


def _check_accumulated(accumulator: str, made_rows: int, unbounded: str | None, reads: bool, built: int) -> None:
    """An accumulator's value is its rows times what each holds: bounded rows, and generators
    whose characters, copied once per row, stay within the budget."""
    if unbounded is None and made_rows > MAX_MADE_ROWS:
        unbounded = f"VALUES and set-returning functions making up to {made_rows:,} rows (more than {MAX_MADE_ROWS:,})"
    if unbounded is not None:
        raise SizeRefused(
            f"{accumulator} over rows the query makes ({unbounded}): it builds one value from "
            f"every row {_SERVER}; aggregate rows read from tables, or make at most {MAX_MADE_ROWS:,}"
        )
    if reads and built > MAX_COPIED:
        raise SizeRefused(
            f"{accumulator} in a query whose repeat, lpad, rpad and format widths make {built:,} characters, over "
            f"rows read from relations: each row may copy them into one value {_SERVER}; at most {MAX_COPIED} "
            "characters there"
        )
    if built * made_rows > MAX_BUILT:
        raise SizeRefused(
            f"{accumulator} over {made_rows:,} made rows, each of which may copy the {built:,} characters of the "
            f"query's repeat, lpad, rpad and format widths into one value {_SERVER}: at most {MAX_BUILT:,} together"
        )


def _unbounded(name: str) -> str:
    if name == "generate_series":
        return "generate_series with bounds that are not literals"
    if name in LITERAL_BOUNDED_ROWS:
        return f"{name} of an argument that is not a literal"
    return f"{name}, a set-returning function whose rows no literal bounds"


def _set_rows(name: str, args: list[Any]) -> int | None:
    """The most rows a set-returning call makes, when its literal arguments bound them."""
    if name == "generate_series":
        return _series_rows(args)
    if name not in LITERAL_BOUNDED_ROWS or not args:
        return None
    characters = 1
    for arg in args:
        if _is_null(arg):
            continue
        value = _literal(arg)
        if value is None:
            return None
        characters += len(str(value))
    return characters


def _is_null(node: Any) -> bool:
    while isinstance(node, ast.TypeCast):
        node = node.arg
    return isinstance(node, ast.A_Const) and bool(node.isnull)


def _check_headline(args: list[Any]) -> None:
    """ts_headline([config,] document, query [, options]): with three arguments the last is the
    query or the options: a literal (checked as options are), or plainly a query."""
    if len(args) != 3:
        return
    last = args[2]
    if isinstance(last, ast.FuncCall) and _name(last) in _TSQUERY_MAKERS:
        return
    if isinstance(last, ast.TypeCast) and [n.sval for n in last.typeName.names if isinstance(n, ast.String)][-1:] == [
        "tsquery"
    ]:
        return
    _check_copied("ts_headline", args, 2)


def _generated(name: str, args: list[Any]) -> int:
    where = _SIZE_ARGUMENT.get(name)
    if where is None:
        return 0
    size = _literal(args[where]) if len(args) > where else None
    text = _literal(args[0]) if args else None
    built: int | None = None
    if isinstance(size, int) and name != "repeat":
        built = size
    elif isinstance(size, int) and isinstance(text, str):
        built = size * max(len(text), 1)
    if built is None or built > MAX_BUILT:
        what = "a literal text and count" if name == "repeat" else "a literal length"
        raise SizeRefused(
            f"function {name}: needs {what} making at most {MAX_BUILT:,} characters (it builds its value {_SERVER})"
        )
    return max(built, 0)


def _format_widths(args: list[Any]) -> int:
    """format(): a literal format string, widths as literals, each argument used once."""
    template = _literal(args[0]) if args else None
    if not isinstance(template, str):
        raise SizeRefused(f"function format: needs a literal format string (its widths set sizes {_SERVER})")
    total, used, following = 0, set(), 0
    for match in _SPECIFIER.finditer(template):
        if match["type"] == "%" and not (match["pos"] or match["flags"] or match["width"]):
            continue
        width = match["width"] or ""
        if width.startswith("*"):
            raise SizeRefused(f"function format: a * width takes the width from an argument (it sets a size {_SERVER})")
        total += int(width or 0) + int(match["prec"] or 0)
        if total > MAX_BUILT:
            raise SizeRefused(f"function format: widths over {MAX_BUILT:,} characters (it pads {_SERVER})")
        position = int(match["pos"]) if match["pos"] else following + 1
        if position in used:
            raise SizeRefused(
                f"function format: argument {position} is used more than once (each use copies it {_SERVER})"
            )
        used.add(position)
        following = position
    return total


def _check_copied(name: str, args: list[Any], index: int) -> None:
    if len(args) <= index:
        return
    value = _literal(args[index])
    if not isinstance(value, str) or len(value) > MAX_COPIED:
        what = _COPIED_WHAT.get(name, "separator" if name != "array_to_string" else "separator and null text")
        raise SizeRefused(
            f"function {name}: its {what} is copied once per match or element: it must be a literal of at "
            f"most {MAX_COPIED} characters (it builds its value {_SERVER})"
        )


def _series_rows(args: list[Any]) -> int | None:
    """The rows generate_series(a, b [, step]) makes when its bounds are numeric literals."""
    values = [_literal(arg) for arg in args]
    if len(values) not in (2, 3) or not all(isinstance(v, (int, Decimal)) for v in values):
        return None
    start, stop = Decimal(values[0]), Decimal(values[1])
    step = Decimal(values[2]) if len(values) == 3 else Decimal(1)
    if step == 0:
        return None
    count = (stop - start) / step
    return max(int(count) + 1, 0) if count.is_finite() else None
