"""The Textual application: screens, the poll loop, the header line, replay keys and quitting.

The app owns no data. It drives a :class:`~cuzktui.controller.Controller` (live or replay):
``start()`` once in a worker, then ``poll()`` about once a second. The poll never overlaps
(a one-shot timer is re-armed after each poll finishes, Dolphie-style), and after a poll only
the screens that are visible and whose model version moved since they last drew are asked to
refresh (``refresh_from_model()``), so an idle cockpit costs nothing over SSH.

``controller.model`` is always read fresh: a replay controller may replace the model object
when it seeks.
"""

from __future__ import annotations

import inspect
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import App, SuspendNotSupported, SystemCommand
from textual.binding import ActiveBinding, Binding, BindingType
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.filter import DimFilter, LineFilter
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Input

from ..collector import QuietCollections
from ..controller import Controller, PollBackoff
from ..figures import status_line
from ..units import format_size
from .messages import ApplyRecommended, KnobEdits, OpenReplay
from .modals import ConfirmModal, HelpScreen, QuitScreen
from .screens.bench import BenchScreen
from .screens.dashboard import DashboardScreen
from .screens.knobs import KnobsScreen
from .screens.logs import LogsScreen
from .screens.memcheck import MemcheckScreen
from .screens.sessions import SessionsScreen
from .screens.tune import TuneScreen
from .screens.waterfall import WaterfallScreen
from .theme import (
    DEFAULT_THEME,
    SIXTEEN_COLOURS,
    ThemeFileError,
    bundled_themes,
    drawn_variables,
    variable_defaults,
)
from .widgets.header import SCREEN_KEYS

# (mode name, key, footer label, screen class): the order is the order of the number keys.
SCREENS: tuple[tuple[str, str, str, Callable[[Controller], Screen[Any]]], ...] = (
    ("dashboard", "1", "Dashboard", DashboardScreen),
    ("waterfall", "2", "Waterfall", WaterfallScreen),
    ("knobs", "3", "Knobs", KnobsScreen),
    ("bench", "4", "Bench", BenchScreen),
    ("memcheck", "5", "Memcheck", MemcheckScreen),
    ("logs", "6", "Logs", LogsScreen),
    ("sessions", "7", "Sessions", SessionsScreen),
    ("tune", "8", "Tune", TuneScreen),
)

# Text styled "dim" is drawn in the foreground blended this far toward the background (a colour the theme
# decides, 4.5:1 or more in the themes we ship: tests/ui/test_contrast.py) instead of with the terminal's
# faint attribute, whose contrast every terminal decides for itself (often below 3:1).
DIM_FACTOR = 0.7

# Textual's timer divides by its interval: "at once" is this short a delay.
CATCH_UP_DELAY_S = 0.001

REPLAY_SPEEDS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)


def listed_keys(screen: Screen[Any]) -> list[tuple[str, ActiveBinding]]:
    """Each action ``screen`` answers to now, once, under the key the footer shows for it (the footer's
    bindings first: ``q`` rather than ``ctrl+q``), drawn as the footer draws it (``^s``): the palette
    and the help list the keys the footer does."""
    seen: set[str] = set()
    listed: list[tuple[str, ActiveBinding]] = []
    for _key, active in sorted(screen.active_bindings.items(), key=lambda item: not item[1].binding.show):
        binding = active.binding
        if not binding.description or binding.action in seen or not active.enabled:
            continue
        seen.add(binding.action)
        listed.append((screen.app.get_key_display(binding), active))
    return listed


