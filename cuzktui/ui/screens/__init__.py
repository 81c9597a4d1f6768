"""The screens of the cuzk-tui app, one module each; the app registers them as modes."""
