"""Knobs screen: every config knob as a form field, the diff against the running config, Apply.

The daemon reads its config only at start, so every change is a save + drain + restart and
costs an SRS reload: the screen therefore shows exactly what would change (old → new) and asks
before applying. Knobs the daemon ignores (deprecated, inert) are marked so nobody tunes them
hoping for an effect; engine-only knobs are marked as such. Values are checked as they are typed
with the schema's own checks, which go further than the daemon (it silently reads ``"1.5GiB"``
as 50 GiB).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.markup import escape
from textual.screen import Screen
from textual.suggester import SuggestFromList
from textual.widgets import Collapsible, Input, Label, LoadingIndicator, Static, Switch

from ...controller import Controller
from ...figures import apply_stage
from ...knob_rules import MONOLITHIC_INERT, budget_problems, parse_cli_value, validate_value
from ...knobs import KNOBS_BY_NAME, LEVELS, Knob, KnobType, KnobValueError, Problem, Severity, Status, knobs_by_section
from ..messages import KnobEdits
from ..modals import ConfirmModal
from ..theme import Palette
from ..widgets.header import KeysFooter, follow_width, screen_header

# Styles of the theme's text colours, not CSS classes: the badge is part of the line that wraps with the
# summary. (Rich's "yellow" was the terminal's yellow: 1.01:1 on the light theme's fields.)
_BADGES = {
    Status.DEPRECATED: ("DEPRECATED — ignored by the daemon", "bold $text-warning"),
    Status.INERT: ("NO EFFECT — ignored by the daemon", "bold $text-warning"),
    Status.ENGINE_ONLY: ("ENGINE ONLY — the real daemon ignores it", "bold $text-primary"),
}


def value_text(value: Any) -> str:
    """How a TOML value is typed into a field (the inverse of ``parse_cli_value``)."""
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    return str(value)


def show_value(value: Any) -> str:
    """A value as TOML writes it, for the diff and the confirmation."""
    return "(unset)" if value is None else json.dumps(value)


def same_value(a: Any, b: Any) -> bool:
    # json distinguishes true from 1 and 1 from 1.0 where == does not.
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


class KnobField(Vertical):
    """One knob: name, the input, a one-line summary (full help while focused), what is wrong."""

    DEFAULT_CSS = """
    KnobField {
        height: auto; padding: 0 1;
        & > Horizontal { height: auto; }
        .knob--name { width: 30; text-style: bold; }
        .knob--editor { width: 1fr; }
        Switch.knob--editor { width: auto; }
        .knob--bool { width: 1fr; padding: 1 1; }
        .knob--summary, .knob--help, .knob--problem { padding-left: 30; color: $text-muted; }
        .knob--help { display: none; }
        &:focus-within .knob--help { display: block; }
        &:focus-within .knob--summary { display: none; }
        .knob--problem { display: none; }
        .knob--problem.-error { display: block; color: $text-error; }
        .knob--problem.-warning { display: block; color: $text-warning; }
        &.-changed .knob--name { color: $text-accent; }
        Input.-invalid { background: $error 25%; }
    }
    """

    def __init__(self, knob: Knob, value: Any, *, disabled: bool) -> None:
        super().__init__(id=f"knob-{knob.section}-{knob.key}")
        self.knob = knob
        self._initial_value = value
        self._editor_disabled = disabled
        self.problems: list[Problem] = []
        # The editor and the problem line, kept: the screen reads and checks every field on each edit.
        self._editor: Input | Switch
        self._problem_line = Static(classes="knob--problem")

    def compose(self) -> ComposeResult:
        k = self.knob
        with Horizontal():
            yield Label(k.key + (f" [{k.units}]" if k.units else ""), markup=False, classes="knob--name")
            if k.type is KnobType.BOOL:
                self._editor = Switch(bool(self._initial_value), disabled=self._editor_disabled, classes="knob--editor")
                yield self._editor
                # A switch's knob position alone does not say which way is on (nor in NO_COLOR): name it.
                yield Label(json.dumps(bool(self._initial_value)), classes="knob--bool")
            else:
                self._editor = Input(
                    value_text(self._initial_value),
                    placeholder=value_text(k.default) or "(unset)",
                    suggester=SuggestFromList(LEVELS) if k.type is KnobType.LEVEL else None,
                    disabled=self._editor_disabled,
                    compact=True,
                    classes="knob--editor",
                )
                yield self._editor
        yield Static(self._badge() + k.summary, classes="knob--summary")
        yield Static(self._badge() + self._help_text(), classes="knob--help")
        yield self._problem_line

    def _badge(self) -> Content:
        badge = _BADGES.get(self.knob.status)
        return Content.styled(f"{badge[0]} · ", badge[1]) if badge is not None else Content()

    def _help_text(self) -> str:
        k = self.knob
        text = k.help
        limits = k.describe_range()
        if limits:
            text += f" Allowed: {limits}."
        if k.default is not None:
            text += f" Default: {show_value(k.default)}."
        return text

    def on_mount(self) -> None:
        self.check()

    @on(Switch.Changed)
    def _switched(self, event: Switch.Changed) -> None:
        self.query_one(".knob--bool", Label).update(json.dumps(event.value))

    def value(self) -> Any:
        """The field's value as TOML; KnobValueError when the text is not of the knob's type."""
        if isinstance(self._editor, Switch):
            return self._editor.value
        text = self._editor.value
        if not text.strip() and self.knob.default is None:
            return None  # a knob the daemon only reads to warn about: leave it out of the file
        return parse_cli_value(self.knob, text)

    def set_value(self, value: Any) -> None:
        if isinstance(self._editor, Switch):
            self._editor.value = bool(value)
        else:
            self._editor.value = value_text(value)
        self.check()

    def check(self, context: Sequence[Problem] = ()) -> list[Problem]:
        """Validate the current value and show the first problem under the field; ``context`` holds
        this knob's problems that come from other knobs (budget floors, monolithic mode)."""
        try:
            value = self.value()
        except KnobValueError as exc:
            problems = [Problem(Severity.ERROR, self.knob.name, str(exc).removeprefix(f"{self.knob.name}: "))]
        else:
            problems = [] if value is None else [*validate_value(self.knob, value), *context]
        # The badge already says an ignored knob is ignored; repeat only real errors for those.
        ignored = self.knob.status in (Status.DEPRECATED, Status.INERT)
        self.problems = [
            p for p in problems if p.severity is Severity.ERROR or (p.severity is Severity.WARNING and not ignored)
        ]
        line = self._problem_line
        errors = [p for p in self.problems if p.severity is Severity.ERROR]
        shown = errors or self.problems
        line.set_class(bool(errors), "-error")
        line.set_class(bool(shown) and not errors, "-warning")
        line.update(("✗ " if errors else "! ") + shown[0].message if shown else "")
        if isinstance(self._editor, Input):
            self._editor.set_class(bool(errors), "-invalid")
        return self.problems

    @property
    def has_error(self) -> bool:
        return any(p.severity is Severity.ERROR for p in self.problems)


