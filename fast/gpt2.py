"""The tutorial's GPT-2, run faster: what `generate` and `bench` use.

Not tutorial material. The modules, parameter names and checkpoint are those
of steps 13 and 15 (this model *is* a MaxGPT2LMHeadModel and loads the same
weights); only the way a forward pass is run changes, for speed:

- **A KV cache allocated once, written in place.** Step 17's cache is a value:
  every token `F.concat`s each layer's cache into a new tensor, then
  `F.stack`s the layers into another, so a token at position t copies the
  whole cache twice (2 x 2 x 12 layers x t x 768 floats: 75 MB at t = 512).
  Here the cache is a pair of buffers [n_layer, batch, heads, context, head_dim]
  that the compiled graph mutates: each token writes its own key and value at
  its position and reads the first t + 1 positions, nothing is copied.
- **The head only where it is needed.** Step 17's prefill multiplies every
  prompt position by the 50257 x 768 embedding table; only the last
  position's logits are ever used, so only it goes through the head (a
  512-token prompt: 20 GFLOP less). The graph returns [batch, vocab] float32
  logits, whatever the weights' dtype.
- **One token's products in our own kernels (the CPU).** Decoding a token
  reads every weight once for one multiply-add: memory-bound. The kernels in
  fast/kernels/ stream each weight row once over all the
  cores (faster than MAX's matmul, which for one row reads below the memory's
  rate), and attend over the cache; MAX builds them from source and calls
  them as custom ops.
  A decoded token's blocks are one call: their seven steps each share the
  cores without handing them back to MAX between steps or blocks. A
  prompt's attention is one call a block, which computes only the scores a
  causal mask keeps.
  With bfloat16 weights a prompt's projections run there too, in register
  tiles, or in AMX's where the CPU has them, and then its attention as well.
- **The runtime's poller set aside (the CPU).** MAX keeps a logging thread
  that wakes every 100 microseconds; the generator lets it run only on a
  core our kernels leave idle (common.max_runtime.demote_idle_pollers).
- **Any dtype and device.** The weights are built in `dtype` (float32 or
  bfloat16) on `device` (the CPU or an accelerator), and everything the graphs
  take and return lives there too.

tests/test_fast.py checks its logits and greedy tokens against the tutorial model's.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from max.driver import CPU, Buffer, Device
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Linear
from max.experimental.tensor import Tensor, default_device, default_dtype
from max.graph import BufferType, TensorType

from common import max_runtime
from fast.bfloat16 import to_bfloat16
from fast.kernel_ops import (
    FLOAT32,
    as_float32,
    bias_or_zeros,
    cache_kernel,
    kernels_built_for,
    linear_rows,
    prompt_attention,
)
from fast.sampling import token_chooser
from solutions.solution_02 import causal_mask
from solutions.solution_13 import MaxGPT2LMHeadModel

DTYPES = {"float32": DType.float32, "bfloat16": DType.bfloat16}


class FastGPT2(MaxGPT2LMHeadModel):
    """Step 13's model with a forward that reads and writes a preallocated cache.

    forward(input_ids [batch, seq], key_cache, value_cache, start [1])
        -> logits [batch, vocab] (float32) for the last position.
    The caches are [n_layer, batch, heads, n_positions, head_dim] buffers;
    `start` is the number of positions already in them. A prompt (seq > 1) is
    always run on an empty cache (start = 0).

    `use_kernels` (the default on the CPU) runs a decoded token's blocks
    (one call of our kernel for all of them) and a prompt's projections through
    fast/kernels/, with float32 activations whatever the
    weights' dtype; without it every operation is one of MAX's own, in the
    weights' dtype (the path for accelerators). `bf16_dot` False widens
    bfloat16 weights to float32 even on a CPU with bfloat16 dot products:
    the path of a CPU without them, for the tests and the benchmark.
    """

    use_kernels: bool = False
    bf16_dot: bool = True

    def forward(
        self, input_ids: Tensor, key_cache: Tensor, value_cache: Tensor, start: Tensor
    ) -> Tensor:
        if self.use_kernels:
            return self._forward_kernels(input_ids, key_cache, value_cache, start)
        return self._forward_graph_ops(input_ids, key_cache, value_cache, start)

    # --- the CPU path: MAX graph ops for the prompt, our kernels per token ----

    def _forward_kernels(
        self, input_ids: Tensor, key_cache: Tensor, value_cache: Tensor, start: Tensor
    ) -> Tensor:
        transformer = self.transformer
        seq_length = input_ids.shape[1]
        positions = Tensor.arange(seq_length, dtype=DType.int64, device=input_ids.device) + start
        token_embeddings = as_float32(transformer.wte(input_ids))
        hidden_states = token_embeddings + as_float32(transformer.wpe(positions))
        blocks = self._decode_blocks if seq_length == 1 else self._prompt_blocks
        hidden_states = blocks(hidden_states, key_cache, value_cache, start)
        last = _layer_norm(transformer.ln_f, hidden_states[:, -1:])  # only the last position
        logits = self._linear(self.lm_head, last)
        return logits.reshape([logits.shape[0], logits.shape[2]])

    def _prompt_blocks(
        self, hidden_states: Tensor, key_cache: Tensor, value_cache: Tensor, start
    ) -> Tensor:
        """A prompt on an empty cache through every block: MAX's ops around our
        kernels (projections, the keys and values stored, causal attention)."""
        for index, block in enumerate(self.transformer.h):
            attention = block.attn
            heads = attention.num_heads
            qkv = self._linear(attention.c_attn, _layer_norm(block.ln_1, hidden_states))
            # The keys and values from qkv into the caches, graph buffers the kernel writes.
            cache = [key_cache.__buffervalue__(), value_cache.__buffervalue__()]
            cache_kernel("gpt2_cache_write", [*cache, qkv, start], index)
            bf16 = attention.c_attn.weight.dtype == DType.bfloat16 and self.bf16_dot
            attn_output = prompt_attention(qkv, heads, bf16)
            hidden_states = hidden_states + self._linear(attention.c_proj, attn_output)
            mlp = block.mlp
            inner = self._linear(mlp.c_fc, _layer_norm(block.ln_2, hidden_states))
            activated = F.gelu(inner, approximate="tanh")
            hidden_states = hidden_states + self._linear(mlp.c_proj, activated)
        return hidden_states

    def _decode_blocks(
        self, hidden_states: Tensor, key_cache: Tensor, value_cache: Tensor, start
    ) -> Tensor:
        """One token through every block in one call of our kernel
        (gpt2_decode_blocks): the layer norms, projections, attention over
        the cache and residual adds, this token's keys and values written at
        `start`. The weights go in as they are stored (float32 or bfloat16),
        each vector as a [1, n] matrix: the kernel takes all the blocks'
        parameters as one group of matrices of one dtype."""
        device = hidden_states.device
        epsilons, parameters = [], []
        for block in self.transformer.h:
            attention, mlp = block.attn, block.mlp
            epsilons += [block.ln_1.eps, block.ln_2.eps]
            # In the kernel's order: a layer norm, then the two projections after it.
            for norm, first, second in (
                (block.ln_1, attention.c_attn, attention.c_proj),
                (block.ln_2, mlp.c_fc, mlp.c_proj),
            ):
                parameters += [norm.weight, norm.bias, first.weight, bias_or_zeros(first, device)]
                parameters += [second.weight, bias_or_zeros(second, device)]
        matrices = [p if p.rank == 2 else p.reshape([1, p.shape[0]]) for p in parameters]
        name = "gpt2_decode_blocks" if self.bf16_dot else "gpt2_decode_blocks_widening"
        cache = [key_cache.__buffervalue__(), value_cache.__buffervalue__()]
        epsilon = Tensor(epsilons, dtype=FLOAT32, device=device)
        out_type = TensorType(FLOAT32, hidden_states.shape, device=device)
        values = [*cache, hidden_states, epsilon, start]
        return cache_kernel(name, values, 0, out_type, parameters=matrices)

    def _linear(self, layer: Linear, x: Tensor) -> Tensor:
        """layer(x) for float32 x [batch, seq, in]: our kernel for one position
        (the head), and for a prompt with bfloat16 weights on a CPU with
        bfloat16 dot products (its tiles); MAX's float32 matmul otherwise."""
        batch, seq_length, n_in = x.shape
        n_out = layer.weight.shape[0]
        bias = as_float32(bias_or_zeros(layer, x.device, FLOAT32))
        tiles = layer.weight.dtype == DType.bfloat16 and self.bf16_dot and kernels_built_for()[0]
        if seq_length != 1 and not tiles:
            return x @ as_float32(layer.weight).T + bias
        rows = linear_rows(layer, x.reshape([-1, n_in]), bias, widening=not self.bf16_dot)
        return rows.reshape([batch, seq_length, n_out])

    # --- MAX's ops only, in the weights' dtype (accelerators) -----------------

    def _forward_graph_ops(
        self, input_ids: Tensor, key_cache: Tensor, value_cache: Tensor, start: Tensor
    ) -> Tensor:
        transformer = self.transformer
        seq_length = input_ids.shape[1]
        first = start.__tensorvalue__().reshape([])  # a graph scalar: slice bounds
        stop = first + F.shape_to_tensor([seq_length]).__tensorvalue__().reshape([])
        positions = Tensor.arange(seq_length, dtype=DType.int64, device=input_ids.device)
        positions = positions + start.to(input_ids.device)  # `start` is on the host
        hidden_states = transformer.wte(input_ids) + transformer.wpe(positions)
        for index, block in enumerate(transformer.h):
            attention = block.attn
            heads, head_dim = attention.num_heads, attention.head_dim
            query, key, value = F.split(
                attention.c_attn(block.ln_1(hidden_states)), [attention.embed_dim] * 3, axis=-1
            )
            query = attention._split_heads(query, heads, head_dim)
            key = attention._split_heads(key, heads, head_dim)
            value = attention._split_heads(value, heads, head_dim)
            # Write this step's keys and values into the cache, in place.
            key_cache[index, :, :, (slice(first, stop), seq_length), :] = key
            value_cache[index, :, :, (slice(first, stop), seq_length), :] = value
            scores_scale = 1.0 / math.sqrt(head_dim)
            if seq_length == 1:
                # One new token: it sees every cached position and itself.
                key = key_cache[index, :, :, (slice(0, stop), "total"), :]
                value = value_cache[index, :, :, (slice(0, stop), "total"), :]
                scores = query @ key.transpose(-1, -2) * scores_scale
            else:
                # A prompt on an empty cache: its own keys, causally masked.
                scores = query @ key.transpose(-1, -2) * scores_scale
                scores = scores + causal_mask(
                    seq_length, 0, dtype=scores.dtype, device=scores.device
                )
            weights = F.softmax(scores, axis=-1)
            attn_output = attention._merge_heads(weights @ value, heads, head_dim)
            hidden_states = hidden_states + attention.c_proj(attn_output)
            hidden_states = hidden_states + block.mlp(block.ln_2(hidden_states))
        last = transformer.ln_f(hidden_states[:, -1])  # only the last position
        return self.lm_head(last).cast(FLOAT32)


