# %% [markdown]
# # Step 15, try it: what is in a GPT-2 checkpoint, and what the loader does to it
#
# Writes a tiny checkpoint in the layout of the hub's gpt2 (no `transformer.`
# prefix, mask buffers, Conv1D weights [in, out], no lm_head.weight) into a
# temporary folder, with NumPy and safetensors only, reads it back, and lists
# every stored tensor next to what `to_max_layout` makes of it.

# %%
import tempfile
from pathlib import Path

import numpy as np

from common.random_checkpoint import (
    hugging_face_layout,
    random_gpt2_weights,
    write_safetensors_checkpoint,
)
from solutions.solution_01 import GPT2Config
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(15)  # yours once it passes its check, else the reference
read_tensors, to_max_layout = code.read_tensors, code.to_max_layout

CONFIG = GPT2Config(vocab_size=50, n_positions=8, n_embd=16, n_layer=1, n_head=2)


# %%
def what_happened(stored: np.ndarray, loaded: np.ndarray | None) -> str:
    if loaded is None:
        return "skipped (a buffer)"
    if stored.shape == loaded.shape and np.array_equal(stored, loaded):
        return ""
    if np.array_equal(stored.T, loaded):
        return "transposed"
    return "changed"


# %%
hub_style = hugging_face_layout(random_gpt2_weights(CONFIG), prefix=False, head=False, buffers=True)
with tempfile.TemporaryDirectory() as folder:
    directory = write_safetensors_checkpoint(Path(folder), CONFIG, hub_style)
    stored = read_tensors(directory)
state = to_max_layout(stored)

# %%
print(f"{'in the checkpoint':<24} {'shape':<14} {'in the model':<36} {'shape':<10} note")
for key, array in stored.items():
    model_name = next((n for n in state if n in (key, f"transformer.{key}")), None)
    loaded = None if model_name is None else state[model_name]
    shape = "" if loaded is None else str(list(loaded.shape))
    note = what_happened(array, loaded)
    line = f"{key:<24} {str(list(array.shape)):<14} {model_name or '-':<36} {shape:<10} {note}"
    print(line.rstrip())
tied = state["lm_head.weight"]
same = "the same array as" if tied is state["transformer.wte.weight"] else "a copy of"
print(f"{'(not stored)':<39} {'lm_head.weight':<36} {str(list(tied.shape)):<10} tied: {same} wte")
