#!/usr/bin/env python3
"""Writes the tiny model that scripts/vllm-frontend.sh and scripts/vllm-step-host.py serve
with vLLM's CPU build: a Qwen2-shaped config small enough that the CPU keeps up (2 layers,
hidden 256; vLLM's --load-format dummy gives it random weights), the byte-level tokenizer of
scripts/byte-tokenizer.py, and a ChatML template with a system prompt by default, as
Qwen2.5's has.

    python3 scripts/vllm-tiny-model.py DIR      (needs the `tokenizers` package)
"""
import json
import os
import subprocess
import sys


def main(argv):
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    d = argv[0]
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, os.path.join(here, "byte-tokenizer.py"), d], check=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 512,
                   "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 4096,
                   "rope_theta": 1e6, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
                   "torch_dtype": "bfloat16", "hidden_act": "silu", "bos_token_id": 0, "eos_token_id": 0},
                  f, indent=1)
    p = os.path.join(d, "tokenizer_config.json")
    with open(p) as f:
        tc = json.load(f)
    tc["chat_template"] = (
        "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant."
        "<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
        "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    with open(p, "w") as f:
        json.dump(tc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