def _layer_norm(norm, x: Tensor) -> Tensor:
    """Step 03's LayerNorm on float32 activations, whatever its weights' dtype."""
    return F.layer_norm(
        x, gamma=as_float32(norm.weight), beta=as_float32(norm.bias), epsilon=norm.eps
    )


def load(
    directory: Path,
    *,
    dtype: DType = DType.float32,
    device: Device | None = None,
    use_kernels: bool | None = None,
    bf16_dot: bool = True,
):
    """A FastGPT2 with a checkpoint's weights, in `dtype` on `device`;
    `use_kernels` defaults to True on the CPU (see FastGPT2)."""
    from solutions.solution_15 import check_against, load_config, read_tensors, to_max_layout

    device = device or CPU()
    config = load_config(directory)
    with F.lazy(), default_dtype(dtype), default_device(device):
        model = FastGPT2(config)
    state = to_max_layout(read_tensors(directory))
    check_against(state, {n: tuple(int(d) for d in t.shape) for n, t in model.parameters})
    if dtype == DType.bfloat16:
        state = to_bfloat16(state)
    model.load_state_dict(state)
    model.device = device  # where the graphs' inputs go (a Module says CPU() until told)
    model.use_kernels = device == CPU() if use_kernels is None else use_kernels
    model.bf16_dot = bf16_dot
    return model


