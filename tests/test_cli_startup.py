"""The command line as a user meets it (issue 7 items 14-17): quick start-up (only the command's own
modules are imported), tokens on any text file, help without internal notes, singular and plural."""

import json
import os
import subprocess
import sys

import pytest


def loaded_after(*argv):
    """The modules imported once the command line has been parsed for argv."""
    code = ("import sys; from breakwater import cli; argv = sys.argv[1:]; "
            "cli.build_parser(cli.wanted_command(argv)); print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize("argv", [["--version"], ["simulate", "s.jsonl"], ["tokens", "README.md"],
                                  ["tool", "read_file", "x"], ["memory", "show"]])
def test_commands_that_talk_to_no_model_never_import_the_client(argv):
    loaded = loaded_after(*argv)
    assert "openai" not in loaded and "breakwater.agent.session" not in loaded
    assert "textual" not in loaded and "tiktoken" not in loaded
    if argv[0] != "simulate":
        assert "breakwater.core.fold.pipeline" not in loaded


def test_help_lists_every_command_and_shows_no_internal_notes():
    out = subprocess.run([sys.executable, "-m", "breakwater", "--help"], capture_output=True, text=True).stdout
    for command in ("simulate", "tokens", "tool", "memory", "run", "import", "replay", "eval"):
        assert f"    {command}" in out
    assert "SPEC" not in out and "registers" not in out


def test_run_still_parses_its_options():
    out = subprocess.run([sys.executable, "-m", "breakwater", "run", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--prompt" in out.stdout


def test_tokens_counts_any_text_file(tmp_path):
    notes = tmp_path / "README.md"
    notes.write_text("# Title\n\nSome prose, and 中文 too.\n" * 40)
    out = subprocess.run([sys.executable, "-m", "breakwater", "tokens", str(notes), "--json"], capture_output=True,
                         text=True)
    data = json.loads(out.stdout)
    assert out.returncode == 0 and data["kind"] == "text" and data["encoding"] == "o200k_base"
    assert data["heuristic"] > 0 and data["exact"] > 0
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\x00\x01\x02" * 100)
    bad = subprocess.run([sys.executable, "-m", "breakwater", "tokens", str(binary)], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_one_default_counter_for_simulate_and_tokens(tmp_path):
    doc = tmp_path / "chat.json"
    doc.write_text(json.dumps([{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "hi"},
                               {"role": "user", "content": "go on"}]))
    sim = json.loads(subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(doc), "--json"],
                                    capture_output=True, text=True).stdout)
    tok = json.loads(subprocess.run([sys.executable, "-m", "breakwater", "tokens", str(doc), "--json"],
                                    capture_output=True, text=True).stdout)
    assert sim["encoding"] == tok["encoding"] == "o200k_base" and sim["counter"] == "exact"


def test_singular_and_plural():
    from breakwater.tools.rolling_buffer import truncation_marker
    from breakwater.tools.spill import spill_notice

    assert truncation_marker(1) == "... [1 line truncated for context efficiency] ..."
    notice = spill_notice("a.log", total_lines=1, total_bytes=1, dropped_lines=1, cut_lines=1, first_dropped_line=3,
                          read_max_lines=400)
    assert "(1 line, 1 byte)" in notice and "1 line was truncated above (line 3)" in notice
    assert "1 long line was cut" in notice


def test_the_workbench_with_no_command_fails_in_one_line_too(tmp_path):
    """`breakwater` alone goes through the same last resort as every sub-command: an install
    missing a dependency is one line and a report, not a traceback."""
    broken = tmp_path / "site"
    broken.mkdir()
    (broken / "tomli_w.py").write_text("raise ImportError('tomli_w is broken in this install')\n")
    env = {**os.environ, "PYTHONPATH": str(broken), "BREAKWATER_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-m", "breakwater"], capture_output=True, text=True, timeout=60,
                         env=env, stdin=subprocess.DEVNULL)
    assert out.returncode == 70
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert "tomli_w is broken in this install" in lines[0]


