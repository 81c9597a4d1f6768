"""cuzk-engine: an embedded, cuzk-compatible proving daemon emulator (no GPU, no valid proofs)."""
