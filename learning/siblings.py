"""Changes shared by siblings: a road that breaks for one van has broken for the other vans too, most likely.

A kin group (`learning.counts.kin_key`: a grounding's objects, in any order) whose failure rate changed
(`learning.changes`) may have changed because of something it shares with other groundings of the same action
name. Its siblings are the kin groups that differ from it in one object: `drive v1 a b` and `drive v2 a b` share
the road (`a b`); `drive v1 x b` shares the van and the destination. For each set S of the changed group's
objects but one, the hypothesis H_S says that every sibling holding S changed at the same step, to one common
rate:

    prior     P(H_S) = 1 / (k + 1)   for k objects: the change belongs to one of the k sets, or to the grounding
                                     alone, each as likely
    evidence  the siblings' steps since the change: under H_S, one common new rate for them and the changed
              group (Jeffreys Beta(1/2, 1/2)); otherwise each sibling goes on at its own rate before the change
              (a Beta from its steps since its own last change), and the changed group at a new rate of its own

A change is a group's own cut: one found on its own record (`learning.changes`) or, by `merged_breaks`
before, on a family's merged record (every group holding S, its steps in the order recorded) and put down to
it: three vans failing once each on a road add up to a break before any one van's record shows it.

Each sibling gets the probability of the most probable shared change it belongs to, and the steps and failures
of that change's common rate (the changed group's since its change and the siblings' since it).
`learning.model` mixes its p_fail: (1 - P) its own estimate + P the common rate's. So the plans leave a road
that broke for one van before every other van has failed on it too, and a sibling driven since the change
without failing clears itself: one success weighs about 8:1 against a change to a rate that failed 3 of 3.

    cut = merged_breaks(cut, group, step, failed, families(group_action, group_objects), change_odds)
    shared = sibling_changes(cut, group, step, failed, group_action, group_objects)  # per kin group [P, N, F]
    mean, concentration = mixed(mean, concentration, shared[:, 0], shared[:, 1], shared[:, 2])

Why, and what it measured: docs/decisions/aging-evidence.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.special import betaln

from learning.changes import current_segments
from learning.raw_cells import ragged

JEFFREYS = 0.5


def sibling_changes(
    cut: np.ndarray,
    group: np.ndarray,
    step: np.ndarray,
    failed: np.ndarray,
    group_action: np.ndarray,
    group_objects: Sequence[tuple[str, ...]],
    run: np.ndarray | None = None,
    fade: Callable[[int, int], float] | None = None,
) -> np.ndarray:
    """Per kin group, [P(it shares a sibling's change), steps, failures of the change's common rate] (all 0
    where it shares none), as the module docstring says. Inputs: each group's last cut (`cut`: the action
    name's step counter at it, -1 for none) and, per step, its `group`, its number among its action name's
    steps (`step`) and whether it `failed`; each group's action name number and objects (sorted). With `run` (each
    step's run number) and `fade(lead, runs_ago)` (the weight staleness leaves a changed group's evidence
    `runs_ago` runs after its last visit), the steps and failures since a change are weighted as the changed
    group's own would be, counting from the newest step any of its siblings took since: they go stale as one
    record, so what a change condemned is tried again when the change itself would be. Vectorised over the
    (change, sibling) pairs' steps; Python touches each kin group's objects once, and only when a change was
    found."""
    out = np.zeros((len(cut), 3))
    changed = [g for g in np.flatnonzero(cut >= 0).tolist() if len(group_objects[g]) >= 2]
    if not changed:
        return out
    # each shared set S (action name, the objects but one) of a changed group: its newest change (the lead)
    lead_of: dict[tuple[int, tuple[str, ...]], int] = {}
    for g in changed:
        objects = group_objects[g]
        for i in range(len(objects)):
            key = (int(group_action[g]), objects[:i] + objects[i + 1 :])
            if key not in lead_of or cut[g] > cut[lead_of[key]]:
                lead_of[key] = g
    number = {key: i for i, key in enumerate(lead_of)}
    pair_family, pair_group = [], []  # every (family, member) pair, the lead's own included
    for h, objects in enumerate(group_objects):
        if len(objects) < 2:
            continue
        action = int(group_action[h])
        for f in dict.fromkeys(number.get((action, objects[:i] + objects[i + 1 :])) for i in range(len(objects))):
            if f is not None:  # each family once, though an object twice leaves the same set twice
                pair_family.append(f)
                pair_group.append(h)
    family, member = np.array(pair_family, dtype=np.int64), np.array(pair_group, dtype=np.int64)
    lead = np.array(list(lead_of.values()), dtype=np.int64)
    at = cut[lead]  # each family's change: its lead's step counter there
    rows, pair = _member_steps(group, member, len(cut))
    after = step[rows] >= at[family[pair]]
    own = step[rows] >= cut[member[pair]]  # a member's current segment before the change: since its own cut
    lost = failed[rows].astype(float)
    n_pairs = len(member)
    n_after = np.bincount(pair, weights=after, minlength=n_pairs)
    f_after = np.bincount(pair, weights=after * lost, minlength=n_pairs)
    before = own & ~after
    n_before = np.bincount(pair, weights=before, minlength=n_pairs)
    f_before = np.bincount(pair, weights=before * lost, minlength=n_pairs)
    is_lead = member == lead[family]
    n_families = len(lead)
    n_all = np.bincount(family, weights=n_after, minlength=n_families)
    f_all = np.bincount(family, weights=f_after, minlength=n_families)
    a = JEFFREYS
    # log Bayes factor of H_S: every member's steps since from one new rate, against the lead's from a new rate
    # of its own and every other member's from its rate before
    stays = np.where(
        is_lead, 0.0,
        betaln(f_before + f_after + a, n_before - f_before + n_after - f_after + a)
        - betaln(f_before + a, n_before - f_before + a),
    )  # fmt: skip
    lead_pair = np.flatnonzero(is_lead)  # each family's lead's pair (its steps since its change)
    lead_n = np.zeros(n_families)
    lead_f = np.zeros(n_families)
    lead_n[family[lead_pair]], lead_f[family[lead_pair]] = n_after[lead_pair], f_after[lead_pair]
    log_odds = (
        betaln(f_all + a, n_all - f_all + a)
        - betaln(lead_f + a, lead_n - lead_f + a)
        - np.bincount(family, weights=stays, minlength=n_families)
    )
    k = np.array([len(group_objects[g]) for g in lead.tolist()], dtype=float)
    p = 1.0 / (1.0 + np.exp(-np.clip(log_odds - np.log(k), -500.0, 500.0)))  # prior 1 / (k + 1)
    weight = np.ones(n_families)
    if fade is not None and run is not None:
        newest = np.full(n_families, -1, dtype=np.int64)
        np.maximum.at(newest, family[pair[after]], run[rows[after]])
        last_run = int(run.max())
        weight = np.array([fade(g, last_run - r) for g, r in zip(lead.tolist(), newest.tolist())], dtype=float)
    # each member's most probable shared change, the lead's own excluded
    for f, h, lead_here in zip(family.tolist(), member.tolist(), is_lead.tolist()):
        if not lead_here and p[f] > out[h, 0]:
            out[h] = (p[f], weight[f] * n_all[f], weight[f] * f_all[f])
    return out


def families(group_action: np.ndarray, group_objects: Sequence[tuple[str, ...]]) -> list[list[int]]:
    """The families of kin groups alike but for one object: for every set S (action name, a group's objects but
    one) that two groups or more hold, those groups, in the order of their numbers; the sets in the order first
    met, group by group. `group_action`, `group_objects`: each group's action name number and objects (sorted)."""
    holders: dict[tuple[int, tuple[str, ...]], list[int]] = {}
    for h, objects in enumerate(group_objects):
        if len(objects) < 2:
            continue
        action = int(group_action[h])
        for i in range(len(objects)):
            found = holders.setdefault((action, objects[:i] + objects[i + 1 :]), [])
            if not found or found[-1] != h:  # an object twice (`move o3 o3`) leaves the same set twice
                found.append(h)
    return [found for found in holders.values() if len(found) >= 2]


