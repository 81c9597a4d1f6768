"""The Textual user interface: the only package of cuzk-tui that imports textual."""
