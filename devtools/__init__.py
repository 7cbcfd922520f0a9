"""The maintainers' tools: what keeps the tutorial honest and measured.

- `bench`: our GPT-2 against transformers and llama.cpp, decode and prefill,
  with a memory-bandwidth ceiling (`pixi run bench`).
- `serve_bench`: `max serve` under load against the peers, one at a time.
- `llama_peer`: llama.cpp as a peer (GGUF conversion, greedy decoding).
- `mutate`: automatic mutation testing of the checkers.
- `book_outputs`: the checker's real output, written into the book.
- `figures`: the book's SVG figures, from the NumPy reference.
- `emulate_avx2`: the kernels' tests on an emulated CPU without AVX-512 (QEMU).

They may import every other room; nothing imports them but their tests.
"""
