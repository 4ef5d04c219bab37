"""`breakwater export` (issue 42): a replay as one self-contained HTML page and as Markdown.

The pages are opened in a real headless Chromium (the distribution's, driven by Playwright): they
render with no console error and no network request, the timeline has a column per turn, and the
totals on the page are `simulate --json`'s. The Markdown is read by a Markdown parser. Hostile
transcript text stays text in both."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from support.transcripts import REAL

from breakwater.core.log.message import Message, ToolCall
from synth import session_messages, write_session

# one real transcript of each agent format the fixtures hold
AGENTS = {d.name: sorted(p for p in d.iterdir())[0] for d in sorted(REAL.iterdir()) if d.is_dir()}
CHROMIUM = shutil.which("chromium")
TOTALS = ("turns", "billed_raw", "billed_sent", "saved", "cost_raw", "cost_sent", "cost_saved", "compactions",
          "over_window")


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "breakwater", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def simulate_json(*args: str) -> dict:
    done = run("simulate", *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, tuple[Path, Path, dict]]:
    """agent -> (page, markdown, simulate --json of the same replay)."""
    out = tmp_path_factory.mktemp("exported")
    got = {}
    for agent, path in AGENTS.items():
        html, md = out / f"{agent}.html", out / f"{agent}.md"
        done = run("export", str(path), "--html", str(html), "--md", str(md))
        assert done.returncode == 0, f"{agent}: {done.stderr}"
        assert "Traceback" not in done.stderr
        got[agent] = (html, md, simulate_json(str(path)))
    return got


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (scripts/install_chromium.sh installs it where it can)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        yield b
        b.close()


class Opened:
    """A page opened in the browser, with every console message, page error and request it made."""

    def __init__(self, browser, path: Path, scheme: str = "light"):
        self.page = browser.new_page(color_scheme=scheme, viewport={"width": 1280, "height": 900})
        self.console: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.as_uri())
        self.page.wait_for_load_state("load")

    def close(self) -> None:
        self.page.close()


def test_export_of_each_agent_renders_offline_with_the_figures_of_simulate(exported, browser):
    for agent, (html, _, sim) in exported.items():
        opened = Opened(browser, html)
        page = opened.page
        assert opened.console == [], f"{agent}: {opened.console}"
        assert opened.requests == [html.as_uri()], f"{agent}: fetched {opened.requests}"
        assert page.locator("svg.timeline g.turn").count() == len(sim["turns"]), agent
        turns = [int(t) for t in page.locator("svg.timeline g.turn").evaluate_all(
            "gs => gs.map(g => g.dataset.turn)")]
        assert turns == [t["turn"] for t in sim["turns"]], agent
        cells = page.locator("table.totals td[data-key]").evaluate_all(
            "tds => tds.map(td => [td.dataset.key, td.dataset.value, td.innerText])")
        shown = {key: (value, text) for key, value, text in cells}
        for key in TOTALS:
            if key in sim["totals"]:
                value, text = shown[key]
                assert float(value) == pytest.approx(sim["totals"][key], abs=0), (agent, key)
                if key.startswith("billed") or key == "saved":
                    assert f"{sim['totals'][key]:,}" in text, (agent, key, text)
        assert page.title().endswith("— Breakwater")
        opened.close()


def test_the_page_follows_the_readers_light_or_dark_preference(exported, browser):
    html = exported["claude-code"][0]
    colours = {}
    for scheme in ("light", "dark"):
        opened = Opened(browser, html, scheme)
        colours[scheme] = opened.page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert opened.console == []
        opened.close()
    assert colours["light"] != colours["dark"]
    assert colours["light"] == "rgb(251, 251, 248)" and colours["dark"] == "rgb(15, 20, 25)"   # themes/*.toml


def md_tokens(text: str):
    return MarkdownIt("commonmark").enable("table").parse(text)


def check_markdown(text: str) -> list:
    """The Markdown is well formed: headings nest from one h1, every table row has the header's
    cells, and nothing in it is raw HTML or a link."""
    tokens = md_tokens(text)
    levels = [int(t.tag[1]) for t in tokens if t.type == "heading_open"]
    assert levels[0] == 1 and levels.count(1) == 1
    assert all(b - a <= 1 for a, b in zip(levels, levels[1:])), levels
    assert not [t for t in tokens if t.type in ("html_block", "html_inline")]
    inline = [c for t in tokens if t.children for c in t.children]
    assert not [c for c in inline if c.type in ("link_open", "image", "html_inline")]
    # rows: count th/td between tr_open and tr_close
    widths, row = [], 0
    for t in tokens:
        if t.type == "tr_open":
            row = 0
        elif t.type in ("th_open", "td_open"):
            row += 1
        elif t.type == "tr_close":
            widths.append(row)
        elif t.type == "table_close":
            assert len(set(widths)) == 1, widths
            widths = []
    return tokens


def test_markdown_of_each_agent_is_well_formed_with_the_totals_of_simulate(exported):
    for agent, (_, md, sim) in exported.items():
        text = md.read_text(encoding="utf-8")
        tokens = check_markdown(text)
        assert any(t.type == "table_open" for t in tokens), agent
        totals = sim["totals"]
        assert f"≈{totals['billed_raw']:,} tokens" in text, agent
        assert f"{totals['billed_sent']:,} tokens" in text, agent
        assert f"{len(sim['turns']):,}" in text


HOSTILE = ("<script>document.title='owned'</script><img src=x onerror=\"document.title='img'\">"
           "\x1b]0;evil title\x07\x1b]52;c;ZXZpbA==\x07 \u202egnp.exe <style>body{display:none}</style> "
           "``` | # not a heading [link](http://example.com/x) ![i](http://example.com/i.png) </pre></details>")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Path, Path, Path]:
    out = tmp_path_factory.mktemp("hostile")
    msgs = [Message("m0", "system", "system " + HOSTILE),
            Message("m1", "user", HOSTILE, turn=1),
            Message("m2", "assistant", HOSTILE, (ToolCall("c1", "bash", json.dumps({"command": HOSTILE})),), turn=1),
            Message("m3", "tool", HOSTILE * 40, tool_call_id="c1", turn=1),
            Message("m4", "assistant", "done " + HOSTILE, turn=2)]
    session = write_session(out / "hostile.jsonl", msgs, header={"title": HOSTILE, "window": 8000})
    html, md = out / "h.html", out / "h.md"
    done = run("export", str(session), "--html", str(html), "--md", str(md), "--window", "8000")
    assert done.returncode == 0, done.stderr
    return session, html, md


def test_hostile_transcript_text_is_inert_in_the_page(hostile, browser):
    _, html, _ = hostile
    raw = html.read_text(encoding="utf-8")
    assert "<script" not in raw and "<img" not in raw and "\x1b" not in raw and "\u202e" not in raw
    opened = Opened(browser, html)
    page = opened.page
    assert page.title().startswith("<script>")   # the title text, shown as text
    assert page.locator("script, img, iframe, object, embed").count() == 0
    assert page.locator("style").count() == 1     # ours only
    assert page.locator("body").is_visible()
    assert opened.requests == [html.as_uri()] and opened.console == []
    page.locator("details.msg").first.locator("summary").click()
    assert "<script>document.title" in page.locator("details.msg").first.inner_text()
    opened.close()


def test_hostile_transcript_text_is_inert_in_the_markdown(hostile):
    _, _, md = hostile
    text = md.read_text(encoding="utf-8")
    assert "\x1b" not in text and "\u202e" not in text
    check_markdown(text)


def test_compare_puts_both_policies_side_by_side_with_their_figures(tmp_path, browser):
    path = AGENTS["claude-code"]
    html, md = tmp_path / "ab.html", tmp_path / "ab.md"
    done = run("export", str(path), "--window", "32000", "--compare", "seed-001", "--html", str(html), "--md", str(md))
    assert done.returncode == 0, done.stderr
    sims = {"A": simulate_json(str(path), "--window", "32000"),
            "B": simulate_json(str(path), "--window", "32000", "--preset", "seed-001")}
    opened = Opened(browser, html)
    page = opened.page
    assert opened.console == []
    for side, sim in sims.items():
        assert page.locator(f'section.side[data-side="{side}"] svg.timeline g.turn').count() == len(sim["turns"])
        for key in ("billed_raw", "billed_sent", "saved"):
            value = page.locator(f'table.totals td[data-side="{side}"][data-key="{key}"]').get_attribute("data-value")
            assert int(value) == sim["totals"][key], (side, key)
    assert sims["A"]["preset"] in page.locator('section.side[data-side="A"] h3').inner_text()
    assert "seed-001" in page.locator('section.side[data-side="B"] h3').inner_text()
    opened.close()
    text = md.read_text(encoding="utf-8")
    check_markdown(text)
    assert "| | A | B |" in text and "### B: seed-001" in text


def test_a_long_session_stays_a_few_megabytes_with_every_message(tmp_path):
    session = write_session(tmp_path / "long.jsonl", session_messages(1200, avg_tool_chars=15000, seed=3),
                            header={"window": 64000})
    html = tmp_path / "long.html"
    done = run("export", str(session), "--html", str(html))
    assert done.returncode == 0, done.stderr
    text = html.read_text(encoding="utf-8")
    assert len(text.encode()) < 4_000_000
    assert text.count('<details class="msg') == 1200
    assert "characters not shown" in text


def test_bad_requests_get_one_line_and_write_nothing(tmp_path):
    path = AGENTS["pi"]
    done = run("export", str(path))
    assert done.returncode == 2 and "--html" in done.stderr and "Traceback" not in done.stderr
    done = run("export", str(path), "--html", str(tmp_path / "missing" / "x.html"))
    assert done.returncode == 2 and "does not exist" in done.stderr
    done = run("export", str(path), "--html", str(tmp_path))
    assert done.returncode == 2 and "is a folder" in done.stderr
    done = run("export", str(path), "--turn", "99999", "--md", str(tmp_path / "x.md"))
    assert done.returncode == 2 and "--turn" in done.stderr and not (tmp_path / "x.md").exists()
    done = run("export", str(tmp_path / "nope.jsonl"), "--md", str(tmp_path / "x.md"))
    assert done.returncode == 2 and "Traceback" not in done.stderr and not (tmp_path / "x.md").exists()


def test_a_link_planted_at_the_output_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "page.html"
    out.symlink_to(victim)
    done = run("export", str(AGENTS["codex"]), "--html", str(out))
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "keep me"
    assert not out.is_symlink() and out.read_text(encoding="utf-8").startswith("<!doctype html>")
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
