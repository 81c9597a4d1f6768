"""Themes and the colours our own drawing code (charts, waterfall) reads by name.

Widgets styled by CSS get their colours from Textual; the waterfall strips and the braille
charts are drawn by hand, so they read the current theme's variables through a
:class:`Palette`. Our variables (``phase-synth``, ``mem-limit``, …) are defined by the
theme files in ``cuzktui/themes/`` and have fallbacks for every other theme, including
Textual's 16-colour ``ansi-dark``/``ansi-light`` where they map to ANSI colour names.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rich.style import Style
from textual.app import App
from textual.color import Color, ColorParseError
from textual.theme import Theme

THEME_DIR: Final = Path(__file__).resolve().parent.parent / "themes"
DEFAULT_THEME: Final = "cuzk-dark"

# Fallbacks by (ansi theme, dark theme): every variable our code reads must be here.
_FALLBACKS: Final[dict[tuple[bool, bool], dict[str, str]]] = {
    (True, True): {
        "phase-synth": "ansi_blue",
        "phase-queue": "ansi_yellow",
        "phase-gpu": "ansi_green",
        "phase-failed": "ansi_red",
        "lane-idle": "ansi_bright_black",
        "restart": "ansi_red",
        "mem-rss": "ansi_cyan",
        "mem-cgroup": "ansi_magenta",
        "mem-limit": "ansi_red",
        "mem-budget": "ansi_yellow",
        "mem-oom": "ansi_bright_red",
        "gpu-mem": "ansi_green",
        "gpu-daemon": "ansi_cyan",
        "gpu-util": "ansi_yellow",
    },
    (False, True): {
        "phase-synth": "#4a9eda",
        "phase-queue": "#d4a72c",
        "phase-gpu": "#57ab5a",
        "phase-failed": "#e5534b",
        "lane-idle": "#3a414c",
        "restart": "#e5534b",
        "mem-rss": "#6cb6ff",
        "mem-cgroup": "#b083f0",
        "mem-limit": "#e5534b",
        "mem-budget": "#d4a72c",
        "mem-oom": "#ff7b72",
        "gpu-mem": "#57ab5a",
        "gpu-daemon": "#6cb6ff",
        "gpu-util": "#f0a742",
    },
    (False, False): {
        "phase-synth": "#0969da",
        "phase-queue": "#bf8700",
        "phase-gpu": "#1a7f37",
        "phase-failed": "#cf222e",
        "lane-idle": "#d0d7de",
        "restart": "#cf222e",
        "mem-rss": "#0969da",
        "mem-cgroup": "#8250df",
        "mem-limit": "#cf222e",
        "mem-budget": "#9a6700",
        "mem-oom": "#a40e26",
        "gpu-mem": "#1a7f37",
        "gpu-daemon": "#0969da",
        "gpu-util": "#bc4c00",
    },
}
_FALLBACKS[(True, False)] = {**_FALLBACKS[(True, True)], "lane-idle": "ansi_white"}

VARIABLES: Final = tuple(_FALLBACKS[(False, True)])

_THEME_FIELDS: Final = frozenset(
    {
        "name",
        "primary",
        "secondary",
        "warning",
        "error",
        "success",
        "accent",
        "foreground",
        "background",
        "surface",
        "panel",
        "boost",
        "dark",
        "luminosity_spread",
        "text_alpha",
        "variables",
    }
)


class ThemeFileError(ValueError):
    """A theme file that cannot be used; the message names the file and the field."""


def variable_defaults(theme: Theme) -> dict[str, str]:
    """Our variables' values for a theme that does not define them."""
    return dict(_FALLBACKS[(theme.ansi, theme.dark)])


# Rich's names for a terminal of 16 colours (TERM=screen, tmux's default; the Windows console).
SIXTEEN_COLOURS = ("standard", "windows")


def drawn_variables(variables: dict[str, str], dark: bool, color_system: str | None) -> dict[str, str]:
    """The variables our drawing reads, for a terminal of ``color_system`` (Rich's name for it).

    On a 16-colour terminal (TERM=screen) Rich maps each hex colour to its nearest ANSI one, which
    folds the GPU-queue amber and the failure red into the same bright red: a healthy proof would
    look partly failed. There the ANSI fallbacks are used instead, chosen so each phase differs
    (and the app lets ANSI colours through as they are: CuzkApp.on_mount).
    """
    if color_system in SIXTEEN_COLOURS:
        return {**variables, **_FALLBACKS[(True, dark)]}
    return variables


def load_theme(path: Path) -> Theme:
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ThemeFileError(f"{path}: {exc}") from exc
    unknown = set(data) - _THEME_FIELDS
    if unknown:
        raise ThemeFileError(f"{path}: unknown field(s) {', '.join(sorted(unknown))}")
    if not isinstance(data.get("name"), str) or not isinstance(data.get("primary"), str):
        raise ThemeFileError(f"{path}: 'name' and 'primary' are required strings")
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        raise ThemeFileError(f"{path}: [variables] must be a table")
    colours = {k: v for k, v in data.items() if k not in ("name", "dark", "variables")}
    for key, value in {**colours, **variables}.items():
        if isinstance(value, str):
            try:
                Color.parse(value)
            except ColorParseError as exc:
                raise ThemeFileError(f"{path}: {key} = {value!r} is not a colour") from exc
    return Theme(**data)


def bundled_themes() -> list[Theme]:
    """The themes shipped in ``cuzktui/themes``, sorted by name."""
    return [load_theme(path) for path in sorted(THEME_DIR.glob("*.toml"))]


@dataclass(frozen=True, slots=True)
class Palette:
    """The current theme's named colours, as Rich styles.

    With ``no_color`` (the ``NO_COLOR`` convention) nothing is coloured: styles are plain, so the
    charts rely on their markers alone. An ANSI colour stays one (a 16-colour theme stays in 16 colours).
    """

    colors: dict[str, Color]
    no_color: bool = False

    @classmethod
    def from_variables(cls, variables: dict[str, str], no_color: bool = False) -> Palette:
        colors = {}
        for name in VARIABLES:
            try:
                colors[name] = Color.parse(variables[name])
            except (KeyError, ColorParseError):
                colors[name] = Color.parse("ansi_default")
        return cls(colors, no_color)

    @classmethod
    def for_app(cls, app: App[Any]) -> Palette:
        """The palette the app's own drawing uses, for its theme, terminal colours and NO_COLOR."""
        variables = drawn_variables(app.theme_variables, app.current_theme.dark, app.console.color_system)
        return cls.from_variables(variables, app.no_color)

    def fg(self, name: str, bold: bool = False) -> Style:
        if self.no_color:
            return Style(bold=bold)
        return Style(color=self.colors[name].rich_color, bold=bold)

    def bg(self, name: str) -> Style:
        if self.no_color:
            return Style(reverse=True)
        return Style(bgcolor=self.colors[name].rich_color)
