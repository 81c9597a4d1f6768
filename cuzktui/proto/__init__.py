"""Stubs generated from protos/cuzk/v1/proving.proto by protos/generate.py (do not edit)."""
