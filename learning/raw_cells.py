"""Raw cells parsed by number: what the failure model (`learning.action_model`) and the time model
(`learning.durations`) read of an action name's distinct (arguments text, features text) pairs.

A raw cell is one arguments text and one features text as stored; a million steps with a numeric feature are
as many raw cells over a few thousand distinct arguments texts and situations. Each distinct text is parsed
once (`learning.features.RowParser`) and spread to the raw cells by number, and what a loop over the raw cells
would number as it met them (cells "args|situation", groundings "args", the design's columns) is numbered in
that same order (`first_seen`), so the models built from these arrays are the ones that loop built, to the
bit: `np.bincount` adds in the raw cells' order, as the loop did.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from learning.features import RowParser, Token


@dataclass
class ParsedCells:
    """An action name's raw cells, by number: the prior's design in parts (`learning.prior.design_parts`: the
    arguments' tokens, the features' tokens, the interaction tokens), each raw cell's cell (`cell`, into
    `cell_keys` "args|situation") and grounding (`grounding`, into `groundings` "args"), both numbered in the
    order first met, and its parsed arguments (`args_of`, into `parsed_args`, each (args, tokens, grounding))."""

    parts: list[tuple[np.ndarray, list[list[Token]]]]
    cell: np.ndarray
    cell_keys: list[str]
    grounding: np.ndarray
    groundings: list[str]
    args_of: np.ndarray
    parsed_args: list[tuple]

    def __len__(self) -> int:
        return len(self.cell)


def parse_cells(
    args: np.ndarray, features: np.ndarray, args_texts: list[str], features_texts: list[str], parser: RowParser
) -> ParsedCells:
    """The raw cells whose arguments and features are `args` and `features` (numbers into `args_texts` and
    `features_texts`), each distinct text parsed once."""
    args_numbers, _, args_of = unique(args)
    features_numbers, _, features_of = unique(features)
    texts = [args_texts[i] for i in args_numbers.tolist()]
    parsed_args = [parser.parse_args(text) for text in texts]
    parsed_features = [parser.parse_features(features_texts[i]) for i in features_numbers.tolist()]
    groundings: dict[str, int] = {}
    grounding, grounding_order = first_seen(
        np.array([groundings.setdefault(g, len(groundings)) for _, _, g in parsed_args], dtype=np.int64)[args_of]
    )
    grounding_names = list(groundings)
    situations: dict[str, int] = {}
    situation = np.array(
        [situations.setdefault(text, len(situations)) for _, _, _, text, _ in parsed_features], dtype=np.int64
    )[features_of]
    width = len(situations)
    situation_names = list(situations)
    pair, pairs = first_seen(grounding_order[grounding] * width + situation)
    # a cell is its key's text: two pairs that spell one key are one cell, as in a dictionary keyed by the text
    cell_numbers: dict[str, int] = {}
    keys = [grounding_names[p // width] + "|" + situation_names[p % width] for p in pairs.tolist()]
    cell = np.array([cell_numbers.setdefault(key, len(cell_numbers)) for key in keys], dtype=np.int64)[pair]
    # the design's parts: the arguments' tokens; the features' (as a step with arguments sees them, or one
    # without); the interaction tokens of the arguments in the situation
    has_args = np.array([bool(a) for a, _, _ in parsed_args], dtype=np.int64)[args_of]
    feature_parts = [part for _, tokens, _, _, objects in parsed_features for part in (tokens, objects)]
    both, first_cell, inverse = unique(args_of * width + situation)
    interactions: list[list[Token]] = [[] for _ in both]
    for j in np.argsort(first_cell).tolist():  # in the order first met: `RowParser` keeps the first of a text
        a = int(both[j]) // width
        _, _, listed, text, _ = parsed_features[features_of[first_cell[j]]]
        interactions[j] = parser.interactions(texts[a], parsed_args[a][0], listed, text)
    parts = [
        (args_of, [tokens for _, tokens, _ in parsed_args]),
        (features_of * 2 + has_args, feature_parts),
        (inverse, interactions),
    ]
    named = [grounding_names[g] for g in grounding_order.tolist()]
    return ParsedCells(parts, cell, list(cell_numbers), grounding, named, args_of, parsed_args)


def first_seen(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`values` (integers, none negative) renumbered 0, 1, 2, ... in the order each distinct value first
    occurs, and the distinct values in that order."""
    rank, distinct, _ = first_seen_at(values)
    return rank, distinct


def first_seen_at(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`first_seen`, and where each distinct value first occurs (increasing)."""
    distinct, first, inverse = unique(values)
    marked = np.zeros(len(inverse), dtype=bool)
    marked[first] = True
    at = np.flatnonzero(marked)  # the first occurrences, in order
    order = inverse[at]
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[inverse], distinct[order], at


def unique(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`np.unique(values, return_index=True, return_inverse=True)` of integers none of which is negative: the
    distinct values in increasing order, where each first occurs, and each value's place among them. Where the
    values' range is within a few times their number, by one pass over a table of the range: no sort."""
    values = np.asarray(values)
    n = len(values)
    top = int(values.max()) + 1 if n else 0
    if top > 4 * n + (1 << 16):
        distinct, first, inverse = np.unique(values, return_index=True, return_inverse=True)
        return distinct, first, inverse.reshape(-1)
    first = np.full(top, n, dtype=np.int64)
    np.minimum.at(first, values, np.arange(n, dtype=np.int64))
    distinct = np.flatnonzero(first < n)
    place = np.zeros(top, dtype=np.int64)
    place[distinct] = np.arange(len(distinct))
    return distinct, first[distinct], place[values]


def stable_order(values: np.ndarray) -> np.ndarray:
    """`np.argsort(values, kind="stable")` of integers none of which is negative, by radix sort where they
    fit in 16 bits."""
    if len(values) and int(values.max()) < 1 << 16:
        values = values.astype(np.uint16)
    return np.argsort(values, kind="stable")


def ragged(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions `starts[i]`, ..., `starts[i] + lengths[i] - 1` for each i in turn, as one array: the
    entries of variable-length pieces of a flat array, gathered piece after piece."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(ends[-1] if len(ends) else 0)
