# %% [markdown]
# # Step 06, try it: position embeddings tell "the cat" at position 0 from "the cat" at 5
#
# Builds `GPT2TokenEmbedding` (step 05) and `GPT2Embeddings` (step 06) over a toy
# vocabulary with the same random tables (GPT-2-like, std 0.02), embeds a
# sentence in which "the cat" appears twice, and measures how far apart the two
# copies of each word end up, with and without the position embeddings.

# %%
import numpy as np
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config
from solutions.solution_05 import GPT2TokenEmbedding
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(6)  # yours once it passes its check, else the reference
GPT2Embeddings = code.GPT2Embeddings

WORDS = ["the", "cat", "sat", "and", "then", "ran"]

# %%
config = GPT2Config(vocab_size=len(WORDS), n_positions=16, n_embd=32, n_layer=1, n_head=1)
rng = np.random.default_rng(0)
wte = rng.normal(0, 0.02, (config.vocab_size, config.n_embd)).astype(np.float32)
wpe = rng.normal(0, 0.02, (config.n_positions, config.n_embd)).astype(np.float32)
tokens_only = GPT2TokenEmbedding(config)
tokens_only.load_state_dict({"wte.weight": wte})
with_positions = GPT2Embeddings(config)
with_positions.load_state_dict({"wte.weight": wte, "wpe.weight": wpe})

sentence = "the cat sat and then the cat ran".split()
ids = np.array([[WORDS.index(word) for word in sentence]], dtype=np.int64)
before = np.asarray(tokens_only(Tensor(ids)).to_numpy())[0]
after = np.asarray(with_positions(Tensor(ids)).to_numpy())[0]

print("position  word   first 3 numbers, token only     first 3 numbers, token + position")
for p, word in enumerate(sentence):
    a = " ".join(f"{x:+.3f}" for x in before[p, :3])
    b = " ".join(f"{x:+.3f}" for x in after[p, :3])
    print(f"{p:>8}  {word:<5}  {a:<30}  {b}")

# %%
print("\ndistance between the two copies of a word (Euclidean):")
for word, (p, q) in {"the": (0, 5), "cat": (1, 6)}.items():
    token_gap = np.linalg.norm(before[p] - before[q])
    position_gap = np.linalg.norm(after[p] - after[q])
    print(
        f"  {word!r} at {p} and {q}: token only {token_gap:.3f}, with positions {position_gap:.3f}"
    )
print(
    f"  for scale, 'the' and 'cat' at 0 and 1, token only: {np.linalg.norm(before[0] - before[1]):.3f}"
)
same = np.allclose(after[5] - after[0], wpe[5] - wpe[0], atol=1e-6)
print(f"  'the' at 5 minus 'the' at 0 equals wpe row 5 minus wpe row 0: {same}")
