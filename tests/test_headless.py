"""Everything outside cuzktui/ui/ must import without Textual (the headless-core contract)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import cuzktui
import engine

ROOT = Path(__file__).resolve().parent.parent


def _headless_modules() -> list[str]:
    names = []
    for package in (cuzktui, engine):
        for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + "."):
            if info.name.startswith("cuzktui.ui"):
                continue
            names.append(info.name)
    return names


def test_core_imports_without_textual() -> None:
    modules = _headless_modules()
    assert "cuzktui.events" in modules
    # Block textual (and rich) in a fresh interpreter, then import every core module.
    program = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('textual', 'rich'):\n"
        "            raise ImportError('headless core imported ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import importlib\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
