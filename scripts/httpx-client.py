#!/usr/bin/env python3
"""A streaming chat client as small Python benchmark harnesses write one: asyncio, httpx, a new
httpx.AsyncClient (so a new connection) for every request, a semaphore for the concurrency;
TTFT from just before the request to the first chunk whose delta has non-empty content. Run
beside `servesim load` against the same server, it shows what such a client adds to the
first token (docs/published.md).

    httpx-client.py URL N CONCURRENCY OUTPUT_TOKENS     (URL ends in /v1; needs httpx)

N prompts of 35-55 random lowercase letters and spaces (seeded), max_tokens OUTPUT_TOKENS with
ignore_eos (vLLM's extension), model "tiny"; prints the mean and median TTFT.
"""
import asyncio
import json
import random
import statistics
import sys
import time

import httpx


async def one(url, prompt, out_tokens):
    body = {"model": "tiny", "messages": [{"role": "user", "content": prompt}], "max_tokens": out_tokens,
            "temperature": 0, "stream": True, "ignore_eos": True}
    async with httpx.AsyncClient() as client:
        start, first = time.perf_counter(), None
        async with client.stream("POST", url + "/chat/completions", json=body, timeout=600) as r:
            r.raise_for_status()
            async for line in r.aiter_lines():
                if not line.startswith("data: ") or line[6:].strip() == "[DONE]":
                    continue
                choices = json.loads(line[6:]).get("choices")
                if first is None and choices and choices[0].get("delta", {}).get("content"):
                    first = time.perf_counter()
        return first - start


async def run(url, prompts, concurrency, out_tokens):
    sem = asyncio.Semaphore(concurrency)

    async def limited(p):
        async with sem:
            return await one(url, p, out_tokens)
    return await asyncio.gather(*[limited(p) for p in prompts])


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[-4].strip(), file=sys.stderr)
        return 2
    url, n, concurrency, out_tokens = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    rng = random.Random(7)
    prompts = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(rng.randint(35, 55)))
               for _ in range(n)]
    ttft = asyncio.run(run(url, prompts, concurrency, out_tokens))
    print(f"httpx client: mean TTFT {1e3 * statistics.mean(ttft):.2f} ms, median {1e3 * statistics.median(ttft):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