class ActionsProvider(Provider):
    """Every action bound on the screen the palette was opened from (so palette == footer), each once:
    its name and key, with a help line only where the binding says more than its name."""

    def _actions(self) -> list[tuple[str, str | None, Callable[[], object]]]:
        actions: list[tuple[str, str | None, Callable[[], object]]] = []
        for key, active in listed_keys(self.screen):
            binding = active.binding
            if binding.system or binding.action == "command_palette":  # not the palette itself, from the palette
                continue
            run = partial(self.app.call_later, self.app.run_action, binding.action, active.node)
            more = binding.tooltip if binding.tooltip and binding.tooltip != binding.description else None
            actions.append((f"{binding.description} ({key})", more, run))
        return actions

    async def discover(self) -> Hits:
        for label, help_text, run in self._actions():
            yield DiscoveryHit(label, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for label, help_text, run in self._actions():
            score = matcher.match(label)
            if score > 0:
                yield Hit(score, matcher.highlight(label), run, help=help_text)


class CuzkApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "cuzk-tui"
    COMMANDS = App.COMMANDS | {ActionsProvider}
    BINDINGS: ClassVar[list[BindingType]] = [
        *(Binding(key, f"show('{mode}')", label, group=SCREEN_KEYS) for mode, key, label, _ in SCREENS),
        Binding("q", "request_quit", "Quit", id="quit"),
        Binding("question_mark", "help", "Help", key_display="?", id="help"),
        Binding("ctrl+q", "request_quit", "Quit", show=False, priority=True),
        Binding("space", "toggle_play", "Play/pause"),
        Binding("greater_than_sign,plus", "speed(1)", "Faster", key_display=">"),
        Binding("less_than_sign,minus", "speed(-1)", "Slower", key_display="<"),
        # Number keys (and q, ?) type into a focused field; Escape leaves the field so they switch screens
        # again. Shown (in place of q and ?) only while a field has the focus.
        Binding("escape", "leave_field", "Leave field", id="leave-field"),
    ]

    def __init__(
        self,
        controller: Controller,
        *,
        ascii_only: bool = False,
        theme: str | None = None,
        poll_interval: float = 1.0,
        collections: QuietCollections | None = None,
        command: tuple[str, ...] = ("cuzk-tui",),
    ) -> None:
        super().__init__()
        self.controller = controller
        # This program as a shell runs it again (commands/tui.py invoked_as), for the commands the app prints.
        self.command = command
        # The process's collector, run at quiet polls (the command that owns the process passes it).
        self._collections = collections
        self.ascii_only = ascii_only
        self._backoff = PollBackoff(poll_interval)
        self._requested_theme = theme
        self._poll_timer: Timer | None = None
        self._drawn: dict[Screen[Any], tuple[int, int]] = {}
        self._unapplied_knobs: list[str] = []
        self._dim_filter = DimFilter(DIM_FACTOR)
        for mode, _key, _label, screen_class in SCREENS:
            self.add_mode(mode, partial(screen_class, controller))

    # -- setup ---------------------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        # Textual's own "Quit" would list quitting twice and skip the question of what keeps running; its
        # "Keys" panel would list the keys a second time beside our Help (?), which says what the screen shows.
        return (command for command in super().get_system_commands(screen) if command.title not in ("Quit", "Keys"))

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return variable_defaults(self.current_theme)

    def get_css_variables(self) -> dict[str, str]:
        # On a 16-colour terminal our colours are the ANSI ones in the CSS and in markup ("$phase-queue" in
        # the waterfall's details, the dashboard's "waiting") as in the bars: a hex amber there fell to the
        # nearest of the 16, the failure's bright red (theme.drawn_variables).
        variables = super().get_css_variables()
        self.theme_variables = drawn_variables(variables, self.current_theme.dark, self.console.color_system)
        return self.theme_variables

    def get_line_filters(self) -> Sequence[LineFilter]:
        filters = super().get_line_filters()
        # An ANSI theme's colours, and a 16-colour terminal's (on_mount), are the terminal's own: nothing to
        # blend (the terminal dims them; a blend would be an RGB colour the 16 fold back, yellow into red).
        return filters if self.native_ansi_color else [*filters, self._dim_filter]

    async def on_mount(self) -> None:
        try:
            for theme in bundled_themes():
                self.register_theme(theme)
        except ThemeFileError as exc:
            self.notify(str(exc), title="Theme", severity="error")
        wanted = self._requested_theme or DEFAULT_THEME
        if self.get_theme(wanted) is None:
            self.notify(
                f"unknown theme {wanted!r}; available: {', '.join(sorted(self.available_themes))}",
                title="Theme",
                severity="error",
            )
            wanted = DEFAULT_THEME if self.get_theme(DEFAULT_THEME) else "textual-dark"
        if self.console.color_system in SIXTEEN_COLOURS:
            # Textual turns ANSI colours into its own RGB ones, which the terminal's 16 then fold back:
            # ANSI yellow came out bright red, the failure's colour. The terminal's own colours instead.
            self.ansi_color = True
        self.theme = wanted
        if self.ascii_only:
            self.add_class("-ascii")
        self.title = f"cuzk-tui · {self.controller.identity.title}"
        await self.switch_mode("dashboard")  # mounted before the first poll asks it to draw
        self._start()

    @work(exclusive=True, group="controller")
    async def _start(self) -> None:
        try:
            await self.controller.start()
        except Exception as exc:
            self.notify(f"could not start: {exc}", title="Controller", severity="error", timeout=30)
        await self._poll()

    # -- polling -------------------------------------------------------------------------------

    async def _poll(self) -> None:
        try:
            await self.controller.poll()
        except Exception as exc:
            failed = self._backoff.failed(exc)
            if failed is not None:
                self.notify(failed, title="Controller", severity="error", timeout=15)
        else:
            recovered = self._backoff.succeeded()
            if recovered is not None:
                self.notify(recovered, title="Controller")
        self.refresh_visible()
        behind = bool(self.controller.log_backlog())
        if self._collections is not None:
            self._collections.after_poll(behind)
        # Behind a flooding log: the next poll goes on with it at once (each poll leaves the UI half the loop).
        delay = CATCH_UP_DELAY_S if behind else self._backoff.delay()
        self._poll_timer = self.set_timer(delay, self._poll_tick)

    @work(exclusive=True, group="controller")
    async def _poll_tick(self) -> None:
        # A @work method makes its coroutine only when the worker runs: quitting cancels a queued
        # poll (same exclusive group) before it starts, and a coroutine made earlier would never be awaited.
        await self._poll()

    def refresh_visible(self) -> None:
        """Redraw the visible screens whose model moved since they last drew; update the header."""
        model = self.controller.model
        key = (id(model), model.version)
        for screen in self.screen_stack:
            refresh = getattr(screen, "refresh_from_model", None)
            if refresh is None or self._drawn.get(screen) == key:
                continue
            self._drawn[screen] = key
            try:
                refresh()
            except Exception as exc:
                self.notify(f"{type(screen).__name__}: {exc}", severity="error")
        status = status_line(model, self.controller.clock)
        backlog = self.controller.log_backlog()
        if backlog:
            status += f" · catching up on the log: {format_size(backlog)} unread"
        self.sub_title = status

    # -- actions -------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("toggle_play", "speed"):
            return self.controller.clock is not None
        if action == "leave_field":
            return isinstance(self.focused, Input)
        return True

    async def action_show(self, mode: str) -> None:
        await self.switch_mode(mode)
        self.refresh_visible()

    def action_toggle_play(self) -> None:
        clock = self.controller.clock
        if clock is None:
            return
        if clock.playing:
            clock.pause()
        else:
            model = self.controller.model
            at_end = clock.cursor_t is None or (model.last_t is not None and clock.cursor_t >= model.last_t)
            if at_end and model.first_t is not None:
                # The app opens on the whole session; playing starts over from its beginning.
                clock.seek(model.first_t)
            clock.play(clock.speed)
        self.refresh_visible()

    def action_speed(self, step: int) -> None:
        clock = self.controller.clock
        if clock is None:
            return
        faster = [s for s in REPLAY_SPEEDS if s > clock.speed]
        slower = [s for s in REPLAY_SPEEDS if s < clock.speed]
        if step > 0 and faster:
            speed = faster[0]
        elif step < 0 and slower:
            speed = slower[-1]
        else:
            return
        if clock.playing:
            clock.play(speed)
        else:
            clock.speed = speed
        self.refresh_visible()

    def action_leave_field(self) -> None:
        if isinstance(self.focused, Input):
            self.set_focus(None)

    async def on_apply_recommended(self, message: ApplyRecommended) -> None:
        """Memcheck's "apply recommended": pre-fill the Knobs form (the operator still reviews and applies)."""
        await self.switch_mode("knobs")
        if isinstance(self.screen, KnobsScreen):
            self.screen.fill(message.values)
        self.refresh_visible()

    def on_knob_edits(self, message: KnobEdits) -> None:
        self._unapplied_knobs = message.names

    def on_open_replay(self, message: OpenReplay) -> None:
        """Open a recorded session in a replay viewer in this terminal; quitting it comes back here.

        A separate process keeps the live controller (and the daemon it watches) untouched.
        """
        argv = [sys.executable, "-m", "cuzktui.cli"]
        if self.ascii_only:
            argv.append("--ascii")
        argv += ["--theme", self.theme, "replay", str(message.path)]
        try:
            with self.suspend():
                subprocess.run(argv, check=False)
        except SuspendNotSupported:
            replay = shlex.join([*self.command, "replay", str(message.path)])
            self.notify(f"replay it with: {replay}", title="Replay", severity="warning")

    def action_help(self) -> None:
        """The current screen's help: its module's description, then every key it answers to now."""
        screen = self.screen
        if isinstance(screen, HelpScreen):
            return
        doc = inspect.getdoc(sys.modules[type(screen).__module__]) or type(screen).__name__
        # Docstrings are wrapped for the source: re-flow each paragraph to the dialog's width.
        text = Text("\n\n".join(" ".join(paragraph.split()) for paragraph in doc.split("\n\n")))
        text.append("\n\nKeys\n", style="bold")
        for key, active in listed_keys(screen):
            text.append(f"  {key:<10} {active.binding.description}\n")
        text.append(
            "\nGlyphs: ✓ completed · ✗ failed · ? incomplete (daemon run ended) · ▶ running; with --ascii or"
            " NO_COLOR the bars are = synthesis, - waiting for GPU, # GPU prove, X failed. On a job's row ┄ (:) is"
            " its wait in the scheduler and for the memory budget, ─ (.) the proof; in the lanes ▏ (|) starts the"
            " next proof and · (.) is idle.\nEscape closes this."
        )
        self.push_screen(HelpScreen(text))

    def action_request_quit(self) -> None:
        unapplied = [] if self.controller.read_only else self._unapplied_knobs
        if not unapplied:
            self._quit_question()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._quit_question()

        count = f"{len(unapplied)} knob edit{'s' if len(unapplied) != 1 else ''}"
        self.push_screen(
            ConfirmModal(
                f"Quit with {count} not applied?",
                Text("They are lost on quitting (apply them on Knobs with ctrl+s):\n" + "\n".join(unapplied)),
                yes="Quit anyway (y)",
                no="Stay (n)",
            ),
            answered,
        )

    def _quit_question(self) -> None:
        controller = self.controller
        running = []
        if not controller.read_only:
            if controller.daemon_running():
                pid = controller.model.daemon.pid
                running.append(f"the daemon (pid {pid})" if pid else "the daemon")
            if controller.bench_running():
                running.append("a benchmark")
            tune = controller.tune_snapshot()
            if tune is not None and tune.state == "running":
                resume = shlex.join([*self.command, "tune", "--resume", str(tune.directory)])
                running.append(f"a knob search: it stops with the TUI either way ({resume} continues it)")
        if not running:
            self._leave(stop_daemon=False)
            return

        def chosen(choice: bool | None) -> None:
            if choice is not None:
                self._leave(stop_daemon=choice)

        # A live controller says exactly what keeps running (pids, the runner stopping its daemon at the end).
        self.push_screen(QuitScreen(controller.left_running() or running, controller.reattach_hint()), chosen)

    @work(exclusive=True, group="controller")
    async def _leave(self, stop_daemon: bool) -> None:
        if self._poll_timer is not None:
            self._poll_timer.stop()
        try:
            await self.controller.shutdown(stop_daemon=stop_daemon)
        except Exception as exc:
            self.exit(return_code=1, message=f"cuzk-tui: shutdown failed: {exc}")
            return
        self.exit()
