"""The metric names a PromQL expression selects (`metric_names`) and those a /metrics text
exports (`exported_names`), for the tests that check every name our alert rules and dashboard
panels use is one a daemon exports. `metric_names` is not a PromQL parser: a tokenizer that
knows what else an identifier may be (a function or an aggregation before its parenthesis, a
keyword, a label in a matcher or in `by (...)`, a duration, a Grafana variable) and leaves
only the names of selectors, including `{__name__="..."}`."""

from __future__ import annotations

import re

# aggregation operators: their name may stand before `by (...)` or `without (...)`, not only `(`
AGGREGATIONS = frozenset(
    {
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    }
)
# binary and set operators, modifiers and literals written as words
KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"})
# followed by a parenthesised list of label names
LABEL_LISTS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<variable>\$(?:\{[^}]*\}|\w+))
  | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:ms|[smhdwy])?(?:\d+(?:ms|[smhdwy]))*)
  | (?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<open>[({\[])
  | (?P<close>[)}\]])
  | (?P<other>[-+*/%^=!<>~,@:])
    """,
    re.VERBOSE,
)


class PromQLError(ValueError):
    """An expression the tokenizer cannot read: it says where."""


def tokens(expr: str) -> list[tuple[str, str]]:
    """(kind, text) of each token, spaces and comments left out."""
    out, at = [], 0
    while at < len(expr):
        found = _TOKEN.match(expr, at)
        if found is None:
            raise PromQLError(f"cannot read PromQL at {at}: {expr[at : at + 20]!r} (in {expr!r})")
        if found.lastgroup not in ("space", "comment"):
            out.append((found.lastgroup, found.group()))
        at = found.end()
    return out


def metric_names(expr: str) -> set[str]:
    """The metric names `expr` selects."""
    toks = tokens(expr)
    names: set[str] = set()
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        following = toks[i + 1][1] if i + 1 < len(toks) else ""
        if kind == "open" and text == "{":
            end = _closing(toks, i)
            names |= _names_in_matchers(toks[i + 1 : end])
            i = end + 1
        elif kind == "open" and text == "[":  # a range or subquery's durations
            i = _closing(toks, i) + 1
        elif kind == "name" and text in LABEL_LISTS:
            i = _closing(toks, i + 1) + 1 if following == "(" else i + 1
        elif kind == "name" and text == "offset":
            i += 2  # (its duration)
        elif kind == "name" and (following == "(" or text in AGGREGATIONS or text.lower() in KEYWORDS):
            i += 1  # a function or an aggregation, or an operator
        elif kind == "name":
            names.add(text)
            i += 1
        else:
            i += 1
    return names


def _closing(toks: list[tuple[str, str]], at: int) -> int:
    """The index of the bracket that closes the one at `at`."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    if at >= len(toks) or toks[at][1] not in pairs:
        raise PromQLError(f"expected a bracket at token {at} of {''.join(t for _, t in toks)!r}")
    depth = 0
    for j in range(at, len(toks)):
        text = toks[j][1]
        if text in pairs:
            depth += 1
        elif text in pairs.values():
            depth -= 1
            if depth == 0:
                return j
    raise PromQLError(f"unclosed {toks[at][1]!r} in {''.join(t for _, t in toks)!r}")


def _names_in_matchers(toks: list[tuple[str, str]]) -> set[str]:
    """`__name__="x"` in a selector's matchers: the metric x."""
    out = set()
    for j in range(len(toks) - 2):
        (_, label), (_, op), (kind, value) = toks[j : j + 3]
        if label == "__name__" and op == "=" and kind == "string":
            out.add(value[1:-1])
    return out


# the series a family of each type has, by their names' ends (a counter's family is named
# with its `_total` in the text format prometheus_client writes)
SERIES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count")}


def exported_names(text: str) -> set[str]:
    """The series names a Prometheus text exposition declares in its `# HELP` and `# TYPE`
    lines, with or without samples: a histogram's `_bucket`, `_sum` and `_count`, a
    counter's with `_total`."""
    types: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) >= 3 and parts[0] == "#" and parts[1] in ("HELP", "TYPE"):
            types.setdefault(parts[2], "untyped")
            if parts[1] == "TYPE" and len(parts) == 4:
                types[parts[2]] = parts[3].strip()
    names = set()
    for family, kind in types.items():
        if kind == "counter" and not family.endswith("_total"):
            family += "_total"
        names |= {family + end for end in SERIES.get(kind, ("",))}
    return names
