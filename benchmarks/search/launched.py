"""A launched search with failure under load injected, judged from its record (issue 43, items 4 and 9).

Pipeline position: under the driver ``benchmarks/search_launched.py``, which runs real sweeps (the
launcher, the simulator, the load runner) and hands each one's ``search/trials.json`` here. The failure is
a field of the space: ``extra_args.sim_crash_after_requests`` (the simulator's
``--sim-crash-after-requests N``: the server starts, serves N requests and dies), one value of which
(:data:`CRASH`) dies within a trial's screening runs and one (:data:`NEVER`) never does. The rule checked
is the product's (``orchestrator.measure.trial``): a server that started and was lost under load makes
its point infeasible, a constraint the sampler learns, and the point is never launched again. Pure.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from contracts.trials import TrialRecord
from orchestrator.measure.trial import DIED_UNDER_LOAD

#: The injected field and its values: a server that dies after 12 finished requests, and one that never
#: does within a trial (no trial of these sweeps runs 100,000 requests).
FIELD = "extra_args.sim_crash_after_requests"
CRASH, NEVER = 12, 100000


@dataclass(frozen=True)
class FailureCheck:
    """What one launched search did with the points that die under load."""

    trials: int
    launched: int  # trials that launched a server
    crash_launched: int  # launches of a dying point
    crash_infeasible: int  # of those, recorded infeasible as lost under load
    crash_asked_again: int  # a dying point asked again: told from the earlier trial, nothing launched
    relaunched: int  # launches of a point launched before (any point): must be 0
    crash_finalists: int  # dying points among the finalists (confirmed): must be 0

    @property
    def passed(self) -> bool:
        """A dying point was launched, each launch was infeasible, and nothing was launched twice or
        confirmed."""
        return (
            self.crash_launched > 0
            and self.crash_infeasible == self.crash_launched
            and self.relaunched == 0
            and self.crash_finalists == 0
        )


def _key(params: dict[str, object]) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def check(trials: Sequence[TrialRecord], finalists: Sequence[str]) -> FailureCheck:
    """Judge a search's trials (in order) and its finalists' names against the failure rule."""
    launches: Counter[str] = Counter()
    crash = [t for t in trials if t.params.get(FIELD) == CRASH]
    for t in trials:
        if t.launches:
            launches[_key(t.params)] += t.launches
    crash_names = {t.name for t in crash}
    return FailureCheck(
        trials=len(trials),
        launched=sum(1 for t in trials if t.launches),
        crash_launched=sum(t.launches for t in crash),
        crash_infeasible=sum(
            1 for t in crash if t.launches and t.state == "infeasible" and t.why.startswith(DIED_UNDER_LOAD)
        ),
        crash_asked_again=sum(
            1 for t in crash if not t.launches and t.same_as is not None and t.state == "infeasible"
        ),
        relaunched=sum(n - 1 for n in launches.values() if n > 1),
        crash_finalists=len(crash_names & set(finalists)),
    )
