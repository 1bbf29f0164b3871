"""The constraint sets: one protocol, one class per kind, one registry."""
