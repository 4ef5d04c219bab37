"""Tool schemas and execute_tool: whatever the model sends, it gets text back."""

from __future__ import annotations

import json

import pytest

from breakwater.core.policy import Policy
from breakwater.tools.registry import TOOLS, ToolContext, execute_tool, needs_approval, tool_schemas
from breakwater.tools.workspace import Workspace


@pytest.fixture
def ctx(tmp_path):
    return ToolContext.from_policy(Workspace(tmp_path), "s1", Policy())


def test_schemas_are_openai_function_definitions():
    schemas = tool_schemas()
    assert [s["function"]["name"] for s in schemas] == ["bash", "read_file", "write_file"]
    for s in schemas:
        assert s["type"] == "function"
        params = s["function"]["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert set(params["required"]) <= set(params["properties"])
        assert s["function"]["description"]
        json.dumps(s)


def test_which_tools_need_approval():
    assert needs_approval("bash") and needs_approval("write_file")
    assert not needs_approval("read_file")
    assert needs_approval("something_unknown")
    assert {name for name, spec in TOOLS.items() if spec.changes_things} == {"bash", "write_file"}


def test_context_from_policy(ctx):
    p = Policy()
    assert (ctx.max_lines, ctx.max_line_bytes, ctx.read_max_lines, ctx.bash_timeout_s) == (
        p.tool_max_lines, p.tool_max_line_bytes, p.read_file_default_lines, p.bash_timeout_s)


@pytest.mark.parametrize("name,arguments,message", [
    ("bash", '{"command": "echo hi"', "not valid JSON"),
    ("bash", "[1, 2]", "expected a JSON object, got array"),
    ("bash", "", "missing required argument(s) command"),
    ("bash", '{"command": 5}', "command must be a string, got number"),
    ("bash", '{"command": "ls", "rm": true}', "unknown argument(s) rm"),
    ("bash", '{"command": "ls", "timeout_s": 0}', "timeout_s must be at least 1"),
    ("read_file", '{"path": "a", "start_line": true}', "start_line must be a integer, got boolean"),
    ("read_file", '{"path": "a", "start_line": 1.5}', "start_line must be a whole number"),
    ("write_file", '{"path": "a"}', "missing required argument(s) content"),
    ("nope", "{}", "unknown tool 'nope'"),
])
def test_bad_calls_become_error_text(ctx, name, arguments, message):
    r = execute_tool(name, arguments, ctx)
    assert r.is_error
    assert r.content.startswith("Error: ")
    assert message in r.content


def test_round_trip_through_the_registry(ctx):
    w = execute_tool("write_file", json.dumps({"path": "notes/a.txt", "content": "alpha\nbeta\n"}), ctx)
    assert not w.is_error
    r = execute_tool("read_file", '{"path": "notes/a.txt", "start_line": 2.0}', ctx)
    assert r.content == "[notes/a.txt: lines 2-2 of 2]\nbeta"
    b = execute_tool("bash", {"command": "seq 1 5000", "timeout_s": 30}, ctx, tool_call_id="call_9")
    assert b.meta["spill"] == ".agent/spill/s1/call_9.log"
    assert b.meta["dropped_lines"] == 5000 - 400
    again = execute_tool("read_file", json.dumps({"path": b.meta["spill"], "start_line": 81, "end_line": 85}), ctx)
    assert again.content.split("\n")[1:6] == ["81", "82", "83", "84", "85"]


def test_null_optional_arguments_are_ignored(ctx):
    execute_tool("write_file", '{"path": "a.txt", "content": "x\\n"}', ctx)
    r = execute_tool("read_file", '{"path": "a.txt", "start_line": null, "end_line": null}', ctx)
    assert r.content == "[a.txt: lines 1-1 of 1]\nx"


def test_a_tool_that_blows_up_still_answers(ctx, monkeypatch):
    import breakwater.tools.registry as registry

    def boom(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(registry, "write_file", boom)
    r = execute_tool("write_file", '{"path": "a", "content": "b"}', ctx)
    assert r.content == "Error: write_file failed: RuntimeError: disk on fire"
