"""Benchmark our GPT-2 against Hugging Face transformers, interleaved, with spreads.

Same weights, same prompt, greedy decoding, batch 1, on this machine.

    python -m devtools.bench [--json out.json] [--dtype bfloat16] [--device gpu]
    python -m devtools.bench --render out.json     (the book's table and plot only)

Each round runs every contender once per length, in a rotating order (A B C,
then B C A, ...), so that whatever else the machine does lands on all of them;
after a warm-up, --repeats rounds give a tokens/s sample per contender and
length, and each round gives a ratio to transformers from runs seconds apart.
Reported: the median ratio with its spread (min-max and quartiles), time to
first token, prefill throughput on a 512-token prompt, compile times, the
machine's load while it ran, and the memory-bandwidth ceiling. --json writes
every figure; the Markdown table and the plot in docs/src/bench/ are rendered
from the same data.

Weights are GPT-2 124M's shapes with random N(0, 0.02) values: the speed does
not depend on the values, and nothing has to be downloaded.

The modules, in the order a run uses them:

- `__main__.py`: the command line.
- `contenders.py`: what generates (transformers, ours, llama.cpp), each
  family in a process of its own.
- `machine.py`: the machine under the benchmark: its name, its load, its
  memory bandwidth (the ceiling), and waiting for it to be quiet.
- `measuring.py`: the interleaved rounds, and the run that sets them up.
- `stats.py`: medians, spreads and paired ratios of the samples (pure).
- `profile.py`: where the time goes: the decode graphs' operations, and our
  kernels timed alone (the head's projection, the MLP's by rows, a prompt's
  attention by length).
- `reporting.py`: the book's table, profile and plot, from the JSON data only.
- `standing.py`: the table across machines, from every saved run's JSON data.

Beside a run: `chain.py` reads the twelve blocks' weights through our
kernels against the same probe; `kernels_ab.py` runs the working tree's
kernels against a git revision's in one process, taking turns (a decoded
token's blocks, or a prompt's projections with --rows); and
`gpu_kernels.py` is the program that Nsight Compute traces on a GPU, and the
summary of its trace. `TUNING_LOG.md` records how each change to the fast
model's kernels was measured with them, what it bought, and what was tried
and not kept.

Parts II and III have a bench each, one table for their step's page, on the
command line they share (`command.py`): `llama.py` (python -m
devtools.bench.llama) decodes step 23's model against transformers' (with
--gguf, SmolLM2-135M-Instruct's own GGUF file and llama.cpp's requantizations
of it, `gguf_files.py`, with llama.cpp and MAX's qmatmul too: `llama_gguf.py`,
`max_qmatmul.py`, its tables `llama_gguf_table.py`), and
`mla.py` (python -m devtools.bench.mla) one attention layer four ways, steps
21, 24 and 25.
"""
