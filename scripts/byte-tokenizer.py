#!/usr/bin/env python3
"""Writes a Hugging Face tokenizer for servesim serve's byte-level text: 256 tokens, token i
the byte i, no merges. `vllm bench serve --tokenizer DIR` needs one to make its random
prompts; with this one its text is the bytes our server tokenizes.

    python3 scripts/byte-tokenizer.py DIR      (needs the `tokenizers` package)
"""
import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers


def byte_characters():
    """GPT-2's printable stand-in for each byte, as byte-level BPE tokenizers spell bytes."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def main(argv):
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    out = argv[0]
    os.makedirs(out, exist_ok=True)
    vocab = {c: b for b, c in byte_characters().items()}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 4096}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
