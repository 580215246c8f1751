"""The Lobster VM: runs compiled Programs, saves and resumes Frames. Never imports lark."""

__version__ = "0.1.0"
