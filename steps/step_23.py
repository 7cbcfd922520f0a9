"""Step 23: a Llama-style model that loads a real checkpoint.

Goal: stack steps 19-22's pieces into the decoder of Llama and SmolLM2, with
transformers' names, so that a Hugging Face checkpoint loads into it by name
and its logits equal transformers' LlamaForCausalLM. Then compile it with its
KV cache (as in step 17) and let it write.

Run: pixi run s23    (or: python -m tests.check 23)
Stuck? Read docs/src/step_23.md (pixi run book).
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import numpy as np
from max.experimental import functional as F
from max.experimental.nn import Embedding, Linear, Module, ModuleList
from max.experimental.tensor import Tensor

from common import checkpoint
from solutions.solution_15 import CheckpointError, check_against, parameter_shapes
from solutions.solution_17 import compile_cached, generate_cached
from solutions.solution_17 import empty_cache as empty_step_17_cache
from solutions.solution_20 import RMSNorm, SwiGLUMLP
from solutions.solution_21 import GroupedQueryAttention, LlamaConfig


class LlamaDecoderLayer(Module[..., tuple[Tensor, Tensor, Tensor]]):
    """RMSNorm -> attention -> add, RMSNorm -> SwiGLU -> add."""

    def __init__(self, config: LlamaConfig) -> None:
        # TODO: the layer's four parts, named as in a Llama checkpoint: an
        #   RMSNorm before the attention, step 21's attention, an RMSNorm before
        #   the MLP, step 20's MLP; sizes and eps come from the config (the
        #   page's "One layer").
        self.input_layernorm = None
        self.self_attn = None
        self.post_attention_layernorm = None
        self.mlp = None
        # END TODO

    def forward(
        self, hidden_states: Tensor, past_key: Tensor, past_value: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        # TODO: pre-norm residuals, as in GPT-2's block: the attention reads the
        #   normalized stream (and the cache) and its output is added to the
        #   stream; then the MLP reads the stream normalized by its own norm and
        #   is added too. [batch, seq, hidden] throughout (the page's "One layer").
        attn_output, key, value = None
        hidden_states = None
        hidden_states = None
        # END TODO
        return hidden_states, key, value


class LlamaModel(Module[..., tuple[Tensor, Tensor, Tensor]]):
    """The decoder's body: embeddings, the layers and the final norm."""

    def __init__(self, config: LlamaConfig) -> None:
        self.embed_tokens = Embedding(config.vocab_size, dim=config.hidden_size)
        self.layers = ModuleList(
            [LlamaDecoderLayer(config) for _ in range(config.num_hidden_layers)]
        )
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(
        self, input_ids: Tensor, past_keys: Tensor, past_values: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """input_ids [batch, seq]; the caches [layers, batch, kv_heads, past, head_dim].
        Returns the normalized hidden states and the grown caches."""
        hidden_states = self.embed_tokens(input_ids)
        keys, values = [], []
        for index, layer in enumerate(self.layers):
            # TODO: the layer on the stream and on its own layer of each cache
            #   (the page's "The stack and its cache").
            hidden_states, key, value = None
            # END TODO
            keys.append(key)
            values.append(value)
        return self.norm(hidden_states), F.stack(keys, axis=0), F.stack(values, axis=0)


class LlamaForCausalLM(Module[..., tuple[Tensor, Tensor, Tensor]]):
    """Token ids and the cache -> next-token logits [batch, seq, vocab] and the grown cache."""

    def __init__(self, config: LlamaConfig) -> None:
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = Linear(config.hidden_size, config.vocab_size, bias=False)
        # A tied head scores a token by how far the hidden state points along
        # that token's embedding: one table, stored once in the checkpoint.
        # TODO: when the config ties them, the head's weight is the embedding
        #   table itself, one tensor for both (the page's "Tied or not").
        if None:
            self.lm_head.weight = None
        # END TODO

    def forward(
        self, input_ids: Tensor, past_keys: Tensor, past_values: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        hidden_states, keys, values = self.model(input_ids, past_keys, past_values)
        return self.lm_head(hidden_states), keys, values


# -- running it: the cache, the two compiled graphs, greedy or sampled tokens --


def llama_kv_shape(config: LlamaConfig, batch: int | str, past: int | str) -> list:
    """Step 17's cache with key/value heads: [layers, batch, kv_heads, past, head_dim]."""
    return [config.num_hidden_layers, batch, config.num_key_value_heads, past, config.head_dim]


def empty_cache(config: LlamaConfig, batch: int = 1) -> tuple[Tensor, Tensor]:
    return empty_step_17_cache(config, batch, llama_kv_shape)


def compile_llama(model: LlamaForCausalLM):
    """Step 17's two graphs, prefill and decode, for this model's cache."""
    return compile_cached(model, llama_kv_shape)


def generate_llama(
    forward, config: LlamaConfig, prompt_ids: list[int], max_new_tokens: int, **sampling
):
    """Step 17's decoding loop with this model's cache; yields token ids.
    `sampling`: generate_cached's do_sample, temperature, top_k and seed."""
    return generate_cached(
        forward, config, prompt_ids, max_new_tokens, kv_shape=llama_kv_shape, **sampling
    )


# -- loading a checkpoint -------------------------------------------------------

# Tensors some checkpoints carry that the model computes instead (step 19's tables).
NOT_PARAMETERS = (".rotary_emb.inv_freq",)


def to_llama_state(tensors: dict[str, np.ndarray], config: LlamaConfig) -> dict[str, np.ndarray]:
    """A checkpoint's tensors as the model's state: float32, computed buffers
    dropped, and the head filled from the embeddings when the config ties them."""
    state = {
        name: np.asarray(array, dtype=np.float32)
        for name, array in tensors.items()
        if not name.endswith(NOT_PARAMETERS)
    }
    # TODO: a tied checkpoint stores the head once, as the embeddings: give the
    #   state an lm_head.weight from them when it has none. An untied one
    #   without lm_head.weight cannot be used: say so, naming the tensor and the
    #   config's setting (the page's "Tied or not" and "Loading a checkpoint").
    if None:
        state["lm_head.weight"] = None
    elif None:
        raise CheckpointError(None)
    # END TODO
    return state


def load_llama_config(directory: Path) -> LlamaConfig:
    """config.json as a LlamaConfig; a model this step cannot run is a CheckpointError."""
    path = Path(directory) / checkpoint.CONFIG
    raw = checkpoint.read_config(Path(directory))
    rope = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind != "default":
        raise CheckpointError(
            f"{path} asks for {kind!r} rotary scaling; this model computes step 19's plain "
            "rotary tables only."
        )
    if raw.get("rope_interleaved"):
        raise CheckpointError(
            f"{path}: its rotary pairs are interleaved; step 19's are half-split."
        )
    if raw.get("attention_bias") or raw.get("mlp_bias"):
        raise CheckpointError(f"{path}: this model's projections have biases; Llama's have none.")
    if raw.get("hidden_act", "silu") != "silu":
        raise CheckpointError(f"{path}: the MLP uses {raw['hidden_act']!r}; Llama's uses SiLU.")
    known = {field.name for field in fields(LlamaConfig)}
    values = {key: value for key, value in raw.items() if key in known}
    values["rope_theta"] = rope.get("rope_theta", raw.get("rope_theta", 10000.0))
    if raw.get("use_sliding_window") is False:
        values["sliding_window"] = None
    if values.get("sliding_window"):
        raise CheckpointError(
            f"{path} sets a sliding window of {values['sliding_window']}; this model attends "
            "to the whole context (step 22 shows the window on its own)."
        )
    values.setdefault("num_key_value_heads", raw.get("num_attention_heads"))
    return LlamaConfig(**values)


def load_llama(directory: Path) -> LlamaForCausalLM:
    """Build the model from a checkpoint directory's config.json and load
    model.safetensors into it; any mismatch is a CheckpointError naming the tensor
    (a file that cannot be read, common.checkpoint's Failure naming the file)."""
    config = load_llama_config(directory)
    path = Path(directory) / checkpoint.WEIGHTS
    if not path.is_file():
        raise CheckpointError(
            f"{path} does not exist: the weights must be in one safetensors file."
        )
    state = to_llama_state(checkpoint.read_safetensors(path), config)
    with F.lazy():  # the random initial weights are replaced at once
        model = LlamaForCausalLM(config)
    check_against(state, parameter_shapes(model))
    model.load_state_dict(state)
    return model
