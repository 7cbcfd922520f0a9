"""The maintainers' tools: what keeps the tutorial honest and measured.

- `bench`: our GPT-2 against transformers and llama.cpp, decode and prefill,
  with a memory-bandwidth ceiling (`pixi run bench`); its `chain`,
  `kernels_ab` and `standing` modules run beside it, and its `llama` and
  `mla` modules measure Parts II and III: step 23's compiled Llama-style model
  against transformers' LlamaForCausalLM on a SmolLM2-135M-shaped checkpoint,
  and one attention layer's decode after a long context (steps 24 and 25's
  latent attention against grouped-query and multi-head attention).
- `serve_bench`: `max serve` under load against the peers, one at a time.
- `llama_peer`: llama.cpp as a peer (GGUF conversion, greedy decoding).
- `random_llama_gguf`: a GGUF file of random weights at a larger Llama-family
  model's shapes (Qwen2.5-0.5B's, Llama-3.2-1B's), for the `llama` bench.
- `check_speed`: how long a learner waits for the checker, cold and warm.
- `mutate`: automatic mutation testing of the checkers.
- `book_outputs`: the checker's real output, written into the book.
- `figures`: the book's SVG figures, from the NumPy reference.
- `emulate_avx2`: the kernels' tests on an emulated CPU without AVX-512 (QEMU).

They may import every other room; nothing imports them but their tests.
CONTRIBUTING.md says when to run each.
"""
