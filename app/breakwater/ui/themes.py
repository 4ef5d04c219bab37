"""Themes from `themes/*.toml`: Textual `Theme` objects whose variables carry the colour of each
edit kind, role and gauge zone, so widgets and `.tcss` refer to `$span-snipped`, never to a hex."""

from __future__ import annotations

import tomllib
from importlib import resources

from textual.theme import Theme

THEME_FIELDS = ("primary", "secondary", "accent", "warning", "error", "success", "foreground", "background",
                "surface", "panel", "boost", "dark", "luminosity_spread", "text_alpha")
DEFAULT_THEME = "breakwater-dark"


def load_themes() -> list[Theme]:
    themes = []
    for item in sorted(resources.files("breakwater.themes").iterdir(), key=lambda p: p.name):
        if not item.name.endswith(".toml"):
            continue
        data = tomllib.loads(item.read_text(encoding="utf-8"))
        kwargs = {k: data[k] for k in THEME_FIELDS if k in data}
        variables = {str(k): str(v) for k, v in (data.get("variables") or {}).items()}
        themes.append(Theme(name=data["name"], variables=variables, **kwargs))
    return themes
