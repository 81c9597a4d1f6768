"""Daemon config files: load, read, change, compare and save them without disturbing anything else.

Operators annotate their configs and keep keys this tool does not know, so a file is edited, not
regenerated: tomlkit keeps comments, key order, whitespace and unknown keys, and a change touches
only the value it sets. Saving is atomic (temporary file, fsync, rename, fsync of the directory)
because a half-written config is fatal to the daemon's next start.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import stat
import tempfile
import tomllib
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import AoT, Item, Table

from .knob_rules import validate_document, validate_value
from .knobs import (
    KNOBS,
    KNOBS_BY_NAME,
    SECTIONS,
    Knob,
    KnobType,
    Problem,
    Severity,
    Status,
    TomlValue,
    knob,
    knobs_by_section,
    unknown_knob_message,
)

NEW_FILE_MODE = 0o644
_TOMLLIB_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


class ConfigError(Exception):
    """A config file that cannot be read; the message names the file (and line and column)."""

    def __init__(self, path: Path | str, message: str, line: int | None = None, column: int | None = None) -> None:
        self.path = Path(path)
        self.line = line
        self.column = column
        where = f"{path}:{line}:{column}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True, slots=True)
class Change:
    knob: Knob
    old: TomlValue | None
    new: TomlValue | None

    @property
    def name(self) -> str:
        return self.knob.name

    @property
    def restart_required(self) -> bool:
        return self.knob.restart_required


class ConfigDocument:
    """One config file's TOML, editable in place; values not in the file read as the daemon's defaults."""

    def __init__(self, document: tomlkit.TOMLDocument | None = None, path: Path | None = None) -> None:
        self.document = document if document is not None else tomlkit.document()
        self.path = path

    @classmethod
    def parse(cls, text: str, path: Path | str | None = None) -> ConfigDocument:
        """Parse TOML text read from ``path``; ConfigError (naming it, line and column) when it is not valid TOML."""
        where = path if path is not None else "<config>"
        # tomllib is strict TOML 1.0 like the daemon's parser and its errors carry a position;
        # tomlkit then gives the editable, format-preserving tree.
        try:
            tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            message = str(exc)
            match = _TOMLLIB_POSITION.search(message)
            if match is None:
                raise ConfigError(where, f"invalid TOML: {message}") from None
            line, column = int(match[1]), int(match[2])
            raise ConfigError(where, f"invalid TOML: {message[: match.start()]}", line, column) from None
        try:
            document = tomlkit.parse(text)
        except tomlkit.exceptions.TOMLKitError as exc:
            raise ConfigError(where, f"invalid TOML: {exc}") from None
        return cls(document, None if path is None else Path(path))

    def text(self) -> str:
        return tomlkit.dumps(self.document)

    def data(self) -> dict[str, Any]:
        """The file's contents as plain Python values."""
        return self.document.unwrap()

    def _raw(self, section: str, key: str) -> tuple[bool, Any]:
        table = self.data().get(section)
        if isinstance(table, dict) and key in table:
            return True, table[key]
        return False, None

    def is_set(self, section: str, key: str) -> bool:
        return self._raw(section, key)[0]

    def get(self, section: str, key: str) -> Any:
        """The value in the file, else the knob's default (None where the daemon has none).

        A float knob written as an integer reads as a float, as the daemon and engine see it.
        KeyError for a key that is neither in the file nor in the schema.
        """
        present, value = self._raw(section, key)
        k = KNOBS_BY_NAME.get(f"{section}.{key}")
        if not present:
            if k is None:
                raise KeyError(unknown_knob_message(f"{section}.{key}"))
            return copy.deepcopy(k.default)
        if k is not None and k.type is KnobType.FLOAT and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value

    def set(self, section: str, key: str, value: TomlValue) -> None:
        """Set one value, changing only that key's value; comments and layout around it stay.

        An absent key goes after the last key of its section (before comments that introduce the
        next section); an absent section is added at the end of the file. The value is not
        validated here (see :func:`cuzktui.knob_rules.validate_value`).
        """
        if section not in self.document:
            table = tomlkit.table()
            table.add(key, value)
            self.document.add(section, table)
            return
        container = self.document[section]
        if not isinstance(container, MutableMapping):
            raise ValueError(f"{section}: is a {type(container).__name__}, not a table; cannot set {key!r} in it")
        if key in container or not isinstance(container, Table):
            container[key] = value  # tomlkit carries the old value's comment and indentation over
            return
        _insert_after_last_key(container, key, value)

    def remove(self, section: str, key: str) -> bool:
        """Delete one key (the daemon then uses its default); False when it was not in the file."""
        container = self.document.get(section)
        if not isinstance(container, MutableMapping) or key not in container:
            return False
        del container[key]
        return True

    def update(self, values: Mapping[str, TomlValue | None]) -> None:
        """:meth:`set` for each ``"section.key"`` → value, :meth:`remove` where the value is None
        (a benchmark's ``--set`` overrides, a form's edits that clear a knob)."""
        for name, value in values.items():
            section, _, key = name.partition(".")
            if value is None:
                self.remove(section, key)
            else:
                self.set(section, key, value)

    def effective(self) -> dict[str, Any]:
        """``"section.key"`` → the value the daemon (or engine) uses, for every knob."""
        return {k.name: self.get(k.section, k.key) for k in KNOBS}

    def unknown_keys(self) -> list[str]:
        """Sections and ``section.key`` names in the file that no knob describes (the daemon ignores them)."""
        names: list[str] = []
        for section, table in self.data().items():
            if section not in SECTIONS:
                names.append(section)
            elif isinstance(table, dict):
                names += [f"{section}.{key}" for key in table if f"{section}.{key}" not in KNOBS_BY_NAME]
        return names

    def problems(self) -> list[Problem]:
        return validate_document(self.data())


