# %% [markdown]
# # Step 23, try it: a small Llama checkpoint, from its bytes to its tokens
#
# Writes a Llama-style checkpoint of random weights into a temporary folder,
# as the benchmark (`python -m devtools.bench.llama`) writes its SmolLM2-135M-shaped one, but
# small: 2 layers, hidden 32, 4 query heads sharing 2 key/value heads, a
# vocabulary of 64, the head tied. Then: the safetensors file's first bytes
# and header; what the loader refuses; the model loaded with `load_llama` and
# run eagerly (`compile_llama` gives the same numbers once compiled, which
# takes minutes the first time a machine sees a model); a few greedy tokens;
# and the logits of the
# prompt and each new token, fed one at a time with the cache, against one
# pass over the whole text.

# %%
import json
import struct
import tempfile
from pathlib import Path

import numpy as np
from max.experimental.tensor import Tensor

from common.random_checkpoint import SMOLLM2_135M, write_random_llama
from solutions.solution_15 import CheckpointError
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(23)  # yours once it passes its check, else the reference
empty_cache, generate_llama, load_llama = code.empty_cache, code.generate_llama, code.load_llama

TINY = dict(
    SMOLLM2_135M,
    vocab_size=64,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)
# What a config.json may ask for that this model cannot compute.
CANNOT_RUN = {
    "Llama 3.2's rotary scaling": {"rope_scaling": {"rope_type": "llama3", "factor": 32.0}},
    "interleaved rotary pairs": {"rope_interleaved": True},
    "biases in the attention": {"attention_bias": True},
    "a GELU MLP": {"hidden_act": "gelu"},
    "a sliding window": {"sliding_window": 4},
    "4 key/value heads, 2 in the file": {"num_key_value_heads": 4},
    "an untied head, none in the file": {"tie_word_embeddings": False},
}


# %%
def refusal(directory: Path, changes: dict) -> str:
    """What load_llama says about the checkpoint with its config.json changed."""
    path = directory / "config.json"
    original = path.read_text()
    path.write_text(json.dumps({**json.loads(original), **changes}))
    try:
        load_llama(directory)
        return "loaded"
    except CheckpointError as error:
        return str(error).replace(str(directory), "DIR")
    finally:
        path.write_text(original)


with tempfile.TemporaryDirectory() as folder:
    directory = write_random_llama(Path(folder) / "tiny-llama", TINY)
    data = (directory / "model.safetensors").read_bytes()
    refusals = {what: refusal(directory, changes) for what, changes in CANNOT_RUN.items()}
    model = load_llama(directory)

# %% [markdown]
# The file: 8 bytes that give the header's length, the header (JSON), then
# every tensor's bytes one after the other, each where its `data_offsets`
# say, counted from the end of the header.

# %%
(header_size,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8 : 8 + header_size])
print(f"model.safetensors: {len(data):,} bytes")
print(f"bytes 0-7: {data[:8].hex(' ')}, little-endian: a header of {header_size:,} bytes")
print(f"then the numbers: {len(data) - 8 - header_size:,} bytes")
print(f"the header names {len(header) - 1} tensors, and __metadata__ {header['__metadata__']}")
for name in sorted(header, key=lambda n: header[n].get("data_offsets", [-1])[0])[:6]:
    if name != "__metadata__":
        entry = header[name]
        print(f"  {name:<40} {entry['dtype']} {str(entry['shape']):<9} {entry['data_offsets']}")
print("  ...")

# %% [markdown]
# What the loader says, in one line each, when config.json asks for
# something this model cannot compute (DIR is the checkpoint's folder).

# %%
for what, said in refusals.items():
    print(f"{what}:\n  {said}")

# %% [markdown]
# The model as loaded: the cache it starts from, and the tied head, which
# holds the embedding table's numbers.

# %%
config = model.config
past_keys, past_values = empty_cache(config)
print(f"head_dim {config.head_dim}; an empty cache: {[int(d) for d in past_keys.shape]}")
head = np.asarray(model.lm_head.weight.to_numpy())
table = np.asarray(model.model.embed_tokens.weight.to_numpy())
print(
    f"lm_head.weight {list(head.shape)}, the embedding table's numbers: {np.array_equal(head, table)}"
)

# The model itself takes what compile_llama's graphs take: token ids and the
# cache in, logits and the grown cache out.
forward = model

# %% [markdown]
# Eight greedy tokens after a six-token prompt, with the cache.

# %%
prompt = [5, 17, 42, 7, 33, 3]
tokens = list(generate_llama(forward, config, prompt, 8))
print(f"prompt {prompt}")
print(f"greedy {tokens}")

# %% [markdown]
# The same text fed again by hand: the prompt first, then one token per call,
# the cache growing by one token each time. Then the whole text at once, with
# an empty cache. Position by position, the logits must agree.

# %%
text = prompt + tokens
logits, past_keys, past_values = forward(Tensor(np.asarray([prompt])), past_keys, past_values)
stepped = [np.asarray(logits.to_numpy())[0, -1]]
print(f"prompt of {len(prompt)}: logits {[int(d) for d in logits.shape]}, ", end="")
print(f"cache {[int(d) for d in past_keys.shape]}")
for token in tokens[:-1]:
    logits, past_keys, past_values = forward(Tensor(np.asarray([[token]])), past_keys, past_values)
    stepped.append(np.asarray(logits.to_numpy())[0, -1])
print(f"after {len(tokens) - 1} tokens one at a time: cache {[int(d) for d in past_keys.shape]}")

whole, _, _ = forward(Tensor(np.asarray([text[:-1]])), *empty_cache(config))
whole = np.asarray(whole.to_numpy())[0, len(prompt) - 1 :]
difference = np.abs(np.stack(stepped) - whole).max()
print(f"one pass over {len(text) - 1} tokens: logits {list(whole.shape)} for the same positions")
print(f"largest difference, cache against one pass: {difference:.1e}")
print(f"greedy tokens of the one pass: {whole.argmax(axis=-1).tolist()}")
