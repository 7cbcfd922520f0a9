"""The small GPT-2 that the checker and the experiments build: small enough
that eager MAX answers in a blink, large enough that a wrong transpose or a
missing scale cannot hide (sequence length, head width and head count differ).

Sizes only, as GPT2Config's keyword arguments: `common` sits below the
solutions, so the config class itself comes from solutions/solution_01.py.
"""

SMALL_GPT2 = {"vocab_size": 97, "n_positions": 16, "n_embd": 64, "n_layer": 2, "n_head": 4}
