"""Widgets of the cuzk-tui screens (charts, waterfall, panels, log view, forms)."""
