"""The policy panel, driven with keys as a user would, in a small host app that re-simulates."""

from textual.app import App, ComposeResult

from breakwater.core.policy import PRESETS, load_toml
from breakwater.core.policy.toml_file import save
from breakwater.ui.widgets.policy_panel import PolicyPanel


class PanelHost(App):
    def __init__(self, policy):
        super().__init__()
        self.start = policy
        self.announced = []

    def compose(self) -> ComposeResult:
        yield PolicyPanel(self.start, id="panel")

    def on_mount(self) -> None:
        self.query_one("#policy-table").focus()

    def on_policy_panel_changed(self, message: PolicyPanel.Changed) -> None:
        self.announced.append(message.policy)


def status(app) -> str:
    return str(app.query_one("#policy-status").render())


async def settle(pilot, seconds=0.2):
    await pilot.pause(seconds)
    await pilot.pause()


async def test_keys_step_a_value_and_each_step_is_announced_at_once():
    app = PanelHost(PRESETS["breakwater"].with_changes(window=32_000))
    async with app.run_test(size=(120, 50)) as pilot:
        panel = app.query_one(PolicyPanel)
        panel.select("window")
        await pilot.press("right", "right", "right", "left")
        await settle(pilot)
        assert panel.policy.window == 32_000 + 2 * 1_000
        # no settle delay: the owner cancels the run of a value superseded by the next one
        assert [p.window for p in app.announced] == [33_000, 34_000, 35_000, 34_000]


async def test_typing_a_value_announces_what_is_valid_on_the_way_and_the_last_wins():
    app = PanelHost(PRESETS["seed-001"])
    async with app.run_test(size=(120, 50)) as pilot:
        panel = app.query_one(PolicyPanel)
        panel.select("window")
        await pilot.press("3", "2", "0", "0", "0", "enter")
        await settle(pilot)
        assert panel.policy.window == 32_000
        windows = [p.window for p in app.announced]
        assert windows[-1] == 32_000 and all("32000".startswith(str(w)) for w in windows)
        assert app.query_one("#policy-table").has_focus


async def test_a_bad_value_is_refused_with_the_reason_and_nothing_changes():
    start = PRESETS["breakwater"].with_changes(window=32_000)
    app = PanelHost(start)
    async with app.run_test(size=(120, 50)) as pilot:
        panel = app.query_one(PolicyPanel)
        panel.select("soft_ratio")
        await pilot.press("enter", *"0.95", "enter")
        await settle(pilot)
        assert panel.policy == start and app.announced == []
        assert "must stay below the hard limit" in status(app)
        await pilot.press("escape")
        panel.select("buffer_tokens")
        await pilot.press("enter", *"-5", "enter")
        await settle(pilot)
        assert "buffer_tokens cannot be negative" in status(app)
        assert panel.policy == start


async def test_presets_are_one_key_away_and_differences_are_marked():
    app = PanelHost(PRESETS["breakwater"].with_changes(window=32_000))
    async with app.run_test(size=(120, 50)) as pilot:
        panel = app.query_one(PolicyPanel)
        await pilot.press("f7")
        await settle(pilot)
        assert panel.policy == PRESETS["seed-001"].with_changes(window=32_000)
        table = app.query_one("#policy-table")
        assert str(table.get_cell("window", "name")) == "● window"
        assert str(table.get_cell("snip", "name")) == "  snip"
        assert "● 1 value differs" in str(app.query_one("#policy-summary").render())
        panel.select("window")
        await pilot.press("delete")
        await settle(pilot)
        assert panel.policy == PRESETS["seed-001"]


async def test_save_and_load_toml_from_the_panel(tmp_path):
    app = PanelHost(PRESETS["seed-000"].with_changes(window=20_000, snip_threshold_chars=4_000))
    async with app.run_test(size=(120, 50)) as pilot:
        panel = app.query_one(PolicyPanel)
        path = tmp_path / "mine.toml"
        await pilot.press("ctrl+s", *str(path), "enter")
        await pilot.pause()
        assert load_toml(path) == panel.policy
        other = save(PRESETS["seed-003"].with_changes(window=9_000), tmp_path / "other.toml")
        await pilot.press("ctrl+o", *str(other), "enter")
        await settle(pilot)
        assert panel.policy == load_toml(other)
        assert app.announced[-1] == panel.policy
        await pilot.press("ctrl+o", *str(tmp_path / "none.toml"), "enter")
        await pilot.pause()
        assert "no such policy file" in status(app) and panel.policy == load_toml(other)


async def test_a_burst_of_keys_lands_in_the_box_in_order():
    """A terminal delivers fast typing as one burst: the keys after the first reach the table
    before the box has the focus (seen in tmux: typing 100000 gave 0)."""
    from textual import events

    app = PanelHost(PRESETS["seed-001"])
    async with app.run_test(size=(120, 50)) as pilot:
        panel = app.query_one(PolicyPanel)
        panel.select("window")
        table = app.query_one("#policy-table")
        for ch in "100000":
            table.post_message(events.Key(ch, ch))
        await pilot.press("enter")
        await settle(pilot)
        assert panel.policy.window == 100_000
        assert not app.query_one("#policy-input").display


async def test_a_burst_after_enter_replaces_the_selected_value():
    from textual import events

    app = PanelHost(PRESETS["seed-001"])
    async with app.run_test(size=(120, 50)) as pilot:
        panel = app.query_one(PolicyPanel)
        panel.select("window")
        table = app.query_one("#policy-table")
        panel.start_typing("")  # enter: the box opens with the value selected
        for ch in "64000":
            table.post_message(events.Key(ch, ch))
        await pilot.press("enter")
        await settle(pilot)
        assert panel.policy.window == 64_000
