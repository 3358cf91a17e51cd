"""Numbered schema migrations per backend. A released migration is never edited: add a new one."""
