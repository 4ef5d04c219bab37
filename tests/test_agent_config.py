"""Agent settings: TOML file, environment and flags, in that order of strength; retry arithmetic."""

from __future__ import annotations

import pytest

from breakwater.agent.chat import backoff_delay, retry_after
from breakwater.agent.config import DEFAULT_BASE_URL, NO_KEY, ConfigError, load_config
from breakwater.agent.redact import MARK, Redactor
from breakwater.core.log.beneath import OwnedDir


def write(path, text):
    path.write_text(text)
    return path


def test_defaults_without_any_file_or_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.config/breakwater/config.toml there
    cfg = load_config({"workspace": tmp_path}, env={})
    assert cfg.base_url == DEFAULT_BASE_URL and cfg.api_key == NO_KEY and cfg.model is None
    assert cfg.auto_approve is False and cfg.summarizer_model is None
    assert cfg.sandbox == "auto"


def test_sandbox_comes_from_the_file_unless_a_flag_says_otherwise(tmp_path):
    config = write(tmp_path / "c.toml", 'sandbox = "none"\n')
    env = {"BREAKWATER_CONFIG": str(config)}
    assert load_config({"workspace": tmp_path}, env=env).sandbox == "none"
    assert load_config({"workspace": tmp_path, "sandbox": "bwrap"}, env=env).sandbox == "bwrap"
    assert load_config({"workspace": tmp_path, "sandbox": None}, env=env).sandbox == "none"


def test_flags_beat_environment_beat_config_file(tmp_path):
    config = write(tmp_path / "c.toml", 'base_url = "http://file:1/v1"\napi_key = "sk-file-key-123"\n'
                                        'model = "file-model"\nsummary_model = "small"\nwindow = 32000\n'
                                        'auto_approve = true\n[ui]\ntheme = "dark"\n')
    env = {"BREAKWATER_CONFIG": str(config), "OPENAI_BASE_URL": "http://env:2/v1", "OPENAI_API_KEY": "sk-env-key-456"}
    cfg = load_config({"workspace": tmp_path}, env=env)
    assert (cfg.base_url, cfg.api_key, cfg.model, cfg.window) == ("http://env:2/v1", "sk-env-key-456", "file-model", 32000)
    assert cfg.summarizer_model == "small" and cfg.auto_approve is True
    cfg = load_config({"workspace": tmp_path, "base_url": "http://flag:3/v1", "model": "flag-model", "window": None},
                      env=env)
    assert (cfg.base_url, cfg.model, cfg.window) == ("http://flag:3/v1", "flag-model", 32000)
    assert "sk-env-key-456" not in repr(cfg)


@pytest.mark.parametrize(("text", "message"), [
    ("window = 'big'", "window must be int"),
    ("auto_approve = 1", "auto_approve must be bool"),
    ("window = true", "window must be int"),
    ("summary_temperature = 0.7", "summary_temperature must be between 0 and 0.2"),
    ("base_url = 'ftp://x'", "base_url must start with http"),
    ("sandbox = 'docker'", "sandbox must be one of auto, bwrap, none, got 'docker'"),
    ("sandbox = false", "sandbox must be str"),
    ("not toml [", "is not valid TOML"),
])
def test_bad_settings_are_one_line_errors(tmp_path, text, message):
    config = write(tmp_path / "c.toml", text + "\n")
    with pytest.raises(ConfigError, match=message):
        load_config({"workspace": tmp_path}, env={"BREAKWATER_CONFIG": str(config)})


def test_a_named_config_file_must_exist(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config({"workspace": tmp_path}, env={"BREAKWATER_CONFIG": str(tmp_path / "missing.toml")})


def test_the_workspace_must_be_a_directory(tmp_path):
    with pytest.raises(ConfigError, match="is not a directory"):
        load_config({"workspace": tmp_path / "nope"}, env={"BREAKWATER_CONFIG": ""})


def test_retry_after_is_read_in_every_form():
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after({"retry-after": "3"}) == 3.0
    assert 55 <= retry_after({"retry-after": _http_date(60)}) <= 60
    assert retry_after({"retry-after": "soon"}) is None and retry_after({}) is None


def test_backoff_is_exponential_capped_and_yields_to_the_server():
    no_jitter = lambda: 0.0  # noqa: E731
    assert [backoff_delay(n, 0.5, 4.0, rng=no_jitter) for n in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert 0.8 <= backoff_delay(2, 0.5, 4.0, rng=lambda: 1.0) / 1.0 <= 1.0
    assert backoff_delay(1, 0.5, 4.0, server_says=7.0) == 7.0


def test_the_redactor_scrubs_text_environment_and_files(tmp_path):
    secret = "sk-secret-abcdef123456"
    r = Redactor(secret)
    assert r(f"key={secret}!") == f"key={MARK}!"
    env = {"A": secret, "B": f"Bearer {secret}", "C": "other"}
    assert r.tool_environment(env) == ({"C": "other"}, ["A", "B"]) and len(env) == 3
    big = tmp_path / "spill.log"
    chunk = b"x" * ((1 << 20) - 5)   # the second copy straddles the 1 MiB read boundary
    big.write_bytes(secret.encode() + chunk + secret.encode() + b"\ntail\n")
    assert r.scrub_file(OwnedDir(big.parent), big.name) == 2
    assert big.read_bytes() == MARK.encode() + chunk + MARK.encode() + b"\ntail\n"
    assert r.scrub_file(OwnedDir(big.parent), big.name) == 0
    assert Redactor(NO_KEY)("no-key stays") == "no-key stays" and Redactor("x").secret is None


def _http_date(seconds_from_now: float) -> str:
    import email.utils
    import time

    return email.utils.formatdate(time.time() + seconds_from_now, usegmt=True)


def test_configured_means_an_endpoint_a_key_or_a_model_was_named(tmp_path):
    env = {"BREAKWATER_CONFIG": str(tmp_path / "c.toml")}
    (tmp_path / "c.toml").write_text("window = 8000\n")
    assert not load_config({}, env=env).configured
    assert load_config({"model": "m"}, env=env).configured
    assert load_config({}, env={**env, "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}).configured
    (tmp_path / "c.toml").write_text('api_key = "k"\n')
    assert load_config({}, env=env).configured
