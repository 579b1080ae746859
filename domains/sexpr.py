"""S-expressions with line numbers: the tokenizer under the PDDL reader.

Every list remembers the line of its '(' and of each element, so that any later error (an undefined predicate
deep in an effect, say) can name the exact line. A missing ')' is reported at the list that most likely lacks it.
"""

from __future__ import annotations

from typing import Any

from domains.errors import PDDLSyntaxError


class SList(list[Any]):  # elements are str or SList
    """A parenthesised list; `line` is where its '(' is, `lines[i]` is where element i starts."""

    __slots__ = ("line", "lines")
    line: int
    lines: list[int]


def new_list(line: int) -> SList:
    node = SList()
    node.line = line
    node.lines = []
    return node


def read_sexpr(text: str, file: str | None = None) -> SList:
    """Tokenize and nest `text`; returns a root list holding the top-level expressions. Names are lower-cased
    because PDDL is case-insensitive; `;` starts a comment; as in Fast Downward's tokenizer, `?` always starts a
    new token (`(at?x)` reads as `(at ?x)`)."""
    root = new_list(1)
    stack = [root]
    current, lines = root, root.lines
    for lineno, raw in enumerate(text.lower().split("\n"), 1):
        if ";" in raw:
            raw = raw.split(";", 1)[0]
        if "(" in raw or ")" in raw:
            raw = raw.replace("(", " ( ").replace(")", " ) ")
        if "?" in raw:  # as Fast Downward's tokenizer: a variable starts a token, so `(aircraft?a)` is 2 tokens
            raw = raw.replace("?", " ?")
        for token in raw.split():
            if token == "(":
                node = new_list(lineno)
                current.append(node)
                lines.append(lineno)
                stack.append(node)
                current, lines = node, node.lines
            elif token == ")":
                if len(stack) == 1:
                    raise PDDLSyntaxError(
                        "unexpected ')': there is no open '(' for it to close.", file=file, line=lineno
                    )
                stack.pop()
                current = stack[-1]
                lines = current.lines
            else:
                current.append(token)
                lines.append(lineno)
    if len(stack) > 1:
        # A missing ')' is only noticed at the end of the file, where the outermost list is left open; the
        # list that really lacks it is the one that swallowed the next section or action field.
        culprit = _swallower(stack[1]) or stack[-1]
        raise PDDLSyntaxError(
            f"unbalanced parentheses: the '(' opened at line {culprit.line} is never closed; "
            f"expected ')' before the end of the file.",
            file=file,
            line=culprit.line,
        )
    return root


_SECTIONS = frozenset(
    {
        ":requirements",
        ":types",
        ":constants",
        ":predicates",
        ":functions",
        ":action",
        ":derived",
        ":durative-action",
        ":domain",
        ":objects",
        ":init",
        ":goal",
        ":metric",
    }
)
_ACTION_FIELDS = frozenset({":parameters", ":precondition", ":effect"})


def _swallower(node: SList) -> SList | None:
    """The first list (depth first) holding a section or action field it cannot hold."""
    for child in node:
        if isinstance(child, SList):
            if child and isinstance(child[0], str) and child[0] in _SECTIONS and (not node or node[0] != "define"):
                return node
            found = _swallower(child)
            if found is not None:
                return found
        elif child in _ACTION_FIELDS and node[0] != ":action":
            return node
    return None
