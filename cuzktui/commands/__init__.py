"""Subcommand implementations for cuzktui.cli (one module per subcommand family)."""
