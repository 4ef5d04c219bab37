"""The far forms of long messages are shared between pipelines of the same policy (core/fold/stage_forms.py
`_FORMS`): a simulation gives the same figures and the same requests whatever ran before it in the
process, under another policy or the same one."""

from __future__ import annotations

import sys
import threading

from breakwater.core.fold import pipeline
from breakwater.core.fold.stage_forms import policy_id
from breakwater.core.policy import PRESETS
from breakwater.core.simulate import simulate
from synth import as_log, session_messages

WINDOW = 32_000
LOOKED_AT = (60, 120, 180)


def _run(log, policy):
    sim = simulate(log, policy, counter="heuristic", views=LOOKED_AT)
    return [t.json_text() for t in sim.turns], {k: v.messages for k, v in sim.views.items()}


def test_a_policy_simulated_after_another_gets_its_own_forms():
    log = as_log(session_messages(400, avg_tool_chars=6000, seed=3), window=WINDOW)
    mine = PRESETS["breakwater"].with_changes(window=WINDOW)
    # every stage setting differs, so each far form differs too
    other = mine.with_changes(snip_threshold_chars=2_500, snip_head_chars=700, snip_tail_chars=300,
                              working_memory_max_chars=800, working_memory_head_chars=300,
                              working_memory_tail_chars=200, mask_min_chars=5_000)
    pipeline._FORMS.clear()
    alone = _run(log, other)
    pipeline._FORMS.clear()
    first = _run(log, mine)
    assert pipeline._FORMS, "the long results of this session are shared"
    assert _run(log, other) == alone
    assert _run(log, mine) == first


def test_policies_met_by_several_threads_at_once_are_told_apart():
    # the replay's re-simulation and the fidelity measurement build pipelines in their own threads
    policies = [PRESETS["breakwater"].with_changes(mask_min_chars=1_000 + i) for i in range(10_000)]
    ids: dict = {}

    def build(k: int) -> None:
        for p in policies[k::8]:
            ids[p] = policy_id(p)   # what each pipeline asks as it is built

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # switch threads as often as possible, so that a race shows
    try:
        threads = [threading.Thread(target=build, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert len(set(ids.values())) == len(policies)
