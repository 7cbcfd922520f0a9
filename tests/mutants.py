"""Plausible learner mistakes, written as edits of the reference solutions.

Each mutant replaces text that must occur exactly once in the solution (so a
mutant cannot silently stop applying when a solution is edited) and names a
phrase the checker's message or hint must contain: the checker has to catch
the mistake *and* say what it is.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    edits: tuple[tuple[str, str], ...]  # (old, new), applied in order
    expect: str  # a phrase the failing check's message or hint contains


def apply(mutant: Mutant, source: str) -> str:
    """The solution's source with the mutant's edits made."""
    for old, new in mutant.edits:
        if source.count(old) != 1:
            raise ValueError(f"mutant {mutant.name!r}: {old!r} must occur exactly once")
        source = source.replace(old, new)
    return source


def m(name: str, old: str, new: str, expect: str) -> Mutant:
    return Mutant(name, ((old, new),), expect)


MUTANTS: dict[int, list[Mutant]] = {
    1: [
        m("vocab off by one", "vocab_size: int = 50257", "vocab_size: int = 50256", "vocab_size"),
        m(
            "eps 1e-6",
            "layer_norm_epsilon: float = 1e-5",
            "layer_norm_epsilon: float = 1e-6",
            "layer_norm_epsilon",
        ),
        m("n_inner hard-coded", "self.n_inner = 4 * self.n_embd", "self.n_inner = 3072", "n_inner"),
        m("n_inner always overwritten", "if self.n_inner is None:", "if True:", "n_inner=100"),
        m("not a dataclass", "@dataclass\nclass", "class", "dataclass"),
        m("n_head 16", "n_head: int = 12", "n_head: int = 16", "n_head"),
        m(
            "eps zero",
            "layer_norm_epsilon: float = 1e-5",
            "layer_norm_epsilon: float = 0",
            "layer_norm_epsilon",
        ),
    ],
    2: [
        m(
            "ignores cached tokens (num_upper=0)",
            "num_upper=num_tokens",
            "num_upper=0",
            "cached tokens",
        ),
        m("mask inverted (exclude=False)", ", exclude=True)", ", exclude=False)", "inverted"),
        m("ones instead of -inf", 'float("-inf")', "1.0", "-inf"),
        m("diagonal masked", "num_upper=num_tokens", "num_upper=num_tokens - 1", "diagonal"),
        m(
            "square only",
            "total_length = num_tokens + sequence_length",
            "total_length = sequence_length",
            "raised",
        ),
        m(
            "dtype ignored",
            "dtype=dtype, device=device",
            "dtype=DType.float32, device=device",
            "dtype",
        ),
    ],
    3: [
        m("bias ignored", "beta=self.bias", "beta=self.bias * 0", "bias"),
        m("weight ignored", "gamma=self.weight", "gamma=self.weight * 0 + 1", "weight"),
        m("eps hard-coded", "epsilon=self.eps", "epsilon=1e-5", "eps"),
        m(
            "weight starts at 0",
            "self.weight = Tensor.ones([dim])",
            "self.weight = Tensor.zeros([dim])",
            "weight",
        ),
        m("eps not stored", "self.eps = eps", "self.eps = 1e-5", "eps"),
        m(
            "RMSNorm instead",
            "return F.layer_norm(x, gamma=self.weight, beta=self.bias, epsilon=self.eps)",
            "return x * F.rsqrt((x * x).mean(axis=-1) + self.eps) * self.weight + self.bias",
            "mean is not subtracted",
        ),
    ],
    4: [
        m("exact GELU", 'approximate="tanh"', 'approximate="none"', "tanh approximation"),
        m("ReLU", 'F.gelu(hidden_states, approximate="tanh")', "F.relu(hidden_states)", "ReLU"),
        m(
            "no bias on c_fc",
            "Linear(embed_dim, intermediate_size, bias=True)",
            "Linear(embed_dim, intermediate_size, bias=False)",
            "c_fc.bias",
        ),
        m(
            "no c_proj in forward",
            "return self.c_proj(hidden_states)",
            "return hidden_states",
            "shape",
        ),
        m(
            "c_fc dims swapped",
            "Linear(embed_dim, intermediate_size, bias=True)",
            "Linear(intermediate_size, embed_dim, bias=True)",
            "swapped",
        ),
        m(
            "no activation",
            'hidden_states = F.gelu(hidden_states, approximate="tanh")',
            "pass",
            "activation is missing",
        ),
        m(
            "fixed 4x width",
            "Linear(embed_dim, intermediate_size, bias=True)\n",
            "Linear(embed_dim, 4 * embed_dim, bias=True)\n",
            "c_fc.weight",
        ),
    ],
    5: [
        m(
            "table sized by positions",
            "Embedding(config.vocab_size",
            "Embedding(config.n_positions",
            "wte.weight",
        ),
        m(
            "scaled output",
            "return self.wte(input_ids)",
            "return self.wte(input_ids) * 2.0",
            "wrong values",
        ),
        m("renamed table", "self.wte = Embedding", "self.table = Embedding", "parameter names"),
        m("half width", "dim=config.n_embd", "dim=config.n_embd // 2", "wte.weight"),
        m("returns the table", "return self.wte(input_ids)", "return self.wte.weight", "shape"),
    ],
    6: [
        m(
            "no positions",
            "return self.wte(input_ids) + self.wpe(positions)",
            "return self.wte(input_ids)",
            "Position embeddings are missing",
        ),
        m(
            "positions from 1",
            "Tensor.arange(seq_length,",
            "Tensor.arange(1, seq_length + 1,",
            "start at 1",
        ),
        m(
            "wpe sized by vocab",
            "self.wpe = Embedding(config.n_positions",
            "self.wpe = Embedding(config.vocab_size",
            "wpe.weight",
        ),
        m(
            "multiplied",
            "self.wte(input_ids) + self.wpe(positions)",
            "self.wte(input_ids) * self.wpe(positions)",
            "wrong values",
        ),
        m(
            "only positions",
            "return self.wte(input_ids) + self.wpe(positions)",
            "return self.wpe(positions) + 0 * self.wte(input_ids)",
            "Only the position embeddings",
        ),
        m(
            "fixed length positions",
            "Tensor.arange(seq_length,",
            "Tensor.arange(7,",
            "positions follow",
        ),
    ],
    7: [
        m(
            "k, q, v order",
            "return query, key, value",
            "return key, query, value",
            "This is the key",
        ),
        m(
            "no bias",
            "Linear(self.embed_dim, 3 * self.embed_dim, bias=True)",
            "Linear(self.embed_dim, 3 * self.embed_dim, bias=False)",
            "c_attn.bias",
        ),
        m(
            "split the wrong axis",
            "[self.embed_dim] * 3, axis=-1",
            "[self.embed_dim] * 3, axis=1",
            "split",
        ),
        m(
            "two-way projection",
            "3 * self.embed_dim, bias=True",
            "2 * self.embed_dim, bias=True",
            "c_attn.weight",
        ),
        m(
            "q, v, k unpacked",
            "query, key, value = F.split",
            "query, value, key = F.split",
            "This is the",
        ),
        m("returns a list", "return query, key, value", "return [query, key]", "tuple"),
    ],
    8: [
        m(
            "no scale",
            "scores = scores / math.sqrt(int(head_dim))",
            "scores = scores",
            "not scaled",
        ),
        m("scale by head_dim", "math.sqrt(int(head_dim))", "int(head_dim)", "divided by head_dim"),
        m("no mask", "scores = scores + mask", "scores = scores", "causal mask"),
        m(
            "softmax over queries",
            "F.softmax(scores, axis=-1)",
            "F.softmax(scores, axis=-2)",
            "wrong axis",
        ),
        Mutant(
            "mask after softmax",
            (
                ("scores = scores + mask\n", ""),
                (
                    "weights = F.softmax(scores, axis=-1)\n",
                    "weights = F.softmax(scores, axis=-1) + mask\n",
                ),
            ),
            "after the softmax",
        ),
        m("no key transpose", "query @ key.transpose(-1, -2)", "query @ key", "raised"),
        m(
            "multiplied by sqrt",
            "scores = scores / math.sqrt",
            "scores = scores * math.sqrt",
            "multiplied",
        ),
    ],
    9: [
        m(
            "split without transpose",
            "tensor = tensor.reshape([batch, seq_length, num_heads, attn_head_size])\n        return tensor.transpose(1, 2)",
            "return tensor.reshape([batch, num_heads, seq_length, attn_head_size])",
            "without the transpose",
        ),
        m(
            "merge without transpose",
            "tensor = tensor.transpose(1, 2)\n        batch, seq_length = tensor.shape[0], tensor.shape[1]",
            "batch, seq_length = tensor.shape[0], tensor.shape[2]",
            "without the transpose",
        ),
        m("no c_proj", "return self.c_proj(attn_output)", "return attn_output", "c_proj"),
        m(
            "no scale",
            "scores = scores / math.sqrt(self.head_dim)",
            "scores = scores",
            "not scaled",
        ),
        m("scale by n_embd", "math.sqrt(self.head_dim)", "math.sqrt(self.embed_dim)", "n_embd"),
        m(
            "no mask",
            "scores = scores + causal_mask(",
            "_unused = scores + causal_mask(",
            "causal mask",
        ),
        m(
            "softmax over queries",
            "F.softmax(scores, axis=-1)",
            "F.softmax(scores, axis=-2)",
            "wrong axis",
        ),
        m(
            "c_proj without bias",
            "self.c_proj = Linear(self.embed_dim, self.embed_dim, bias=True)",
            "self.c_proj = Linear(self.embed_dim, self.embed_dim, bias=False)",
            "c_proj.bias",
        ),
    ],
    10: [
        m("post-norm", "return x + sublayer(norm(x))", "return norm(x + sublayer(x))", "post-norm"),
        m(
            "no residual",
            "return x + sublayer(norm(x))",
            "return sublayer(norm(x))",
            "residual is missing",
        ),
        m("no norm", "return x + sublayer(norm(x))", "return x + sublayer(x)", "norm is skipped"),
        m(
            "normalized residual",
            "return x + sublayer(norm(x))",
            "return norm(x) + sublayer(norm(x))",
            "normalized x",
        ),
        m(
            "norm after sublayer",
            "return x + sublayer(norm(x))",
            "return x + norm(sublayer(x))",
            "output instead of its input",
        ),
        m(
            "subtracts",
            "return x + sublayer(norm(x))",
            "return x - sublayer(norm(x))",
            "wrong values",
        ),
    ],
    11: [
        m(
            "no MLP half",
            "return pre_norm_residual(hidden_states, self.ln_2, self.mlp)",
            "return hidden_states",
            "Only the attention half",
        ),
        m(
            "norms swapped",
            "pre_norm_residual(hidden_states, self.ln_1, self.attn)",
            "pre_norm_residual(hidden_states, self.ln_2, self.attn)",
            "wrong values",
        ),
        m(
            "default eps",
            "self.ln_1 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)",
            "self.ln_1 = LayerNorm(config.n_embd)",
            "layer_norm_epsilon",
        ),
        m(
            "MLP width n_embd",
            "GPT2MLP(config.n_inner, config)",
            "GPT2MLP(config.n_embd, config)",
            "mlp.c_fc.weight",
        ),
        Mutant(
            "MLP first",
            (
                (
                    "        hidden_states = pre_norm_residual(hidden_states, self.ln_1, self.attn)\n",
                    "",
                ),
                (
                    "return pre_norm_residual(hidden_states, self.ln_2, self.mlp)",
                    "hidden_states = pre_norm_residual(hidden_states, self.ln_2, self.mlp)\n"
                    "        return pre_norm_residual(hidden_states, self.ln_1, self.attn)",
                ),
            ),
            "MLP comes before attention",
        ),
        m("renamed attention", "self.attn = ", "self.attention = ", "parameter names"),
    ],
    12: [
        m(
            "ln_f without the config's epsilon",
            "self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)",
            "self.ln_f = LayerNorm(config.n_embd)",
            "default epsilon",
        ),
        m(
            "no ln_f",
            "return self.ln_f(hidden_states)",
            "return hidden_states",
            "ln_f is not applied",
        ),
        m(
            "first block only",
            "for block in self.h:",
            "for block in list(self.h)[:1]:",
            "Only the first block",
        ),
        m(
            "one block too few",
            "for _ in range(config.n_layer)",
            "for _ in range(config.n_layer - 1)",
            "parameter names",
        ),
        m(
            "reversed blocks",
            "for block in self.h:",
            "for block in reversed(list(self.h)):",
            "reverse order",
        ),
        m(
            "no positions",
            "hidden_states = self.wte(input_ids) + self.wpe(positions)",
            "hidden_states = self.wte(input_ids)",
            "Position embeddings are missing",
        ),
        m(
            "ln_f default eps",
            "self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)",
            "self.ln_f = LayerNorm(config.n_embd, eps=0.1)",
            "wrong values",
        ),
    ],
    13: [
        m(
            "returns hidden states",
            "return self.lm_head(self.transformer(input_ids))",
            "return self.transformer(input_ids)",
            "hidden states",
        ),
        m(
            "head with bias",
            "Linear(config.n_embd, config.vocab_size, bias=False)",
            "Linear(config.n_embd, config.vocab_size, bias=True)",
            "lm_head.bias",
        ),
        m("not tied", "self.lm_head.weight = self.transformer.wte.weight", "pass", "tied"),
        m(
            "tied to wpe",
            "self.lm_head.weight = self.transformer.wte.weight",
            "self.lm_head.weight = self.transformer.wpe.weight",
            "lm_head.weight",
        ),
        Mutant(
            "softmax applied",
            (
                (
                    "from max.experimental.nn import",
                    "from max.experimental import functional as F\nfrom max.experimental.nn import",
                ),
                (
                    "return self.lm_head(self.transformer(input_ids))",
                    "return F.softmax(self.lm_head(self.transformer(input_ids)), axis=-1)",
                ),
            ),
            "Softmax",
        ),
        m(
            "renamed body",
            "self.transformer = GPT2Model(config)\n",
            "self.body = GPT2Model(config)\n        self.transformer = self.body\n",
            "parameter names",
        ),
    ],
    14: [
        m(
            "temperature multiplies",
            "logits.astype(np.float64) / temperature",
            "logits.astype(np.float64) * temperature",
            "temperature",
        ),
        m(
            "top-k off by one",
            "np.partition(logits, -top_k)[-top_k]",
            "np.partition(logits, -top_k - 1)[-top_k - 1]",
            "top_k",
        ),
        m(
            "argmax when sampling",
            "return int(rng.choice(logits.size, p=probs))",
            "return int(np.argmax(probs))",
            "drawn",
        ),
        m(
            "uniform draw",
            "return int(rng.choice(logits.size, p=probs))",
            "return int(rng.choice(logits.size))",
            "drew token",
        ),
        m(
            "first position's logits",
            "np.asarray(logits.to_numpy())[0, -1]",
            "np.asarray(logits.to_numpy())[0, 0]",
            "greedy",
        ),
        m(
            "new rng per token",
            "next_id = sample_next_token(logits, temperature=temperature, top_k=top_k, rng=rng)",
            "next_id = sample_next_token(logits, temperature=temperature, top_k=top_k, "
            "rng=np.random.default_rng())",
            "seed",
        ),
        m("no context crop", "token_ids[-context_length:]", "token_ids", "context window"),
        m("yields whole text", "yield text[len(shown) :]", "yield text", "several pieces"),
        m("chosen token never appended", "token_ids.append(next_id)", "pass", "append each chosen"),
        m(
            "k-th largest from the wrong end",
            "np.partition(logits, -top_k)[-top_k]",
            "np.partition(logits, top_k)[-top_k]",
            "wrong end",
        ),
        m(
            "k-th largest at the wrong index",
            "np.partition(logits, -top_k)[-top_k]",
            "np.partition(logits, -top_k)[top_k]",
            "wrong end",
        ),
        m(
            "top_k not passed on when sampling",
            "temperature=temperature, top_k=top_k, rng=rng)",
            "temperature=temperature, rng=rng)",
            "top_k= and the one rng",
        ),
        m(
            "softmax without the max shift",
            "np.exp(logits - logits.max())",
            "np.exp(logits)",
            "subtract the max",
        ),
    ],
    15: [
        m(
            "lm_head tied with `or`",
            '"lm_head.weight" not in state and "transformer.wte.weight" in state',
            '"lm_head.weight" not in state or "transformer.wte.weight" in state',
            "(`and`)",
        ),
        m(
            "given load_config drops a field",
            "if k in known}",
            'if k in known and k != "n_layer"}',
            "given code",
        ),
        m(
            "no transpose",
            "array = np.ascontiguousarray(array.T)",
            "array = np.ascontiguousarray(array)",
            "[in, out]",
        ),
        m(
            "every 2-D weight transposed",
            'if name.endswith(".weight") and any(f".{layer}." in name for layer in CONV1D_LAYERS):',
            "if array.ndim == 2:",
            "only the Conv1D weights",
        ),
        m(
            "attn.c_proj left out",
            'CONV1D_LAYERS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")',
            'CONV1D_LAYERS = ("attn.c_attn", "mlp.c_fc", "mlp.c_proj")',
            "square",
        ),
        m(
            "transposed view, not contiguous",
            "array = np.ascontiguousarray(array.T)",
            "array = array.T",
            "contiguous",
        ),
        m(
            "no prefix",
            'name = "transformer." + name',
            "pass",
            "prefix",
        ),
        m(
            "prefix on lm_head too",
            'if not name.startswith(("transformer.", "lm_head.")):',
            'if not name.startswith("transformer."):',
            "lm_head",
        ),
        m(
            "buffers kept",
            "continue  # a mask buffer",
            "pass  # a mask buffer",
            "buffer",
        ),
        m(
            "head not tied",
            'state["lm_head.weight"] = state["transformer.wte.weight"]',
            "pass",
            "tied",
        ),
        m(
            "float64",
            "np.asarray(array, dtype=np.float32)",
            "np.asarray(array, dtype=np.float64)",
            "float32",
        ),
        m(
            "dtype kept",
            "np.asarray(array, dtype=np.float32)",
            "np.asarray(array)",
            "float16",
        ),
        m("shapes not compared", "if found != tuple(shape):", "if False:", "shape"),
        m(
            "missing tensor not caught",
            "if name not in state:",
            "if False:",
            "name not in state",
        ),
        m("extra tensors ignored", "if extra:", "if False:", "set(state) - set(expected)"),
        m(
            "message without the name",
            'f"the checkpoint has no tensor {name} (shape {list(shape)})."',
            '"a tensor is missing."',
            "does not name",
        ),
    ],
    16: [
        m("returns the eager model", "return model.compile(input_type)", "return model", "Module"),
        m(
            "an eager wrapper",
            "return model.compile(input_type)",
            "return lambda ids: model(ids)",
            "compiled graph",
        ),
        m("float token ids", "TensorType(DType.int64,", "TensorType(DType.float32,", "raised"),
        m("no input type", "return model.compile(input_type)", "return model.compile()", "raised"),
        m("one axis only", '["batch", "seq"]', '["seq"]', "raised"),
        m("fixed length", '["batch", "seq"]', '["batch", 5]', "other lengths"),
    ],
    17: [
        m(
            "positions restart at 0",
            "num_cached, num_cached + input_ids.shape[-1],",
            "0, input_ids.shape[-1],",
            "position 0",
        ),
        m(
            "cache not appended",
            "key = F.concat([past_key, self._split_heads(key, self.num_heads, self.head_dim)], axis=2)",
            "key = self._split_heads(key, self.num_heads, self.head_dim)",
            "cache",
        ),
        m(
            "mask ignores the cache",
            "seq_length, int(num_cached), dtype=",
            "seq_length, 0, dtype=",
            "offset",
        ),
        m(
            "returns the old cache",
            "return logits, F.stack(keys, axis=0), F.stack(values, axis=0)",
            "return logits, past_keys, past_values",
            "keys",
        ),
        m(
            "keys and values swapped",
            "return logits, F.stack(keys, axis=0), F.stack(values, axis=0)",
            "return logits, F.stack(values, axis=0), F.stack(keys, axis=0)",
            "keys",
        ),
        m(
            "whole sequence fed again",
            "input_ids = np.asarray([[next_id]], dtype=np.int64)  # only the new token",
            "input_ids = np.concatenate([input_ids, [[next_id]]], axis=1)",
            "Feed the prompt once",
        ),
        m(
            "every layer reads layer 0's cache",
            "block(hidden_states, past_keys[index], past_values[index])",
            "block(hidden_states, past_keys[0], past_values[0])",
            "new token",
        ),
    ],
    18: [
        m(
            "one shared key/value head",
            "n_kv_heads=config.n_head,",
            "n_kv_heads=1,",
            "one key/value head per query head",
        ),
        m(
            "head_dim is the whole width",
            "head_dim=config.n_embd // config.n_head,",
            "head_dim=config.n_embd,",
            "n_embd // n_head",
        ),
        m(
            "positions ignore the cache",
            "shift = cache_lengths - starts",
            "shift = 0 * cache_lengths - starts",
            "add cache_lengths",
        ),
        m(
            "positions count through the batch",
            "shift = cache_lengths - starts",
            "shift = cache_lengths",
            "subtract each request's start",
        ),
        m(
            "each request's first row",
            "last = F.cast(input_row_offsets[1:], DType.int64) - 1",
            "last = F.cast(input_row_offsets[:-1], DType.int64)",
            "first rows",
        ),
        Mutant(
            "keys and values swapped",
            (
                (
                    "store_keys(kv_collection, key.reshape(heads)",
                    "store_keys(kv_collection, value.reshape(heads)",
                ),
                (
                    "store_values(kv_collection, value.reshape(heads)",
                    "store_values(kv_collection, key.reshape(heads)",
                ),
            ),
            "key/value order",
        ),
        m(
            "values never stored",
            "store_values(kv_collection, value.reshape(heads), input_row_offsets, layer_idx)\n",
            "",
            "store_keys and store_values first",
        ),
        m(
            "scores scaled by sqrt(head_dim)",
            "scale=1 / math.sqrt(self.head_dim)",
            "scale=math.sqrt(self.head_dim)",
            "1/sqrt(head_dim)",
        ),
        m(
            "no causal mask",
            "mask_variant=MHAMaskVariant.CAUSAL_MASK",
            "mask_variant=MHAMaskVariant.NULL_MASK",
            "causal mask",
        ),
        m(
            "query not split into heads",
            "input=query.reshape(heads)",
            "input=query",
            "Reshape the query",
        ),
        m(
            "every layer is layer 0",
            "F.constant(index, DType.uint32",
            "F.constant(0, DType.uint32",
            "its own layer_idx",
        ),
        m(
            "positions from 0 across the batch",
            "positions = ragged_positions(input_row_offsets, cache_lengths, tokens.shape[0])",
            "positions = Tensor.arange(tokens.shape[0], dtype=DType.int64)",
            "positions",
        ),
    ],
}