def merged_breaks(
    cut: np.ndarray, group: np.ndarray, step: np.ndarray, failed: np.ndarray, kin: list[list[int]], change_odds: float
) -> np.ndarray:
    """Each kin group's last cut (`cut`, the action name's step counter at it; -1: none), moved later where a
    break found on a family's merged record is put down to it. The families are `kin` (`families`); a family's
    merged record is every member's steps in the order recorded (per step: its `group`, its number among its
    action name's steps, `step`, and whether it `failed`), tested as a grounding's own is (`learning.changes` at
    `change_odds`). A break there (the rate after above the rate before) is put down to the member with the
    most failures since (of those, the one first in its family), if that member had steps before it and its
    own record since its last cut is likelier than not to have changed at that step: three vans failing once
    each on a road add up to a break before any one van's record shows it. A member bad from its first step has
    not changed; a merged record whose failures fell may only have moved to its better members, so it cuts
    nothing. Families are taken one after another, each seeing the cuts the ones before moved. Returns a new
    array."""
    out = cut.copy()
    if not kin:
        return out
    family = np.repeat(np.arange(len(kin)), [len(found) for found in kin])
    member = np.array([h for found in kin for h in found], dtype=np.int64)
    rows, pair = _member_steps(group, member, len(cut))
    merged = np.lexsort((step[rows], family[pair]))  # each family's steps in the order recorded
    rows, pair = rows[merged], pair[merged]
    bounds = np.concatenate(([0], np.cumsum(np.bincount(family[pair], minlength=len(kin)))))
    x = failed[rows].astype(float)
    start, _ = current_segments(x, bounds, change_odds)
    first_pair = np.concatenate(([0], np.cumsum([len(found) for found in kin])))  # each family's first pair
    a = JEFFREYS
    for f in np.flatnonzero(start > 0).tolist():
        mine = slice(bounds[f], bounds[f + 1])
        seg = int(start[f])
        outcomes, steps = x[mine], step[rows[mine]]
        if outcomes[seg:].mean() <= outcomes[:seg].mean():
            continue
        local = pair[mine] - first_pair[f]  # each step's member, as its place in the family
        since = np.bincount(local[seg:], weights=outcomes[seg:], minlength=len(kin[f]))
        lead = int(np.argmax(since))
        h, theirs = kin[f][lead], local == lead
        t = int(steps[seg:][theirs[seg:]][0])  # the lead's first step since the break
        if t <= out[h]:
            continue
        pre = outcomes[:seg][theirs[:seg] & (steps[:seg] >= out[h])]  # since its own last cut
        post = outcomes[seg:][theirs[seg:]]
        if len(pre) == 0:
            continue
        n0, f0, n1, f1 = len(pre), pre.sum(), len(post), post.sum()
        log_odds = (
            betaln(f0 + a, n0 - f0 + a) + betaln(f1 + a, n1 - f1 + a) - betaln(a, a)
            - betaln(f0 + f1 + a, n0 + n1 - f0 - f1 + a)
        )  # fmt: skip
        if log_odds > 0:
            out[h] = t
    return out


