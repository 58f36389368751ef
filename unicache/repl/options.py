"""Cache options shared by `new` and the `unicache repl` command line, and the config they build."""

from __future__ import annotations

import argparse

from unicache.config import CacheConfig
from unicache.repl.errors import CommandSyntaxError
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


def config_from(args: Args) -> tuple[CacheConfig, Transfer]:
    """(CacheConfig, transfer mode) from parsed cache options; `ConfigError` on nonsense."""
    comps = [c.strip().lower() for c in args.get_str("components").split(",") if c.strip()]
    for c in comps:
        if c not in COMPONENT_CHOICES:
            raise CommandSyntaxError("new", f"--components: unknown component {c!r} (choose from full, swa, mamba)")
    swa = "swa" in comps
    window = args.opt_int("swa_window")
    if swa and window is None:
        window = 8
    if not swa and window is not None:
        raise CommandSyntaxError("new", "--swa-window given but swa is not in --components")
    mamba = "mamba" in comps
    key_width = args.get_int("token_bytes")
    if key_width not in (4, 8):
        raise CommandSyntaxError("new", f"--token-bytes must be 4 or 8, got {key_width}")
    config = CacheConfig(
        device_tokens=args.opt_int("device_tokens") or 64,
        page_size=args.get_int("page_size"),
        host_tokens=args.opt_int("host_tokens"),
        host_ratio=args.opt_float("host_ratio"),
        swa_window=window,
        swa_device_tokens=args.opt_int("swa_device_tokens") if swa else None,
        swa_host_tokens=args.opt_int("swa_host_tokens") if swa else None,
        mamba=mamba,
        mamba_device_slots=args.opt_int("mamba_slots") or 16,
        mamba_host_slots=args.opt_int("mamba_host_slots") if mamba else None,
        write_policy="write_through" if args.get_str("write_policy") == "write_through" else "write_back",
        write_through_threshold=args.get_int("write_through_threshold"),
        load_back_threshold=args.get_int("load_back_threshold"),
        sync_write_back=not args.flag("no_sync_write_back"),
        kv_width=args.opt_int("kv_width") or 4,
        mamba_width=args.opt_int("mamba_width") or 4,
        dtype=args.get_str("dtype"),
        token_bytes=4 if key_width == 4 else 8,
        device=args.get_str("device"),
        ledger_name=args.get_str("name"),
        strict=args.flag("strict"),
        debug=not args.flag("no_debug"),
        history=args.get_int("history"),
    )
    return config, "manual" if args.get_str("transfer") == "manual" else "immediate"
