"""HTTP calls to a running SGLang server: ``/generate`` by token ids, ``/flush_cache``; hits per tier.

Each ``/generate`` answer's ``meta_info.cached_tokens_details`` says how many
prompt tokens came from the device tier and how many were loaded back from
the host tier (HiCache); `Hits` keeps the two. SGLang leaves the details out
(None) when nothing was cached.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final

import requests

REQUEST_TIMEOUT_S: Final = 300.0
FLUSH_WAIT_S: Final = 120


@dataclass(frozen=True, slots=True)
class Hits:
    """Prompt tokens served from the cache, by tier."""

    device: int
    host: int

    @property
    def total(self) -> int:
        return self.device + self.host

    def __add__(self, other: Hits) -> Hits:
        return Hits(self.device + other.device, self.host + other.host)


NO_HITS: Final = Hits(0, 0)


class GenerateError(RuntimeError):
    """``/generate`` did not answer 200 with a ``meta_info``; names the request and the answer."""


def _int_field(meta: dict[str, object], name: str) -> int:
    value = meta.get(name)
    if not isinstance(value, int):
        raise GenerateError(f"meta_info[{name!r}] is {value!r}, not an int")
    return value


def generate(url: str, input_ids: Sequence[int], *, max_new_tokens: int, rid: str) -> Hits:
    """Greedy generation of `max_new_tokens` for `input_ids`; the prompt's cache hits by tier."""
    body = {
        "rid": rid,
        "input_ids": list(input_ids),
        "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0.0, "ignore_eos": True},
    }
    resp = requests.post(f"{url}/generate", data=json.dumps(body), headers={"Content-Type": "application/json"},
                         timeout=REQUEST_TIMEOUT_S)
    if resp.status_code != 200:
        raise GenerateError(f"request {rid}: HTTP {resp.status_code}: {resp.text[:500]}")
    answer = resp.json()
    meta = answer.get("meta_info") if isinstance(answer, dict) else None
    if not isinstance(meta, dict):
        raise GenerateError(f"request {rid}: no meta_info in {str(answer)[:500]}")
    details = meta.get("cached_tokens_details")
    if details is None and _int_field(meta, "cached_tokens") == 0:
        details = {"device": 0, "host": 0}
    if not isinstance(details, dict):
        raise GenerateError(f"request {rid}: cached_tokens_details is {details!r} (HiCache off?)")
    hits = Hits(_int_field(details, "device"), _int_field(details, "host"))
    if hits.total != _int_field(meta, "cached_tokens"):
        raise GenerateError(f"request {rid}: tiers {hits} do not add up to cached_tokens {meta['cached_tokens']}")
    if _int_field(meta, "prompt_tokens") != len(input_ids):
        raise GenerateError(f"request {rid}: prompt_tokens {meta['prompt_tokens']} for {len(input_ids)} ids")
    return hits


def generate_concurrently(url: str, prompts: Sequence[Sequence[int]], *, in_flight: int,
                          max_new_tokens: int, prefix: str) -> list[Hits]:
    """Send `prompts` in order with up to `in_flight` requests outstanding; hits in prompt order.

    The first error of any request is raised (after the others finish).
    """
    with ThreadPoolExecutor(max_workers=in_flight) as pool:
        futures = [pool.submit(generate, url, p, max_new_tokens=max_new_tokens, rid=f"{prefix}-{i}")
                   for i, p in enumerate(prompts)]
        return [f.result() for f in futures]


def flush_cache(url: str) -> None:
    """``POST /flush_cache``, waiting for the scheduler to be idle; raises unless the cache was flushed."""
    resp = requests.post(f"{url}/flush_cache", params={"timeout": FLUSH_WAIT_S}, timeout=FLUSH_WAIT_S + 60)
    if resp.status_code != 200:
        raise GenerateError(f"/flush_cache: HTTP {resp.status_code}: {resp.text[:500]}")