def _insert_after_last_key(table: Table, key: str, value: TomlValue) -> None:
    # tomlkit's public add() appends after the table's trailing blank lines and comments, which
    # usually introduce the *next* section; its private insert helpers are the only way to place
    # the key right after the last key instead.
    body = table.value.body
    keyed = [i for i, (k, item) in enumerate(body) if k is not None and not isinstance(item, Table | AoT)]
    item: Item = tomlkit.item(value)
    if keyed:
        position = keyed[-1] + 1
        item.trivia.indent = body[keyed[-1]][1].trivia.indent
        if position < len(body):
            # _insert_at exists across tomlkit releases (0.15.3 dropped _insert_after).
            table.value._insert_at(position, key, item)
        else:
            table.add(key, item)  # nothing follows the last key: appending is placing it right after
    elif body:
        table.value._insert_at(0, key, item)
    else:
        table.add(key, item)


def load_config(path: Path | str) -> ConfigDocument:
    """Load a config file; ConfigError naming the file when it is missing, unreadable or not TOML."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(path, "no such file") from None
    except OSError as exc:
        raise ConfigError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(path, f"not UTF-8 text (byte {exc.start})") from None
    return ConfigDocument.parse(text, path)


def load_config_or_default(path: Path | str) -> ConfigDocument:
    """Like :func:`load_config`, but a missing file is an empty config (all defaults), as the daemon treats it."""
    path = Path(path)
    if not path.exists():
        return ConfigDocument(path=path)
    return load_config(path)


def _canonical(value: Any) -> str:
    # Distinguishes true from 1, which Python's == does not.
    return json.dumps(value, sort_keys=True)


def diff(a: ConfigDocument, b: ConfigDocument) -> list[Change]:
    """Knobs whose effective value differs from ``a`` to ``b``, in schema order."""
    before, after = a.effective(), b.effective()
    return [
        Change(k, before[k.name], after[k.name])
        for k in KNOBS
        if _canonical(before[k.name]) != _canonical(after[k.name])
    ]


def save_atomic(doc: ConfigDocument | str, path: Path | str, mode: int | None = None) -> None:
    """Write a config (a document or text) so that ``path`` holds either the old or the new file, never half.

    The file keeps its current permission bits; a new file gets ``mode``, or 0644. An explicit
    ``mode`` also applies to an existing file. A symlink is followed, so the link stays a link.
    """
    target = Path(os.path.realpath(path))
    data = (doc if isinstance(doc, str) else doc.text()).encode("utf-8")
    if mode is None:
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            mode = NEW_FILE_MODE
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def build_config(values: Mapping[str, Any]) -> str:
    """A fresh, commented config: ``values`` (``"section.key"`` → TOML value) set, the other knobs
    shown as commented-out defaults.

    Deprecated and inert knobs appear only when given. ValueError naming the knob for
    an unknown name or a value the daemon would refuse or misread.
    """
    errors = [unknown_knob_message(name) for name in values if name not in KNOBS_BY_NAME]
    errors += [
        str(p) for name, v in values.items() if name in KNOBS_BY_NAME for p in validate_value(knob(name), v)
        if p.severity is Severity.ERROR
    ]  # fmt: skip
    if errors:
        raise ValueError("; ".join(errors))
    doc = tomlkit.document()
    doc.add(tomlkit.comment("cuzk daemon config written by cuzk-tui. The daemon reads it only at start:"))
    doc.add(tomlkit.comment("restart it after any change. Commented-out lines show the defaults."))
    for section, knobs in knobs_by_section():
        shown = [k for k in knobs if k.name in values or k.status in (Status.ACTIVE, Status.ENGINE_ONLY)]
        table = tomlkit.table()
        if section == "engine":
            table.add(tomlkit.comment("Read only by cuzk-engine (the emulator); the real daemon ignores this section."))
        for k in shown:
            units = f" [{k.units}]" if k.units else ""
            table.add(tomlkit.comment(f"{k.summary}{units}"))
            if k.name in values:
                table.add(k.key, values[k.name])
            elif k.default is not None:
                table.add(tomlkit.comment(f"{k.key} = {tomlkit.item(k.default).as_string()}"))
        doc.add(tomlkit.nl())
        doc.add(section, table)
    return tomlkit.dumps(doc)