# The console script's entry, with an exit hook that shows whether the interpreter's own exit ran.
ENTRY = ("import atexit, sys; atexit.register(lambda: print('interpreter exit', file=sys.stderr)); "
         "from breakwater.cli import run; sys.exit(run())")


def test_a_one_shot_command_leaves_without_the_interpreter_exit_once_its_output_is_written():
    from breakwater.cli.core import sample_path

    out = subprocess.run([sys.executable, "-c", ENTRY, "simulate", str(sample_path()), "--json", "--counter",
                          "heuristic", "--window", "1000"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0
    assert json.loads(out.stdout)["totals"]["turns"] > 0   # every byte of it, though never freed
    assert "over the window" in out.stderr and "interpreter exit" not in out.stderr


def test_a_command_that_may_leave_work_behind_ends_through_the_interpreter(tmp_path):
    out = subprocess.run([sys.executable, "-c", ENTRY, "memory", "show", "--dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert "interpreter exit" in out.stderr


def test_a_final_flush_that_fails_ends_as_the_interpreter_ends_it(tmp_path):
    """Output left in stdout's buffer that the disk cannot take: the interpreter's exit reports it,
    with its status (120), as a plain script's would, instead of vanishing with a fast exit."""
    leave = "import sys; from breakwater.cli import leave; print('left in the buffer'); sys.exit(leave(0))"
    plain = "import sys; print('left in the buffer'); sys.exit(0)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}   # else print itself fails
    outs = []
    for code in (leave, plain):
        with open("/dev/full", "w") as full:
            outs.append(subprocess.run([sys.executable, "-c", code, "tokens", "x"], stdout=full,
                                       stderr=subprocess.PIPE, text=True, timeout=60, env=env))
    assert outs[0].returncode == outs[1].returncode == 120
    assert "No space left on device" in outs[0].stderr and outs[0].stderr == outs[1].stderr


def test_eval_of_one_session_in_this_process_imports_neither_rich_nor_a_process_pool():
    """Start-up is most of eval's time on a small session: no progress bar is drawn for one session
    and no pool is started for one job, so their modules (50 ms) are never loaded."""
    from breakwater.cli.core import sample_path

    code = ("import sys; from breakwater.cli import main; "
            "code = main(['eval', sys.argv[1], '--presets', 'breakwater', '--counter', 'heuristic', '--jobs', '1', "
            "'--json']); print(' '.join(sorted(sys.modules)), file=sys.stderr); sys.exit(code)")
    out = subprocess.run([sys.executable, "-c", code, str(sample_path())], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and json.loads(out.stdout)["sessions"]
    loaded = set(out.stderr.split())
    assert "breakwater.fidelity.runner" in loaded
    assert "rich" not in loaded and "concurrent.futures.process" not in loaded


def test_eval_leaves_without_the_interpreter_exit_once_its_output_is_written():
    from breakwater.cli.core import sample_path

    out = subprocess.run([sys.executable, "-c", ENTRY, "eval", str(sample_path()), "--json", "--counter", "heuristic",
                          "--presets", "breakwater", "--jobs", "1"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and json.loads(out.stdout)["sessions"]
    assert "interpreter exit" not in out.stderr


def test_each_command_is_found_in_the_module_that_registers_it_alone():
    """`HOMES` names, for every command, the one registrar that defines it: a command imports no
    other command's modules (the tools' sandbox, the workbench's) before its own."""
    import argparse
    import importlib

    from breakwater import cli

    defined = {}
    for name in cli.REGISTRARS:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(name).register(sub)
        defined.update((command, name) for command in sub.choices)
    assert cli.HOMES == defined
    loaded = loaded_after("eval", "s.jsonl")
    assert "breakwater.cli.fidelity" in loaded
    assert "breakwater.cli.tools" not in loaded and "breakwater.tools.sandbox" not in loaded
