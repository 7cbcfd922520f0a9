"""CPU kernels for fast/gpt2.py and fast/llama.py: a decoded token's blocks,
a prompt's projections.

Decoding one token is memory-bound: each weight is read once and used for one
multiply-add, so the time is the weights' bytes over the memory bandwidth.
These kernels read every weight row exactly once and spread the rows over
the cores; for one token each core reads eight parts of its rows side by
side, eight streams from memory instead of one. bfloat16 weights cost half
the bytes: on a CPU with AVX512_BF16 they are multiplied as they are, by its
bfloat16 dot products, which also run a prompt's many rows in register
tiles; elsewhere they are widened to float32 in registers.

The modules, each importing only those above it:

- cpu: what the CPU has (vector width, AVX512_BF16, AMX), asked at build
  and at run time;
- claims: how the cores share a step (claims and counters);
- dots: a weight row times x, and a decoded token's rows in streams;
- amx_tiles: AMX's tile registers as inline assembly;
- bf16_tiles: bfloat16 weights times many rows in vdpbf16ps tiles;
- linear_rows_amx: a prompt's rows through AMX's tiles;
- linear_rows: the projection ops MAX calls (gpt2_linear_rows, ...);
- cache_write: a prompt's keys and values into the caches (gpt2_cache_write);
- prompt_attention, prompt_attention_amx: a prompt's causal attention
  (gpt2_prompt_attention, gpt2_prompt_attention_bf16);
- decode_steps: a decoded block's layer norm, GELU, projection chunks and
  attention over the cache;
- decode_blocks: a decoded token through every block (gpt2_decode_blocks);
- blocks: ggml's block types (Q8_0, Q4_0, Q4_1) as a GGUF file stores them;
- token_rows: a decoded token's x times rows of blocks, multiplied as
  integers (x rounded to 16-bit levels), or of plain float32 or bfloat16
  rows; how a 4-bit matrix's rows are grouped;
- int_panels: a prompt's rows times blocks in integers, where the CPU has
  AVX-512's VNNI (x and the weights' levels in 16 bits);
- ggml_rows: x times a weight in ggml's Q8_0, Q4_0 or Q4_1 blocks (a 4-bit
  matrix's rows grouped eight side by side), and a table's rows widened
  (fast/llama.py's projections and embedding);
- group_attention: a decoded Llama token's attention, a key/value head's
  group of queries at once over a run of the positions (a run a core);
- llama_decode: a decoded token through every layer of a Llama whose
  matrices share one block type (llama_decode_blocks_*).
"""
