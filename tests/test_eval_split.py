"""A large session's presets shared out among forked processes (issue 29 item 2): the processes,
forked once the session is loaded and its facts found, start with both, and the figures are those of
one process."""

from __future__ import annotations

import os

from breakwater.cli.core import sample_path
from breakwater.core.policy import PRESETS
from breakwater.fidelity.runner import _forked, evaluate_path, task


def test_a_session_split_over_forked_processes_gives_the_figures_of_one():
    path = str(sample_path("long-refactor.jsonl"))
    presets = tuple(sorted(PRESETS))
    one = evaluate_path(path, presets, 32_000, "heuristic")
    for split in (2, 3, len(presets)):
        assert evaluate_path(path, presets, 32_000, "heuristic", reuse=True, split=split).to_json() == one.to_json()
    two = presets[:2]   # one preset for each process
    assert evaluate_path(path, two, 32_000, "heuristic", split=2).to_json() == \
        evaluate_path(path, two, 32_000, "heuristic").to_json()


def test_a_forked_child_answers_or_says_it_could_not():
    assert _forked(lambda: {"pid": os.getpid()})()["pid"] != os.getpid()
    assert _forked(lambda: 1 / 0)() is None            # raised: nothing sent, exit status 1
    assert _forked(lambda: os._exit(0))() is None      # left without answering


def test_a_large_session_is_one_task_that_forks_and_the_rest_stay_whole(tmp_path):
    big, small = tmp_path / "big.jsonl", tmp_path / "small.jsonl"
    big.write_bytes(b"x" * 10_000)
    small.write_bytes(b"x" * 100)
    fn = task(sorted(PRESETS))
    presets = tuple(sorted(PRESETS))
    assert fn.units([str(small), str(big)], 2, fork=True) == [(str(big), presets, 2), (str(small), presets, 1)]
    # without fork (Dask workers), one task per preset
    assert fn.units([str(small), str(big)], 2) == [(str(big), (p,), 1) for p in presets] + [(str(small), presets, 1)]
    # two presets: forked too, one for each worker, rather than two tasks that each load the session
    two = presets[:2]
    assert task(two).units([str(small), str(big)], 2, fork=True) == [(str(big), two, 2), (str(small), two, 1)]


def test_with_other_threads_running_the_presets_run_here():
    import threading

    from breakwater.fidelity.runner import _can_fork

    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not _can_fork()
        path = str(sample_path("mixed-zh-en.jsonl"))
        presets = tuple(sorted(PRESETS))
        assert evaluate_path(path, presets, 32_000, "heuristic", split=2).to_json() == \
            evaluate_path(path, presets, 32_000, "heuristic").to_json()
    finally:
        stop.set()
        other.join()


def test_eval_lets_a_session_s_texts_go_when_it_reads_the_next():
    """The caches keyed by a text's identity (the error scans, the stage forms' counts, ...) hold the
    texts: bounded in entries, not bytes, they kept every session a process had evaluated alive (eval
    of 43 sessions in one process peaked at 126 MB, where the largest alone takes 62 MB; now 88 MB).
    Reading the next session, eval lets them go; the figures are the same."""
    from breakwater.core.log import text_cache
    from breakwater.fidelity.runner import evaluate_path

    def held() -> list:
        return [entry[0] for clear in text_cache._CLEARS for entry in clear.__self__.values()]

    first = evaluate_path(str(sample_path("long-refactor.jsonl")), ["breakwater"], counter="heuristic")
    kept = held()   # held here too, so that no later object takes one of their ids
    assert len(kept) > 50
    evaluate_path(str(sample_path("npm-install-flood.jsonl")), ["breakwater"], counter="heuristic")
    assert not {id(t) for t in kept} & {id(t) for t in held()}
    again = evaluate_path(str(sample_path("long-refactor.jsonl")), ["breakwater"], counter="heuristic")
    assert again.presets == first.presets
