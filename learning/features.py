"""What the failure model's prior sees of one step: tokens for the grounded action and the step's own features.

Tokens (each a sparse column with value 1 unless said otherwise or numeric):
- `g:<args>`: the grounded action's identity (for a seen grounding in a situation it was never seen in);
- `a<i>:<obj>`: the object in argument position i (a bad tool wherever it is used), at `OBJECT_VALUE`;
- `p<i><j>:<obj_i> <obj_j>`: an ordered pair of arguments (this tool on this host) and `u:<x> <y>` the same pair
  unordered (the road between two places, whichever way it is driven);
- `s:<objects>`: all the arguments in any order, for three or more (this truck on this road, either way);
- `t<i>:<type>`: the declared type in position i, when object types are given to `fit`;
- `a<i>:<obj>&f:<key>=<value>`: an argument in a situation, so that "this engine fails at peak hours" is not
  spread over every engine at peak hours (a linear model cannot form that conjunction itself);
- `n:<key>`: a numeric feature, its value as is; `f:<key>=<value>`: a string/bool feature, one-hot, for an
  action without arguments only.

A categorical situation enters the prior through the objects acting in it, not on its own (`situated`), so an
engine never tried at peak hours keeps its own record and gets tried, instead of being condemned with the one
that failed there. Features are kept per action name (one model per action name), so the action name itself is
not a token.

Entry points: `step_tokens` (the tokens of one step), `action_tokens`, `feature_tokens`; `RowParser` turns raw
`steps` rows into tokens with memoised JSON parsing; `situation_key(features)` is the part of the features that
splits a grounding's own counts (categorical values only: numeric features would make every step its own cell).
Why `s:` and situations through objects, and what was measured: docs/decisions/prior-tokens.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

Token = tuple[str, float]
# An argument-in-a-situation token enters at this value, not 1: its family's prior scale is fitted
# (`learning.families`), so this only sets where that fit starts and halves its ceiling for these tokens, so a
# grounding's failures seen in one situation are first put down to the grounding, then to the situation.
INTERACTION_VALUE = 0.5
# The failure model fits an object-in-a-position token (`a<i>:`) at this value, not 1, for the same reason:
# failures that several groundings share are first put down to the most that they share (the road every truck
# failed on, `p12:` and `u:`), then to one of its objects (the place the road leads to, `a2:`), which would
# also condemn every other road into that place, tried once or twice, at its first chance failure. Its weight
# is stored per unit of the token (`unit_weight`), so a model predicts with every action token at 1.
OBJECT_VALUE = 0.5


def action_tokens(
    args: tuple[str, ...], object_types: Mapping[str, str] | None = None, object_value: float = 1.0
) -> list[Token]:
    """Identity, per-position, pair and type tokens of a grounded action's arguments, each with its value: 1,
    and `object_value` for the per-position ones."""
    tokens = [("g:" + " ".join(args), 1.0)]
    for i, obj in enumerate(args):
        tokens.append((f"a{i}:{obj}", object_value))
        if object_types is not None and obj in object_types:
            tokens.append((f"t{i}:{object_types[obj]}", 1.0))
    for i in range(len(args)):
        for j in range(i + 1, len(args)):
            x, y = args[i], args[j]
            tokens.append((f"p{i}{j}:{x} {y}", 1.0))
            tokens.append((f"u:{min(x, y)} {max(x, y)}", 1.0))
    if len(args) > 2:  # `u:` for two arguments; here the objects together (a truck on a road, either way)
        tokens.append(("s:" + " ".join(sorted(args)), 1.0))
    return tokens


def feature_tokens(features: Mapping[str, Any] | None) -> list[Token]:
    """Step features as (token, value) pairs; None values and non-finite numbers carry no information."""
    if not features:
        return []
    out: list[Token] = []
    for key in sorted(features):
        value = features[key]
        if value is None:
            continue
        if isinstance(value, bool) or isinstance(value, str):
            out.append((f"f:{key}={str(value).lower()}", 1.0))
        elif isinstance(value, (int, float)):
            if math.isfinite(value):
                out.append((f"n:{key}", float(value)))
        else:
            out.append((f"f:{key}={value}", 1.0))
    return out


def situation_key(features: Mapping[str, Any] | None) -> str:
    """The categorical part of the features as one string ("" without any): a grounding's counts are kept per
    (arguments, situation)."""
    return "&".join(token for token, _ in feature_tokens(features) if token.startswith("f:"))


def interaction_tokens(args: tuple[str, ...], features: Mapping[str, Any] | None) -> list[str]:
    """One token per (argument position and object, one-hot situation feature) pair."""
    situation = [token for token, _ in feature_tokens(features) if token.startswith("f:")]
    return [f"a{i}:{obj}&{token}" for token in situation for i, obj in enumerate(args)]


def situated(tokens: list[Token], has_arguments: bool) -> list[Token]:
    """The feature tokens a step puts in the prior: a categorical feature enters through the objects acting in
    it (`interaction_tokens`), and on its own only for an action without arguments."""
    return [(t, v) for t, v in tokens if not t.startswith("f:")] if has_arguments else tokens


def unit_weight(token: str, weight: float, object_value: float) -> float:
    """A fitted weight per unit of `token`: a per-position token fitted at `object_value` counts that much."""
    return weight * object_value if token.startswith("a") and token[1:2].isdigit() and "&" not in token else weight


def step_tokens(
    args: tuple[str, ...], features: Mapping[str, Any] | None, object_types: Mapping[str, str] | None = None
) -> list[Token]:
    """Every token of one step: the grounded action, its situation, and the two combined."""
    return (
        action_tokens(args, object_types)
        + situated(feature_tokens(features), bool(args))
        + [(t, INTERACTION_VALUE) for t in interaction_tokens(args, features)]
    )


class RowParser:
    """Parses stored steps' JSON (arguments, features) into tokens, each distinct text once: a million steps
    share a few thousand argument lists and feature sets, so this is what keeps retraining inside its budget.

    `row(args_json, features_json)` -> (args, features, token parts, cell key "args|situation", grounding
    "args"); the token parts (argument tokens, feature tokens, interaction tokens) are shared list objects, so
    `learning.prior.design` maps each distinct part to columns once. `parse_args`, `parse_features` and
    `interactions` are its three parts, for callers that number the distinct texts themselves
    (`learning.action_model.fit_action`).
    """

    def __init__(self, object_types: Mapping[str, str] | None = None, object_value: float = 1.0) -> None:
        self.object_types = object_types
        self.object_value = object_value  # the per-position tokens' value (`OBJECT_VALUE` for the failure model)
        self._args: dict[str, tuple] = {}
        self._features: dict[str | None, tuple] = {}
        self._interactions: dict[tuple[str, str | None], list[Token]] = {}

    def parse_args(self, args_json: str) -> tuple:
        """(args, argument tokens, grounding "args") of an arguments text."""
        hit = self._args.get(args_json)
        if hit is None:
            args = tuple(json.loads(args_json))
            hit = self._args[args_json] = (
                args,
                action_tokens(args, self.object_types, self.object_value),
                " ".join(args),
            )
        return hit

    def parse_features(self, features_json: str | None) -> tuple:
        """(features, feature tokens, situation tokens, situation text, the feature tokens of a step with
        arguments) of a features text."""
        hit = self._features.get(features_json)
        if hit is None:
            features = json.loads(features_json) if features_json not in (None, "", "{}", "null") else None
            tokens = feature_tokens(features)
            situation = [t for t, _ in tokens if t.startswith("f:")]
            hit = self._features[features_json] = (
                features,
                tokens,
                situation,
                "&".join(situation),
                situated(tokens, True),
            )
        return hit

    def interactions(self, args_json: str, args: tuple, situation: list[str], situation_text: str) -> list[Token]:
        """The interaction tokens of parsed arguments in a parsed situation (kept per arguments text and
        situation text)."""
        hit = self._interactions.get((args_json, situation_text))
        if hit is None:
            hit = self._interactions[(args_json, situation_text)] = [
                (f"a{i}:{obj}&{s}", INTERACTION_VALUE) for s in situation for i, obj in enumerate(args)
            ]
        return hit

    def row(self, args_json: str, features_json: str | None) -> tuple:
        args, args_tokens, grounding = self.parse_args(args_json)
        features, tokens, situation, situation_text, through_objects = self.parse_features(features_json)
        tokens = through_objects if args else tokens
        interactions = self.interactions(args_json, args, situation, situation_text)
        return args, features, (args_tokens, tokens, interactions), grounding + "|" + situation_text, grounding
