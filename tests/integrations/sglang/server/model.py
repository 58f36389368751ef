"""Tiny random-weight models for SGLang's real server, written to a directory (nothing downloaded).

Every model shares one byte-level tokenizer: a `tokenizers` BPE over the 256
byte symbols with no merges, plus ``<s>``, ``</s>`` and ``<pad>``, saved
through `PreTrainedTokenizerFast`. Weights come from
`AutoModelForCausalLM.from_config` under a fixed seed, so a model is the same
on every run. The tests send token ids (``input_ids``), which the byte
tokenizer covers: ids 0..255.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    Gemma4TextConfig,
    LlamaConfig,
    PretrainedConfig,
    PreTrainedTokenizerFast,
    Qwen3NextConfig,
)

BYTE_TOKENS: Final = 256
BOS, EOS, PAD = 256, 257, 258
VOCAB: Final = 512
CONTEXT: Final = 8192
SEED: Final = 0


def byte_symbols() -> dict[int, str]:
    """Byte -> the printable symbol byte-level BPE writes it as (GPT-2's table)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
                 *range(ord("\u00ae"), ord("\u00ff") + 1)]
    symbols = {b: chr(b) for b in printable}
    extra = (b for b in range(BYTE_TOKENS) if b not in symbols)
    symbols.update({b: chr(BYTE_TOKENS + i) for i, b in enumerate(extra)})
    return symbols


def save_byte_tokenizer(path: Path) -> None:
    """The byte-level tokenizer (id b is byte b for 0..255; 256..258 the special tokens) into `path`."""
    vocab = {symbol: b for b, symbol in byte_symbols().items()}
    assert set(vocab) == set(pre_tokenizers.ByteLevel.alphabet())
    vocab.update({"<s>": BOS, "</s>": EOS, "<pad>": PAD})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.save_pretrained(path)


def llama_config() -> LlamaConfig:
    """A 2-layer Llama: hidden 64, 4 heads of 16 (2 KV heads), full attention only."""
    return LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=CONTEXT,
        bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD, tie_word_embeddings=False,
    )


def gemma4_swa_config() -> Gemma4TextConfig:
    """A 2-layer Gemma 4 text model: one sliding-window layer (window 64), one global (SWA + Full).

    SGLang treats ``Gemma4ForCausalLM`` as hybrid SWA (`is_hybrid_swa_model`);
    no per-layer input embeddings (``hidden_size_per_layer_input=0``), one
    head size for both layer kinds.
    """
    return Gemma4TextConfig(
        vocab_size=VOCAB, vocab_size_per_layer_input=VOCAB, hidden_size_per_layer_input=0,
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=CONTEXT, sliding_window=64,
        layer_types=["sliding_attention", "full_attention"], architectures=["Gemma4ForCausalLM"],
        bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD,
    )


def qwen3_next_config() -> Qwen3NextConfig:
    """A 2-layer Qwen3-Next: one gated-DeltaNet (linear attention, Mamba-style state) layer, one full.

    ``full_attention_interval`` is set as an extra attribute: SGLang's own
    `Qwen3NextConfig` (which it loads the saved config into) derives its
    layer kinds from it; transformers' class does not declare it.
    """
    config = Qwen3NextConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=CONTEXT,
        layer_types=["linear_attention", "full_attention"],
        linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
        shared_expert_intermediate_size=32, decoder_sparse_step=1,
        bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD,
    )
    setattr(config, "full_attention_interval", 2)
    return config


MODELS: Final[dict[str, Callable[[], PretrainedConfig]]] = {
    "llama": llama_config,
    "gemma4-swa": gemma4_swa_config,
    "qwen3-next-gdn": qwen3_next_config,
}


def make_model(kind: str, path: Path) -> Path:
    """Write tokenizer, config and seeded random weights of model `kind` (a key of `MODELS`) to `path`."""
    if kind not in MODELS:
        raise KeyError(f"unknown tiny model {kind!r}; known: {sorted(MODELS)}")
    path.mkdir(parents=True, exist_ok=True)
    save_byte_tokenizer(path)
    torch.manual_seed(SEED)
    model = AutoModelForCausalLM.from_config(MODELS[kind](), dtype=torch.float32)
    model.save_pretrained(path)
    return path
