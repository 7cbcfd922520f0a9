"""Serving GPT-2 under load: `python -m devtools.serve_bench`.

    python -m devtools.serve_bench [--weights DIR] [--concurrency N ...] [--json F]

A GPT-2 124M-shaped checkpoint is made locally (random weights, nothing
downloaded) unless --weights names one. Then, one contender at a time, never
two at once on the machine:

1. `max serve` with our GPT-2 (tools.serve's command, plus `timed_arch.py`,
   which logs each model execution; 127.0.0.1, a free port): a real session
   recorded for the book, then streamed greedy completions at concurrency 1,
   4, 16 and 64 (`load.py`; at concurrency 1 `executions.py` splits a
   token's time between our graph and MAX's pipeline), and once MAX's own
   load generator, `max benchmark`, against the same server as a
   cross-check (`cross_check.py`, when the `max[benchmark]` extra is
   installed).
2. After the server stops, the peers (`peers.py`): transformers' `generate`,
   batched at the same concurrency (left-padded), and our fast model
   (fast/gpt2.py) on one stream.
3. llama.cpp's OpenAI-compatible server on the same weights at the same
   levels, when the `peers` extra is installed (`llama_server.py`).

Each level reports throughput (generated tokens/s over the wall time), time
to first token (TTFT) and inter-token latency (ITL), median and 99th
percentile (`report.py` writes docs/src/bench/serve.md, serve.json and
serve.png).

    python -m devtools.serve_bench --gguf FILE|smollm2 [--out DIR]

serves a Llama-family GGUF file instead: `max serve` through fast/'s kernels
against llama.cpp's server on the same file, and fast/llama.py on one stream
(`gguf.py`; serve_gguf.md and serve_gguf.json in --out).
"""
