#!/usr/bin/env python3
"""The official `openai` Python client (PyPI) against `servesim serve`: completions and chat,
whole and streamed, the usage it reports, and the error it raises for a bad request.

usage: scripts/openai-client-check.py URL      (e.g. http://127.0.0.1:8000/v1)
needs: pip install openai     (a venv: python3 -m venv v && v/bin/pip install openai)"""
import sys

import openai

client = openai.OpenAI(base_url=sys.argv[1], api_key="unused")
model = client.models.list().data[0].id
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


c = client.completions.create(model=model, prompt=[1, 2, 3, 4], max_tokens=7)
check(c.usage.completion_tokens == 7 and len(c.choices[0].text) == 7, f"completion: {c.choices[0].text!r}, usage {c.usage}")
check(c.choices[0].finish_reason == "length", "finish_reason length")
chunks = list(client.completions.create(model=model, prompt="hello", max_tokens=9, stream=True,
                                        stream_options={"include_usage": True}))
text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
check(len(text) == 9, f"streamed completion: {len(chunks)} chunks, text {text!r}")
check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 9, f"usage chunk: {chunks[-1].usage}")
r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=5)
check(r.usage.completion_tokens == 5 and r.choices[0].message.role == "assistant", f"chat: {r.choices[0].message}")
s = list(client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=4, stream=True))
content = "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices)
check(len(content) == 4, f"streamed chat: {len(s)} chunks, content {content!r}")
try:
    client.completions.create(model=model, prompt=[1], max_tokens=10 ** 7)
    check(False, "an oversized request raised nothing")
except openai.BadRequestError as e:
    check(e.status_code == 400 and "maximum context length" in str(e), f"BadRequestError: {e}")
try:
    client.completions.create(model="no-such-model", prompt=[1], max_tokens=1)
    check(False, "an unknown model raised nothing")
except openai.NotFoundError as e:
    check(e.status_code == 404, f"NotFoundError: {e}")
print(f"openai {openai.__version__}: " + ("ok" if not failures else f"{len(failures)} failure(s)"))
sys.exit(1 if failures else 0)