class FastGenerator:
    """The two compiled graphs (a prompt, one token) and the caches they share."""

    def __init__(self, model: FastGPT2, batch: int = 1) -> None:
        config = model.config
        self.config = config
        self.batch = batch
        self.device = model.device
        self.on_host = self.device == CPU()
        self.dtype = model.lm_head.weight.dtype
        # The caches hold the weights' dtype: with bfloat16 weights, half the
        # bytes a token reads from them (at position 512 of the 124M model, 19
        # MB instead of 38, beside 249 MB of weights). Our kernels compute in
        # float32, round each key and value as they store it, widen as they read.
        cache_dtype = self.dtype
        head_dim = config.n_embd // config.n_head
        kv_shape = [config.n_layer, batch, config.n_head, config.n_positions, head_dim]
        cache_type = BufferType(cache_dtype, kv_shape, device=self.device)
        start_type = TensorType(DType.int64, [1], device=CPU())  # slice bounds: host values

        def token_type(seq):
            return TensorType(DType.int64, [batch, seq], device=self.device)

        self.prefill = model.compile(token_type("seq"), cache_type, cache_type, start_type)
        self.decode = model.compile(token_type(1), cache_type, cache_type, start_type)
        # Two buffers of their own: two Tensor.zeros of one shape can come
        # back as one buffer (MAX merges equal constants), and the graphs
        # write into these.
        caches = [Buffer.zeros(kv_shape, cache_dtype, self.device) for _ in range(2)]
        self.key_cache, self.value_cache = (Tensor(storage=cache) for cache in caches)
        self.pollers_set_aside: list[int] = []
        if self.on_host:
            # A decoded token's id and position, written in place into buffers
            # the decode graph reads: see decoded_logits.
            ids, first = (Buffer.zeros(shape, DType.int64, CPU()) for shape in ([batch, 1], [1]))
            self._decode_ids, self._decode_start = ids.to_numpy(), first.to_numpy()  # views
            self._decode_buffers = (ids, *caches, first)
            # MAX starts a logging thread that polls at a process's first
            # execute, and on a small CPU it takes cores from our kernels: one
            # token now (at position 0, which every prompt overwrites) starts
            # it, so that it can be set aside before the first timed call.
            self.decode.execute_raw(*self._decode_buffers)
            self.pollers_set_aside = max_runtime.demote_idle_pollers()

    def _inputs(self, ids: np.ndarray, first: np.ndarray) -> tuple:
        """A graph's arguments: the token ids on the device, the caches, `start` on the host.
        from_dlpack wraps an array's memory; Tensor(ids) would build and run a one-constant
        graph per call (docs/src/performance.md, "What the kernels cannot fix")."""
        tokens = Tensor.from_dlpack(ids)
        tokens = tokens if self.on_host else tokens.to(self.device)
        return tokens, self.key_cache, self.value_cache, Tensor.from_dlpack(first)

    def logits(self, token_ids: Sequence[int], start: int = 0) -> np.ndarray:
        """Last-position logits [vocab] of `token_ids` placed at `start`."""
        if len(token_ids) == 1 and self.on_host and self.batch == 1:
            return self.decoded_logits(token_ids[0], start)
        step = self.prefill if len(token_ids) > 1 else self.decode
        # The arrays must outlive the call: the tensors borrow their memory.
        ids = np.asarray([token_ids], dtype=np.int64)
        first = np.asarray([start], dtype=np.int64)
        logits = step(*self._inputs(ids, first))
        # A copy: the array to_numpy() returns shares the output's memory,
        # which MAX may hand to a later call once `logits` is gone.
        return np.array((logits if self.on_host else logits.to(CPU())).to_numpy()[0])

    def decoded_logits(self, token_id: int, start: int) -> np.ndarray:
        """logits([token_id], start) on the host, the way a decoded token needs
        it: the id and position go into the decode graph's own input buffers,
        and the graph runs on buffers (execute_raw), without the tensors a
        call wraps its arguments and results in or its checks of them, which
        cost a decoded token a few percent (devtools/bench/TUNING_LOG.md)."""
        self._decode_ids[0, 0] = token_id
        self._decode_start[0] = start
        (logits,) = self.decode.execute_raw(*self._decode_buffers)
        return np.array(logits.to_numpy()[0])  # a copy, as in logits()

    def generate(
        self,
        prompt_ids: Sequence[int],
        max_new_tokens: int,
        *,
        do_sample: bool = False,
        seed: int | None = None,
        **sampling,
    ) -> Iterator[int]:
        """Like step 17's generate_cached: the prompt once, then a token per step.
        `sampling` is step 14's temperature and top_k."""
        if len(prompt_ids) + max_new_tokens > self.config.n_positions:
            raise ValueError(
                f"{len(prompt_ids)} prompt tokens + {max_new_tokens} new ones exceed the "
                f"context window ({self.config.n_positions})."
            )
        choose = token_chooser(do_sample, seed, **sampling)
        token_ids, start = list(prompt_ids), 0
        for _ in range(max_new_tokens):
            next_id = choose(self.logits(token_ids, start))
            start += len(token_ids)
            yield next_id
            token_ids = [next_id]
