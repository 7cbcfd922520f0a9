# %% [markdown]
# # Step 05, try it: an embedding lookup returns rows of the table
#
# Fills a small token table with numbers you can read (row t starts with t),
# looks a few ids up with `GPT2TokenEmbedding`, and shows that the lookup is
# the same as multiplying one-hot vectors by the table, only far cheaper.

# %%
import numpy as np
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(5)  # yours once it passes its check, else the reference
GPT2TokenEmbedding = code.GPT2TokenEmbedding

# %%
config = GPT2Config(vocab_size=10, n_embd=3, n_layer=1, n_head=1)
# Row t is [t, t + 0.1, t + 0.2]: you can read the id back from its row.
table = np.arange(10, dtype=np.float32)[:, None] + np.float32(0.1) * np.arange(3)
embedding = GPT2TokenEmbedding(config)
embedding.load_state_dict({"wte.weight": table.astype(np.float32)})

ids = np.array([[3, 1, 3, 9, 0]], dtype=np.int64)
vectors = np.asarray(embedding(Tensor(ids)).to_numpy())
print(f"ids {ids.tolist()} of shape {list(ids.shape)} -> vectors of shape {list(vectors.shape)}")
for position, (token, row) in enumerate(zip(ids[0], vectors[0], strict=True)):
    print(f"  position {position}, id {token}: [{', '.join(f'{x:.1f}' for x in row)}]")

# %%
one_hot = np.eye(config.vocab_size, dtype=np.float32)[ids]  # [1, 5, vocab_size]
same = np.allclose(one_hot @ table, vectors)
print(
    f"\none-hot [1, 5, {config.vocab_size}] @ table [{config.vocab_size}, 3] gives the same: {same}"
)

# %%
gpt2 = GPT2Config()
print(
    f"GPT-2 124M, one token: the one-hot product costs {gpt2.vocab_size * gpt2.n_embd:,} "
    f"multiply-adds, the lookup reads {gpt2.n_embd} numbers"
)
size = gpt2.vocab_size * gpt2.n_embd
print(
    f"wte.weight is [{gpt2.vocab_size}, {gpt2.n_embd}]: {size:,} parameters, {size * 4 / 2**20:.0f} MiB in float32"
)
