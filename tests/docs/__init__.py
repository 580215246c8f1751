"""Tests of the documentation: generated pages, shell examples, the PostgreSQL recipe."""
