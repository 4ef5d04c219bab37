"""Issue 26 item 8: every theme's text is readable on its background — WCAG 2 contrast of at least
4.5, computed from the theme files and from what the screens really draw in each theme."""

from __future__ import annotations

import tomllib
from importlib import resources

import pytest
from ui_support import app_for, ready, until

from breakwater.ui.app import DARK, LIGHT

AA_TEXT = 4.5
TEXT = ("foreground", "muted", "primary", "secondary", "accent", "success", "warning", "error")
BACKGROUNDS = ("background", "surface", "panel")


def luminance(rgb: tuple[int, int, int]) -> float:
    def channel(v: int) -> float:
        c = v / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = map(channel, rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def rgb(hex_colour: str) -> tuple[int, int, int]:
    h = hex_colour.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def theme_files() -> list[dict]:
    return [tomllib.loads(f.read_text(encoding="utf-8"))
            for f in sorted(resources.files("breakwater.themes").iterdir(), key=lambda f: f.name)
            if f.name.endswith(".toml")]


def test_the_contrast_formula():
    assert contrast((0, 0, 0), (255, 255, 255)) == pytest.approx(21.0)
    assert contrast(rgb("#777777"), rgb("#ffffff")) == pytest.approx(4.48, abs=0.01)


@pytest.mark.parametrize("theme", theme_files(), ids=lambda t: t["name"])
def test_every_text_colour_of_a_theme_is_readable_on_each_of_its_backgrounds(theme):
    colours = {**{k: v for k, v in theme.items() if isinstance(v, str) and v.startswith("#")}, **theme["variables"]}
    texts = [*TEXT, *(k for k in colours if k.startswith(("role-", "gauge-")))]
    poor = [f"{fg} {colours[fg]} on {bg} {colours[bg]}: {contrast(rgb(colours[fg]), rgb(colours[bg])):.2f}"
            for fg in texts for bg in BACKGROUNDS if contrast(rgb(colours[fg]), rgb(colours[bg])) < AA_TEXT]
    # badges and pinned rows write the background colour on the span's colour
    poor += [f"background on {k} {colours[k]}: {contrast(rgb(colours['background']), rgb(colours[k])):.2f}"
             for k in colours if (k.startswith("span-") or k == "pinned")
             and contrast(rgb(colours["background"]), rgb(colours[k])) < AA_TEXT]
    assert poor == []


def unreadable(app, region=None) -> list[str]:
    """Every run of letters or digits drawn with less than AA contrast, with its colours (inside
    `region` only: a dialog's, whose backdrop is dimmed on purpose)."""
    out = []
    for y, strip in enumerate(app.screen._compositor.render_strips()):
        x = 0
        for seg in strip:
            style, x = seg.style, x + seg.cell_length
            if region is not None and not (region.y <= y < region.bottom and region.x <= x - seg.cell_length
                                           and x <= region.right):
                continue
            if style is None or not any(ch.isalnum() for ch in seg.text):
                continue
            if style.color is None or style.bgcolor is None:
                out.append(f"row {y}: {seg.text.strip()!r} has no colour of its own")
                continue
            fg, bg = tuple(style.color.get_truecolor()), tuple(style.bgcolor.get_truecolor())
            if contrast(fg, bg) < AA_TEXT:
                out.append(f"row {y}: {seg.text.strip()[:30]!r} #{'%02x%02x%02x' % fg} on "
                           f"#{'%02x%02x%02x' % bg}: {contrast(fg, bg):.2f}")
    return out


@pytest.mark.parametrize("theme", [DARK, LIGHT])
async def test_what_the_screens_draw_is_readable_in_both_themes(theme):
    app = app_for(turn=40)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot, 40)
        screen = app.screen
        await pilot.press("p", "p")                  # the policy panel drawn once in the first theme
        if theme != app.theme:
            await pilot.press("t")                   # as the user switches: what was drawn follows
        assert app.theme == theme
        await until(pilot, lambda: screen.fidelity is not None, 120)
        await pilot.pause(0.3)
        assert unreadable(app) == []                 # the list focused, titles of the other parts unfocused
        await pilot.press("p")                       # the policy panel, focused
        await pilot.pause(0.3)
        assert unreadable(app) == []
        await pilot.press("s")                       # the spill pane
        await pilot.pause(0.3)
        assert unreadable(app) == []
        await pilot.press("f1")
        await pilot.pause(0.3)
        assert unreadable(app, app.screen.query_one("#help-body").region) == []
        await pilot.press("escape", "s", "p", "c")  # the A/B view
        await until(pilot, lambda: type(app.screen).__name__ == "CompareScreen")
        await pilot.pause(1.0)
        assert unreadable(app) == []
