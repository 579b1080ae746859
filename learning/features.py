"""What the failure model's prior sees of one step: tokens for the grounded action and the step's own features.

Tokens (each a sparse column with value 1 unless numeric):
- `g:<args>`: the grounded action's identity (for a seen grounding in a situation it was never seen in);
- `a<i>:<obj>`: the object in argument position i (a bad tool wherever it is used);
- `p<i><j>:<obj_i> <obj_j>`: an ordered pair of arguments (this tool on this host) and `u:<x> <y>` the same pair
  unordered (the road between two places, whichever way it is driven);
- `s:<objects>`: all the arguments in any order, for three or more (this truck on this road, either way: pairs
  alone have no token spanning the truck and the road, so a truck's failures on a road went to the road and to
  other trucks on it; `tests/test_learning_shrinkage.py`). Measured closed loop (`portfolio bench learning`,
  `--policies mean`, last 50 of 200 episodes, worlds reaching 0.95 of the oracle, pooled): vehicle-roads
  tuning seeds 200-219 12 -> 15 of 20 (0.949 -> 0.964); held out, seeds 1800-1819, vehicle-roads 12 -> 13
  (0.949 -> 0.958), tools 11 -> 13 (0.973 -> 0.967), and 5 worlds of each other type (1800-1804) alike but
  pairs 5 -> 4 (0.993 -> 0.981, its worst 0.948): one to three worlds, within run-to-run noise. A correction of
  what the estimate generalises to, not a measured gain;
- `t<i>:<type>`: the declared type in position i, when object types are given to `fit`;
- `a<i>:<obj>&f:<key>=<value>`: an argument in a situation, so that "this engine fails at peak hours" is not
  spread over every engine at peak hours (a linear model cannot form that conjunction itself);
- `n:<key>`: a numeric feature, its value as is; `f:<key>=<value>`: a string/bool feature, one-hot, for an
  action without arguments only.

A categorical situation enters the prior through the objects acting in it, not on its own (`situated`). When
only one engine was ever tried at peak hours and failed there, "peak hours are bad" and "this engine is bad at
peak hours" fit the traces equally well; the first condemns every engine never tried at peak, so none is ever
tried there and nothing corrects it, while the second leaves them their own record, so the planner tries one
and learns. A situation that is bad for every object is still learned, object by object, from the failures of
each. Measured together with the fitted token scales (`learning.families`), closed loop (`portfolio bench
learning`, 200 episodes, last 50, learned / oracle expected success, median [min] over worlds). Tuning seeds
0-9, tools: 0.93 [0.84] -> 0.98 [0.89]; either change alone 0.90 (situations through objects only) or 0.94
(Gaussian family scales only). Held out, 20 worlds per type, before -> after: seeds 700-719, tools 0.95 [0.86]
-> 1.00 [0.93], pairs 1.00 [0.95] -> 1.00 [0.95], costed 1.00 [0.93] -> 0.99 [0.96], the others 0.99-1.00 both;
seeds 800-819, pairs 0.97 [0.92] -> 0.97 [0.92], and every type 0.97-1.00 after (tools 0.99 [0.88]).
Family scales never tighter than the default prior: tools 1.00 [0.91] (seeds 700-719) but its worst failures /
cost-blind 0.57 and pairs' 0.60; Gaussian family scales without the Student-t: pairs 0.99 [0.91] with failures
/ cost-blind 0.20 -> 0.29 (not kept).

Features are kept per action name (one model per action name), so the action name itself is not a token.
`situation_key` is the part of the features that splits a grounding's own counts (categorical values only:
numeric features would make every step its own cell).
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
    if len(args) > 2:  # `u:` for two arguments; here the objects together (a truck on a road, either way)
        tokens.append("s:" + " ".join(sorted(args)))
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


def step_tokens(
    args: tuple[str, ...], features: Mapping[str, Any] | None, object_types: Mapping[str, str] | None = None
) -> list[Token]:
    """Every token of one step: the grounded action, its situation, and the two combined."""
    return (
        [(t, 1.0) for t in action_tokens(args, object_types)]
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

    def __init__(self, object_types: Mapping[str, str] | None = None) -> None:
        self.object_types = object_types
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
                [(t, 1.0) for t in action_tokens(args, self.object_types)],
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
