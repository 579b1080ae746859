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

A change is found on a kin group's own record, or on a family's merged record (every group holding S, its
steps in the order recorded): a break there is put down to the member with the most failures since, if that
member had steps before it and its own record is likelier than not to have changed at that step. Three vans
failing once each on a road add up to a break before any one van's record shows it; a member bad from its first
step, or a record whose failures fell because the plans moved to its better members, is no change.

Each sibling gets the probability of the most probable shared change it belongs to, and the steps and failures
of that change's common rate (the changed group's since its change and the siblings' since it).
`learning.model` mixes its p_fail: (1 - P) its own estimate + P the common rate's. So the plans leave a road
that broke for one van before every other van has failed on it too, and a sibling driven since the change
without failing clears itself: one success weighs about 8:1 against a change to a rate that failed 3 of 3.

    shared = sibling_changes(cut, group, step, failed, group_action, group_objects)  # per kin group [P, N, F]
    # a lead found on a merged record mixes too, by how likely its own record changed there
    mean, concentration = mixed(mean, concentration, shared[:, 0], shared[:, 1], shared[:, 2])

Why, and what it measured: docs/decisions/aging-evidence.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.special import betaln

from learning.changes import current_segments
from learning.defaults import DEFAULT_CHANGE_ODDS
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
    change_odds: float = DEFAULT_CHANGE_ODDS,
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
    # every family: a set S (action name, the objects but one) that two kin groups or more hold
    holders: dict[tuple[int, tuple[str, ...]], list[int]] = {}
    for h, objects in enumerate(group_objects):
        if len(objects) < 2:
            continue
        action = int(group_action[h])
        for i in range(len(objects)):
            holders.setdefault((action, objects[:i] + objects[i + 1 :]), []).append(h)
    keys = [key for key, found in holders.items() if len(found) >= 2]
    if not keys:
        return out
    family = np.repeat(np.arange(len(keys)), [len(holders[key]) for key in keys])
    member = np.array([h for key in keys for h in holders[key]], dtype=np.int64)
    # every member's steps, pair after pair, then each family's in the order recorded: its merged record
    visits = np.bincount(group, minlength=len(cut))
    order = np.argsort(group, kind="stable")
    rows = order[ragged((np.cumsum(visits) - visits)[member], visits[member])]
    pair = np.repeat(np.arange(len(member)), visits[member])
    merged = np.lexsort((step[rows], family[pair]))
    rows, pair = rows[merged], pair[merged]
    at, lead, lead_p = _leads(cut, group, step, failed, family, member, rows, pair, change_odds)
    known = lead[family] >= 0  # the pairs of families with a change
    family, member = family[known], member[known]
    keep = known[pair]
    rows, pair = rows[keep], (np.cumsum(known) - 1)[pair[keep]]
    after = step[rows] >= at[family[pair]]
    own = step[rows] >= cut[member[pair]]  # a member's current segment before the change: since its own cut
    lost = failed[rows].astype(float)
    n_pairs, n_families = len(member), len(keys)
    n_after = np.bincount(pair, weights=after, minlength=n_pairs)
    f_after = np.bincount(pair, weights=after * lost, minlength=n_pairs)
    before = own & ~after
    n_before = np.bincount(pair, weights=before, minlength=n_pairs)
    f_before = np.bincount(pair, weights=before * lost, minlength=n_pairs)
    is_lead = member == lead[family]
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
    lead_n, lead_f = np.zeros(n_families), np.zeros(n_families)
    lead_n[family[lead_pair]], lead_f[family[lead_pair]] = n_after[lead_pair], f_after[lead_pair]
    log_odds = (
        betaln(f_all + a, n_all - f_all + a)
        - betaln(lead_f + a, lead_n - lead_f + a)
        - np.bincount(family, weights=stays, minlength=n_families)
    )
    k = np.array([len(key[1]) + 1 for key in keys], dtype=float)  # the changed group's objects
    p = 1.0 / (1.0 + np.exp(-np.clip(log_odds - np.log(k), -500.0, 500.0)))  # prior 1 / (k + 1)
    weight = np.ones(n_families)
    if fade is not None and run is not None:
        newest = np.full(n_families, -1, dtype=np.int64)
        np.maximum.at(newest, family[pair[after]], run[rows[after]])
        last_run = int(run.max())
        for f in np.flatnonzero(lead >= 0).tolist():
            weight[f] = fade(int(lead[f]), last_run - int(newest[f]))
    # each member's most probable shared change; a lead found on a merged record, with no cut of its own there,
    # by how likely its own record changed at that step
    for f, h, lead_here in zip(family.tolist(), member.tolist(), is_lead.tolist()):
        q = lead_p[f] if lead_here else p[f]
        if q > out[h, 0]:
            out[h] = (q, weight[f] * n_all[f], weight[f] * f_all[f])
    return out


def _leads(
    cut: np.ndarray,
    group: np.ndarray,
    step: np.ndarray,
    failed: np.ndarray,
    family: np.ndarray,
    member: np.ndarray,
    rows: np.ndarray,
    pair: np.ndarray,
    change_odds: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per family (its members' steps `rows`, merged in the order recorded, `pair` each row's (family, member)
    pair): the step its newest change starts at, the member it is put down to (-1: no change), and, for a
    change found on the merged record only, the probability that this member's own record changed there (0
    for one cut on its own record). A member's own cut (`cut`) counts; so does a break of the merged record
    (`learning.changes` at `change_odds`) whose member with the most failures since had steps before it and is
    likelier than not to have changed at that step: the vans' failures on a road add up before any one van's
    record shows the break."""
    n_families = int(family.max()) + 1
    at = np.full(n_families, -1, dtype=np.int64)
    lead = np.full(n_families, -1, dtype=np.int64)
    lead_p = np.zeros(n_families)
    for j in np.flatnonzero(cut[member] >= 0).tolist():  # the members' own cuts: the newest leads
        f, h = int(family[j]), int(member[j])
        if cut[h] > at[f]:
            at[f], lead[f], lead_p[f] = cut[h], h, 0.0
    sizes = np.bincount(family[pair], minlength=n_families)
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    x = failed[rows].astype(float)
    start, _ = current_segments(x, bounds, change_odds)
    a = JEFFREYS
    for f in np.flatnonzero(start > 0).tolist():
        mine = slice(bounds[f], bounds[f + 1])
        seg = int(start[f])
        outcomes, groups = x[mine], group[rows[mine]]
        if outcomes[seg:].mean() <= outcomes[:seg].mean():
            continue  # a break only: a record whose failures fell may only have moved to its better members
        t = int(step[rows[mine][seg]])
        if t <= at[f]:
            continue
        since = np.bincount(groups[seg:], weights=outcomes[seg:], minlength=len(cut))
        h = int(np.argmax(since))
        theirs = groups == h
        pre, post = outcomes[:seg][theirs[:seg]], outcomes[seg:][theirs[seg:]]
        if len(pre) == 0:
            continue  # a member bad from its first step has not changed
        log_odds = (
            betaln(pre.sum() + a, len(pre) - pre.sum() + a)
            + betaln(post.sum() + a, len(post) - post.sum() + a)
            - betaln(a, a)
            - betaln(outcomes[theirs].sum() + a, theirs.sum() - outcomes[theirs].sum() + a)
        )
        if log_odds > 0:
            at[f], lead[f], lead_p[f] = t, h, float(1.0 / (1.0 + np.exp(-log_odds)))
    return at, lead, lead_p


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
