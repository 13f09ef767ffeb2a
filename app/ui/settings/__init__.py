"""The Settings dialog and its read-only Hardware section."""
