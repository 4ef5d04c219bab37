"""Format detection on the real transcripts in shared/fixtures (never edited)."""

from pathlib import Path

import pytest

from breakwater.core.session_log import SessionLogError
from breakwater.core.validity import api_problems
from breakwater.core.pipeline import Pipeline
from breakwater.core.policy import preset
from breakwater.formats import detect_format, load_session

REAL = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real"
needs_fixtures = pytest.mark.skipif(not REAL.exists(), reason="shared fixtures not present")


@needs_fixtures
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


@needs_fixtures
@pytest.mark.parametrize("sub,fmt", [("claude-code", "claude-code"), ("codex", "codex"), ("pi", "pi"),
                                     ("swe-agent", "swe-agent")])
def test_other_agents_are_recognised_and_refused_with_a_clear_reason(sub, fmt):
    for path in sorted((REAL / sub).iterdir()):
        assert detect_format(path) == fmt
        with pytest.raises(SessionLogError, match=f"looks like a {fmt} transcript"):
            load_session(path)
