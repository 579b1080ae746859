"""What the failure model's prior sees of one step: tokens for the grounded action and the step's own features.

Tokens (each a sparse column with value 1 unless numeric):
- `g:<args>`: the grounded action's identity (for a seen grounding in a situation it was never seen in);
- `a<i>:<obj>`: the object in argument position i (a bad tool wherever it is used);
- `p<i><j>:<obj_i> <obj_j>`: an ordered pair of arguments (this tool on this host) and `u:<x> <y>` the same pair
  unordered (the road between two places, whichever way it is driven);
- `t<i>:<type>`: the declared type in position i, when object types are given to `fit`;
- `f:<key>=<value>`: a string/bool feature, one-hot;  `n:<key>`: a numeric feature, its value as is;
- `a<i>:<obj>&f:<key>=<value>`: an argument in a situation, so that "this engine fails at peak hours" is not
  spread over every engine at peak hours (a linear model cannot form that conjunction itself).

Features are kept per action name (one model per action name), so the action name itself is not a token.
`situation_key` is the part of the features that splits a grounding's own counts (categorical values only:
numeric features would make every step its own cell).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

Token = tuple[str, float]
# An argument-in-a-situation token enters at this value, not 1: under the same L2 penalty its weight costs
# 1/value^2 as much to grow, so a grounding's failures seen in one situation are first put down to the grounding
# (which carries over to other situations) and only then to that situation.
INTERACTION_VALUE = 0.5


def action_tokens(args: tuple[str, ...], object_types: Mapping[str, str] | None = None) -> list[str]:
    """Identity, per-position, pair and type tokens of a grounded action's arguments."""
    tokens = ["g:" + " ".join(args)]
    for i, obj in enumerate(args):
        tokens.append(f"a{i}:{obj}")
        if object_types is not None and obj in object_types:
            tokens.append(f"t{i}:{object_types[obj]}")
    for i in range(len(args)):
        for j in range(i + 1, len(args)):
            x, y = args[i], args[j]
            tokens.append(f"p{i}{j}:{x} {y}")
            tokens.append(f"u:{min(x, y)} {max(x, y)}")
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


def step_tokens(args: tuple[str, ...], features: Mapping[str, Any] | None,
                object_types: Mapping[str, str] | None = None) -> list[Token]:
    """Every token of one step: the grounded action, its situation, and the two combined."""
    return ([(t, 1.0) for t in action_tokens(args, object_types)] + feature_tokens(features)
            + [(t, INTERACTION_VALUE) for t in interaction_tokens(args, features)])


class RowParser:
    """Parses stored steps' JSON (arguments, features) into tokens, each distinct text once: a million steps
    share a few thousand argument lists and feature sets, so this is what keeps retraining inside its budget.

    `row(args_json, features_json)` -> (args, features, token parts, cell key "args|situation", grounding
    "args"); the token parts (argument tokens, feature tokens, interaction tokens) are shared list objects, so
    `learning.prior.design` maps each distinct part to columns once.
    """

    def __init__(self, object_types: Mapping[str, str] | None = None) -> None:
        self.object_types = object_types
        self._args: dict[str, tuple] = {}
        self._features: dict[str, tuple] = {}
        self._interactions: dict[tuple[str, str | None], list[Token]] = {}

    def _parse_args(self, args_json: str) -> tuple:
        import json

        hit = self._args.get(args_json)
        if hit is None:
            args = tuple(json.loads(args_json))
            hit = self._args[args_json] = (args, [(t, 1.0) for t in action_tokens(args, self.object_types)],
                                           " ".join(args))
        return hit

    def _parse_features(self, features_json: str | None) -> tuple:
        import json

        hit = self._features.get(features_json)
        if hit is None:
            features = json.loads(features_json) if features_json not in (None, "", "{}", "null") else None
            tokens = feature_tokens(features)
            situation = [t for t, _ in tokens if t.startswith("f:")]
            hit = self._features[features_json] = (features, tokens, situation, "&".join(situation))
        return hit

    def row(self, args_json: str, features_json: str | None) -> tuple:
        args, args_tokens, grounding = self._parse_args(args_json)
        features, tokens, situation, situation_text = self._parse_features(features_json)
        interactions = self._interactions.get((args_json, situation_text))
        if interactions is None:
            interactions = self._interactions[(args_json, situation_text)] = [
                (f"a{i}:{obj}&{s}", INTERACTION_VALUE) for s in situation for i, obj in enumerate(args)]
        return args, features, (args_tokens, tokens, interactions), grounding + "|" + situation_text, grounding
