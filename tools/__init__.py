"""The learner's commands, run while working through the tutorial.

- `learn` (a package, one module per command): progress, the next step,
  hints, a watcher, reset, doctor, warm. `python -m tools.learn status`.
- `generate`: text from GPT-2 or a Llama-family checkpoint or GGUF file,
  with the tutorial's model or the fast one; `generate_files` holds its
  choice of file (SmolLM2's GGUF in its variants) and its printing.
- `serve`: GPT-2 behind `max serve`'s OpenAI-compatible API (step 18).
- `attention_map`: one layer's attention weights on real text, as a picture.

They reach the checker through its interface (`tests.checker`), and import
the fast model (`fast`) and `common`;
nothing outside `devtools` imports them.
"""