def drain_text(in_flight: list[str]) -> Text:
    """The apply's drain: what a restart now would kill, and the key that does it anyway."""
    if not in_flight:
        return Text("drained: nothing in flight; restarting")
    text = Text(f"draining: waiting for {len(in_flight)} in flight before the restart\n", style="bold")
    for line in in_flight:
        text.append(f"  · {line}\n")
    text.append("ctrl+k restarts anyway (what is listed is killed)", style="dim")
    return text


async def apply_and_say(screen: Screen[Any], controller: Controller, changes: Mapping[str, Any], title: str) -> None:
    """Save ``changes``, drain and restart the daemon (Controller.apply_config), then say how it went: the
    Knobs form's apply and the Tune screen's apply-best are the same act."""
    try:
        await controller.apply_config(dict(changes))
    except Exception as exc:
        screen.notify(f"apply failed: {exc}", title=title, severity="error", timeout=15)
    else:
        screen.notify(f"applied {len(changes)} change(s); the daemon restarted", title=title)


class KnobsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "apply", "Apply", priority=True),
        Binding("ctrl+r", "revert", "Revert", priority=True),
        Binding("ctrl+e", "toggle_sections", "Expand/collapse", priority=True),
        Binding("ctrl+k", "restart_anyway", "Restart anyway", priority=True),
    ]

    DEFAULT_CSS = """
    KnobsScreen {
        /* Wrapped, not cut: what applying does is at its end, and a session's config path is long. */
        #knobs-status { height: auto; padding: 0 1; background: $panel; }
        #knobs-body { height: 1fr; }
        #knobs-form { width: 2fr; }
        #knobs-side { width: 44; border-left: vkey $panel; padding: 0 1; }
        #knobs-diff-title { text-style: bold; }
        #knobs-progress { height: auto; display: none; margin-top: 1; }
        #knobs-progress.-busy { display: block; }
        #knobs-progress LoadingIndicator { height: 1; }
        Collapsible { padding-bottom: 0; }
    }
    /* Narrow (header.NARROW_WIDTH), the 44-column side panel beside the form would leave the form its
       labels only: it goes under the form, and the help starts under the name instead of beside it. */
    KnobsScreen.-narrow {
        #knobs-body { layout: vertical; }
        #knobs-form { width: 1fr; height: 1fr; }
        #knobs-side {
            width: 1fr; height: auto; max-height: 8; overflow-y: auto;
            border-left: none; border-top: hkey $panel;
        }
        KnobField .knob--summary, KnobField .knob--help, KnobField .knob--problem { padding-left: 2; }
    }
    """

    def __init__(self, controller: Controller) -> None:
        super().__init__()
        self.controller = controller
        self._running_values: dict[str, Any] = dict(controller.config_values())
        self._configs_seen = len(controller.model.configs)
        self._applying = False
        self._runs_before = 0
        self._daemon_version = -1
        self._pending_fill: dict[str, Any] = {}
        self._fields: list[KnobField] = []
        self._recheck_due = False

    def compose(self) -> ComposeResult:
        yield screen_header(self.app)
        yield Static(id="knobs-status")
        with Horizontal(id="knobs-body"):
            with VerticalScroll(id="knobs-form"):
                for section, knobs in knobs_by_section():
                    title = escape(f"[{section}]") + (" — cuzk-engine only" if section == "engine" else "")
                    with Collapsible(title=title, collapsed=False, id=f"section-{section}"):
                        for k in knobs:
                            field = KnobField(
                                k, self._running_values.get(k.name, k.default), disabled=self.controller.read_only
                            )
                            self._fields.append(field)
                            yield field
            with Vertical(id="knobs-side"):
                yield Static("Changes (running → new)", id="knobs-diff-title")
                yield Static(id="knobs-diff")
                with Vertical(id="knobs-progress"):
                    yield LoadingIndicator()
                    yield Static(id="knobs-stage")
        yield KeysFooter()

    def on_resize(self, event: events.Resize) -> None:
        follow_width(self, event.size.width)

    def on_mount(self) -> None:
        if self._pending_fill:
            self.fill(self._pending_fill)
            self._pending_fill = {}
        self._show_changes()

    @property
    def fields(self) -> list[KnobField]:
        # Kept from compose, not queried: every edit reads every field several times.
        return self._fields

    def field(self, name: str) -> KnobField:
        for field in self._fields:
            if field.knob.name == name:
                return field
        raise KeyError(name)

    # ---- the form -----------------------------------------------------------------------

    def changes(self) -> dict[str, Any]:
        """Knobs whose (valid) form value differs from the running config."""
        changed: dict[str, Any] = {}
        for f in self.fields:
            if f.has_error:
                continue
            value = f.value()
            if not same_value(value, self._running_values.get(f.knob.name, f.knob.default)):
                changed[f.knob.name] = value
        return changed

    def fill(self, values: Mapping[str, Any]) -> None:
        """Pre-fill fields (e.g. the planner's recommendations) without applying them.

        Callable before the screen was ever shown: the values wait for the form to exist.
        """
        if not self._fields:
            self._pending_fill.update(values)
            return
        unknown = []
        for name, value in values.items():
            if name in KNOBS_BY_NAME:
                self.field(name).set_value(value)
            else:
                unknown.append(name)
        if unknown:
            self.notify(f"not knobs of this form: {', '.join(unknown)}", severity="warning")
        self._show_changes()

    @on(Input.Changed)
    @on(Switch.Changed)
    def _edited(self) -> None:
        # One check of the whole form for a burst of changes (every field says Changed as it mounts, a
        # fill or a revert sets many): each check reads and validates every field.
        if not self._recheck_due:
            self._recheck_due = True
            self.call_later(self._recheck)

    def _recheck(self) -> None:
        self._recheck_due = False
        self._show_changes()

    def _check_fields(self) -> None:
        """Check every field, with the problems one knob causes in another (a budget below a kind's
        floor, knobs monolithic mode ignores), as ``config check`` reports them."""
        values: dict[str, Any] = {}
        for f in self.fields:
            try:
                value = f.value()
            except KnobValueError:
                continue
            if value is not None:
                values[f.knob.name] = value
        context: dict[str, list[Problem]] = {}
        for problem in budget_problems(values, MONOLITHIC_INERT):
            context.setdefault(problem.key, []).append(problem)
        for f in self.fields:
            f.check(context.get(f.knob.name, ()))

    def _show_changes(self) -> None:
        self._check_fields()
        changes = self.changes()
        lines = Text()
        palette = Palette.for_app(self.app)
        for f in self.fields:
            name = f.knob.name
            f.set_class(name in changes, "-changed")
            if f.has_error:
                lines.append(f"{name}\n", style="bold")
                lines.append(f"  ✗ {f.problems[0].message}\n", style=palette.fg("phase-failed"))
            elif name in changes:
                lines.append(f"{name}\n", style="bold")
                old = show_value(self._running_values.get(name, f.knob.default))
                lines.append(f"  {old} → {show_value(changes[name])}\n")
        errors = sum(f.has_error for f in self.fields)
        # The app asks before quitting with these: an edit typed but never applied is easy to lose.
        self.post_message(KnobEdits(sorted({*changes, *(f.knob.name for f in self.fields if f.has_error)})))
        source = self.controller.running_config_source()
        if not lines:
            if source is None:
                lines.append(
                    "The running config is unknown: the daemon was attached to without --config FILE, so the "
                    "form shows the built-in defaults, not what it runs.",
                    style="bold",
                )
            else:
                lines.append("No changes: the form matches the running config.", style="dim")
        self.query_one("#knobs-diff", Static).update(lines)
        if source is None:
            status = Text("running config unknown (attach with --config FILE)", style="bold")
        elif source:
            status = Text(f"running config from {source}")
        else:
            status = Text(str(self.controller.config_path() or "no config file (daemon defaults)"))
        status.append(f" · {len(changes)} change{'s' if len(changes) != 1 else ''}")
        if errors:
            status.append(f" · {errors} invalid", style=palette.fg("phase-failed", bold=True))
        if self.controller.read_only:
            status.append(" · read-only (replay)", style="italic")
        elif changes:
            status.append(" · apply = save, drain, restart (SRS reloads on the next proof)")
        self.query_one("#knobs-status", Static).update(status)

    # ---- actions ------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "restart_anyway":  # only while an apply waits for work in flight
            return self._applying and self.controller.drain_in_flight() is not None
        # Hidden from the footer in a replay, which changes nothing.
        return not (action in ("apply", "revert") and self.controller.read_only)

    def action_restart_anyway(self) -> None:
        self.controller.restart_anyway()
        self._show_stage()

    def action_revert(self) -> None:
        for f in self.fields:
            f.set_value(self._running_values.get(f.knob.name, f.knob.default))
        self._show_changes()

    def action_toggle_sections(self) -> None:
        sections = list(self.query(Collapsible))
        collapse = not all(s.collapsed for s in sections)
        for s in sections:
            s.collapsed = collapse

    def action_apply(self) -> None:
        if self._applying:
            self.notify("an apply is already in progress", severity="warning")
            return
        bad = [f.knob.name for f in self.fields if f.has_error]
        if bad:
            self.notify(f"fix the invalid values first: {', '.join(bad)}", severity="error")
            return
        changes = self.changes()
        if not changes:
            self.notify("nothing to apply: the form matches the running config")
            return
        if self.controller.bench_running():
            # The controller refuses to restart a daemon the benchmark runner owns (LiveController.apply_config).
            self.notify(
                "a benchmark is running and owns the daemon: nothing is applied until it ends "
                "(cancel it on the Bench screen or wait, then apply)",
                title="Knobs",
                severity="warning",
                timeout=15,
            )
            return
        detail = Text()
        for name, value in changes.items():
            detail.append(f"{name}: {show_value(self._running_values.get(name))} → {show_value(value)}\n")
        detail.append("The daemon reloads its SRS on the next proof (tens of seconds).", style="dim")

        def confirmed(yes: bool | None) -> None:
            if yes:
                # Leave the field: the keys pressed next (1-8 to watch the restart) switch screens instead of
                # typing into it. A "no" goes back to editing.
                self.set_focus(None)
                self.run_worker(self._apply(changes), group="knobs-apply", exclusive=True)

        self.app.push_screen(ConfirmModal("Save the config, drain and restart the daemon?", detail), confirmed)

    async def _apply(self, changes: dict[str, Any]) -> None:
        self._applying = True
        self._runs_before = self.controller.model.daemon.runs
        self.query_one("#knobs-progress").add_class("-busy")
        self._show_stage()
        # The drain's list changes (ages grow) even when the model does not: redraw it each second.
        ticker = self.set_interval(1.0, self._show_stage)
        try:
            await apply_and_say(self, self.controller, changes, "Knobs")
        finally:
            ticker.stop()
            self._applying = False
            self.query_one("#knobs-progress").remove_class("-busy")
            self.refresh_bindings()
            self._take_running(self.controller.config_values())

    def _show_stage(self) -> None:
        stage = Text(apply_stage(self.controller.model, self._runs_before))
        in_flight = self.controller.drain_in_flight()
        if in_flight is not None:
            stage = drain_text(in_flight)
        self.query_one("#knobs-stage", Static).update(stage)
        self.refresh_bindings()

    def _take_running(self, running: Mapping[str, Any]) -> None:
        """Adopt new running values; fields the operator has not edited follow them."""
        for f in self.fields:
            name = f.knob.name
            old = self._running_values.get(name, f.knob.default)
            new = running.get(name, f.knob.default)
            if same_value(old, new):
                continue
            try:
                untouched = same_value(f.value(), old)
            except KnobValueError:
                untouched = False
            if untouched:
                f.set_value(new)
        self._running_values = dict(running)
        self._show_changes()

    def refresh_from_model(self) -> None:
        model = self.controller.model
        if model.daemon_version == self._daemon_version:
            return
        self._daemon_version = model.daemon_version
        if self._applying:
            self._show_stage()
        elif len(model.configs) != self._configs_seen:
            # A config applied elsewhere (a benchmark's OOM recovery lowers total_budget).
            self._take_running(self.controller.config_values())
        self._configs_seen = len(model.configs)
