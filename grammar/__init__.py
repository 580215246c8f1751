"""Lark grammars for pipeline strings and condition expressions (package data)."""
