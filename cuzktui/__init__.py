"""cuzk-tui: a terminal cockpit for the cuzk GPU proving daemon.

Everything in this package except ``cuzktui.ui`` is headless: it never imports Textual, so the
CLI, the headless benchmark and the tests share one core (tests/test_headless.py enforces it).
"""

__version__ = "0.1.0"
