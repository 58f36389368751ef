"""Every REPL command, registered by name on import of this package."""

from unicache.repl.commands import cache_ops, faults, transfers, inspect, files, meta  # registration (and help) order
from unicache.repl.commands.base import REGISTRY, Command, Needs

__all__ = ["REGISTRY", "Command", "Needs", "cache_ops", "faults", "files", "inspect", "meta", "transfers"]
