"""Format detection on the real transcripts (copies in tests/fixtures/real, see its SOURCES.md)."""

import pytest

from breakwater.core.session_log import SessionLogError
from breakwater.core.validity import api_problems
from breakwater.core.pipeline import Pipeline
from breakwater.core.policy import preset
from breakwater.formats import detect_format, load_session

from support.transcripts import REAL


@pytest.mark.parametrize("path", sorted(REAL.glob("openai-chat/*.json")) + sorted(REAL.glob("mini-swe-agent/*.json")),
                         ids=lambda p: p.name)
def test_openai_message_files_load_and_give_valid_requests(path):
    assert detect_format(path) == "openai"
    log = load_session(path)
    assert log.messages
    pipe = Pipeline(preset("breakwater").with_changes(window=16_000))
    pipe.feed_all(log.entries)
    view = pipe.view()[0]
    assert api_problems(view.to_api()) == [] and view.sent_tokens <= 16_000


@pytest.mark.parametrize("sub,fmt", [("codex", "codex"), ("pi", "pi"),
                                     ("swe-agent", "swe-agent")])
def test_other_agents_are_recognised_and_refused_with_a_clear_reason(sub, fmt):
    for path in sorted((REAL / sub).iterdir()):
        assert detect_format(path) == fmt
        with pytest.raises(SessionLogError, match=f"looks like a {fmt} transcript"):
            load_session(path)
