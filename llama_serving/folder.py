"""The folder `max serve --model` reads for a GGUF file: a config.json that
names our architecture (and the model's sizes, which bound a request's
length), and the file's tokenizer as transformers' files, so that MAX's own
text tokenizer, chat template and end-of-text handling serve it as they
serve a Hugging Face checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

from common.gguf_tokenizer import build_tokenizer, optional_id

from .model import ARCHITECTURE


def write_model_folder(gguf_path: Path, folder: Path) -> None:
    """config.json, tokenizer.json and tokenizer_config.json for `gguf_path`
    in `folder`; a file the fast path cannot run is a GGUFError naming it."""
    from transformers import PreTrainedTokenizerFast

    from fast.llama_files import fast_config
    from solutions.solution_29 import read_gguf

    gguf = read_gguf(gguf_path)
    config = fast_config(gguf)
    metadata = gguf.metadata
    bos_id = optional_id(metadata, "tokenizer.ggml.bos_token_id")
    eos_id = optional_id(metadata, "tokenizer.ggml.eos_token_id")
    (folder / "config.json").write_text(
        json.dumps(
            {
                "architectures": [ARCHITECTURE],
                "model_type": "llama",
                "vocab_size": config.vocab_size,
                "hidden_size": config.hidden_size,
                "intermediate_size": config.intermediate_size,
                "num_hidden_layers": config.num_hidden_layers,
                "num_attention_heads": config.num_attention_heads,
                "num_key_value_heads": config.num_key_value_heads,
                "max_position_embeddings": config.max_position_embeddings,
                "rms_norm_eps": config.rms_norm_eps,
                "tie_word_embeddings": config.tie_word_embeddings,
                "bos_token_id": bos_id,
                "eos_token_id": eos_id,
            },
            indent=2,
        )
    )
    tokenizer = build_tokenizer(metadata, str(gguf_path))
    bos, eos = (None if i is None else tokenizer.id_to_token(i) for i in (bos_id, eos_id))
    if metadata.get("tokenizer.ggml.add_bos_token") and bos:  # llama.cpp puts BOS first
        from tokenizers.processors import TemplateProcessing

        tokenizer.post_processor = TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, bos_id)]
        )
    template = metadata.get("tokenizer.chat_template")
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=bos,
        eos_token=eos,
        chat_template=template if isinstance(template, str) else None,
        model_max_length=config.max_position_embeddings,
    ).save_pretrained(folder)
