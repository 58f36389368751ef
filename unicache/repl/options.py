"""Cache options shared by `new` and the `unicache repl` command line, and the config they build."""

from __future__ import annotations

import argparse

from unicache.config import CacheConfig
import math

from unicache.repl.errors import CommandSyntaxError, OptionRangeError
from unicache.repl.parser import Args
from unicache.repl.session import Transfer

COMPONENT_CHOICES = ("full", "swa", "mamba")


def add_cache_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cache")
    g.add_argument("--components", default="full", metavar="LIST",
                   help="comma list of full, swa, mamba (full is always on); default full")
    g.add_argument("--page-size", type=int, default=1, metavar="N", help="tokens per page (default 1)")
    g.add_argument("--device-tokens", type=int, default=None, metavar="N",
                   help="Full device capacity in tokens (default 64; a trace replay sizes it from the trace)")
    host = g.add_mutually_exclusive_group()
    host.add_argument("--host-tokens", type=int, default=None, metavar="N", help="Full host capacity in tokens")
    host.add_argument("--host-ratio", type=float, default=None, metavar="R",
                      help="host:device capacity ratio for every component (default 2)")
    g.add_argument("--swa-window", type=int, default=None, metavar="W",
                   help="SWA window in tokens (default 8 when swa is enabled)")
    g.add_argument("--swa-device-tokens", type=int, default=None, metavar="N")
    g.add_argument("--swa-host-tokens", type=int, default=None, metavar="N")
    g.add_argument("--mamba-slots", type=int, default=None, metavar="N", help="Mamba device slots (default 16)")
    g.add_argument("--mamba-host-slots", type=int, default=None, metavar="N")
    g.add_argument("--write-policy", choices=("write_back", "write_through"), default="write_back")
    g.add_argument("--write-through-threshold", type=int, default=1, metavar="N")
    g.add_argument("--load-back-threshold", type=int, default=0, metavar="N")
    g.add_argument("--no-sync-write-back", action="store_true",
                   help="write-back eviction only starts backups (acked later) instead of flushing them")
    g.add_argument("--kv-width", type=int, default=None, metavar="N", help="elements per token row (default 4)")
    g.add_argument("--mamba-width", type=int, default=None, metavar="N", help="elements per Mamba state (default 4)")
    g.add_argument("--dtype", default="float32")
    g.add_argument("--token-bytes", type=int, choices=(4, 8), default=4, metavar="4|8",
                   help="bytes a token id takes in the keys: 4 holds ids below 2**31 (default), 8 below 2**63")
    g.add_argument("--device", default="cpu", help="auto | cpu | cuda[:N] (default cpu)")
    g.add_argument("--transfer", choices=("immediate", "manual"), default="immediate",
                   help="immediate: copies ack on the next poll (after every command); "
                        "manual: jobs are held until 'ack' (or 'step')")
    g.add_argument("--history", type=int, default=4096, metavar="N", help="flight-recorder events kept")
    g.add_argument("--strict", action="store_true", help="ledger strict mode (leaks raise at check)")
    g.add_argument("--no-debug", action="store_true", help="do not record lease acquisition sites")
    g.add_argument("--name", default="repl", help="ledger / cache name")


# Integer cache options and the least value each accepts (an option left out takes its default;
# one given is used as given or refused, never replaced: `--device-tokens 0` is not the default).
_AT_LEAST: dict[str, int] = {
    "page_size": 1, "device_tokens": 1, "host_tokens": 1, "swa_window": 1, "swa_device_tokens": 1,
    "swa_host_tokens": 1, "mamba_slots": 1, "mamba_host_slots": 1, "write_through_threshold": 1,
    "load_back_threshold": 0, "kv_width": 1, "mamba_width": 1, "history": 0,
}
# Options that size one component: given without that component in --components, they are refused.
_NEEDS_COMPONENT = {"swa_window": "swa", "swa_device_tokens": "swa", "swa_host_tokens": "swa",
                    "mamba_slots": "mamba", "mamba_host_slots": "mamba"}


def _option(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def components_from(args: Args, command: str) -> list[str]:
    """The components named by --components (full is always on); refuses an empty or unknown one."""
    text = args.get_str("components")
    comps = [c.strip().lower() for c in text.split(",") if c.strip()]
    if not comps:
        raise OptionRangeError(command, "--components", text, "a comma list of full, swa, mamba")
    for c in comps:
        if c not in COMPONENT_CHOICES:
            raise CommandSyntaxError(command, f"--components: unknown component {c!r} (choose from full, swa, mamba)")
    return comps


def check_cache_options(args: Args, command: str) -> list[str]:
    """Refuse any cache option given out of its range, or for a component that is off; the components.

    `OptionRangeError` names the option and the range it accepts.
    """
    comps = components_from(args, command)
    for dest, least in _AT_LEAST.items():
        value = args.opt_int(dest)
        if value is not None and value < least:
            raise OptionRangeError(command, _option(dest), value, f"an integer >= {least}")
    ratio = args.opt_float("host_ratio")
    if ratio is not None and not (math.isfinite(ratio) and ratio > 0):
        raise OptionRangeError(command, "--host-ratio", ratio, "a finite number > 0")
    for dest, component in _NEEDS_COMPONENT.items():
        if args.opt_int(dest) is not None and component not in comps:
            raise CommandSyntaxError(command, f"{_option(dest)} given but {component} is not in --components")
    return comps


def config_from(args: Args, command: str = "new") -> tuple[CacheConfig, Transfer]:
    """(CacheConfig, transfer mode) from parsed cache options; `OptionRangeError` / `ConfigError` on nonsense."""
    comps = check_cache_options(args, command)
    swa = "swa" in comps
    window = args.opt_int("swa_window")
    if swa and window is None:
        window = 8
    mamba = "mamba" in comps
    key_width = args.get_int("token_bytes")
    if key_width not in (4, 8):
        raise OptionRangeError(command, "--token-bytes", key_width, "4 or 8")
    config = CacheConfig(
        device_tokens=_given_or(args, "device_tokens", 64),
        page_size=args.get_int("page_size"),
        host_tokens=args.opt_int("host_tokens"),
        host_ratio=args.opt_float("host_ratio"),
        swa_window=window,
        swa_device_tokens=args.opt_int("swa_device_tokens") if swa else None,
        swa_host_tokens=args.opt_int("swa_host_tokens") if swa else None,
        mamba=mamba,
        mamba_device_slots=_given_or(args, "mamba_slots", 16),
        mamba_host_slots=args.opt_int("mamba_host_slots") if mamba else None,
        write_policy="write_through" if args.get_str("write_policy") == "write_through" else "write_back",
        write_through_threshold=args.get_int("write_through_threshold"),
        load_back_threshold=args.get_int("load_back_threshold"),
        sync_write_back=not args.flag("no_sync_write_back"),
        kv_width=_given_or(args, "kv_width", 4),
        mamba_width=_given_or(args, "mamba_width", 4),
        dtype=args.get_str("dtype"),
        token_bytes=4 if key_width == 4 else 8,
        device=args.get_str("device"),
        ledger_name=args.get_str("name"),
        strict=args.flag("strict"),
        debug=not args.flag("no_debug"),
        history=args.get_int("history"),
    )
    return config, "manual" if args.get_str("transfer") == "manual" else "immediate"


def _given_or(args: Args, dest: str, default: int) -> int:
    """The option's value if it was given (already range-checked), else the REPL's default."""
    value = args.opt_int(dest)
    return default if value is None else value
