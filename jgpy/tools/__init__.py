"""Diagnostics: capture and decode JGroups traffic."""