def _member_steps(group: np.ndarray, member: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (family, member) pair's steps, pair after pair, each member's in the order recorded: the steps'
    rows and each row's pair (the index into `member`, the kin group of each pair)."""
    visits = np.bincount(group, minlength=n_groups)
    order = np.argsort(group, kind="stable")
    rows = order[ragged((np.cumsum(visits) - visits)[member], visits[member])]
    return rows, np.repeat(np.arange(len(member)), visits[member])


def mixed(
    mean: np.ndarray, concentration: np.ndarray, p: np.ndarray, n: np.ndarray, f: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each grounding's posterior mean and concentration mixed with a shared change's common rate at
    probability `p`: the mixture's mean, and the concentration of the Beta with the mixture's mean and variance
    (a grounding that may have broken is as uncertain as that says). The common rate is the change's failures
    `f` in `n` steps (weighted by staleness) leaning one pseudo-step on the grounding's own estimate, so that as
    its evidence goes stale the grounding returns to its own record."""
    mean, concentration = np.asarray(mean, float), np.asarray(concentration, float)
    p, n, f = np.asarray(p, float), np.asarray(n, float), np.asarray(f, float)
    shared = (f + mean) / (n + 1.0)
    shared_c = n + 1.0
    own_var = mean * (1.0 - mean) / (concentration + 1.0)
    shared_var = shared * (1.0 - shared) / (shared_c + 1.0)
    out = (1.0 - p) * mean + p * shared
    second = (1.0 - p) * (own_var + mean**2) + p * (shared_var + shared**2)
    var = np.maximum(second - out**2, 1e-12)
    c = np.maximum(out * (1.0 - out) / var - 1.0, 1e-3)
    keep = p <= 0.0
    return np.where(keep, mean, out), np.where(keep, concentration, np.minimum(c, concentration))
