"""Checks for step 17: the KV cache (run eagerly: the logic, not the speed)."""

import numpy as np

from tests import reference as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor
from tests.mutants import m
from tests.specs.common import lm_shapes, small_config, tied_lm_weights

CONFIG = small_config(n_layer=2, n_positions=32)
L, H, E = CONFIG.n_layer, CONFIG.n_head, CONFIG.n_embd
D = E // H
SHAPES = lm_shapes(CONFIG)


def model(ctx: Context):
    """The learner's cached model with GPT-2-like weights, built once per run."""
    return ctx.once("model", lambda: build_model(ctx))


def build_model(ctx: Context):
    module = ctx.build("CachedGPT2LMHeadModel", CONFIG)
    weights = tied_lm_weights(ctx, CONFIG, wte_scale=15)
    ctx.load_weights(module, SHAPES, weights)
    return module, {k: v.astype(np.float64) for k, v in weights.items()}


def reference_cache(w, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every layer's keys and values for `ids`: [n_layer, batch, heads, seq, head_dim]."""
    x, keys, values = ref.embeddings(w, ids, "transformer."), [], []
    for i in range(L):
        prefix = f"transformer.h.{i}."
        h = ref.layer_norm(
            x, w[prefix + "ln_1.weight"], w[prefix + "ln_1.bias"], CONFIG.layer_norm_epsilon
        )
        _, k, v = ref.qkv(w, h, prefix + "attn.c_attn.")
        keys.append(ref.split_heads(k, H))
        values.append(ref.split_heads(v, H))
        x = ref.block(w, x, H, CONFIG.layer_norm_epsilon, prefix)
    return np.stack(keys), np.stack(values)


def full_logits(w, ids: np.ndarray) -> np.ndarray:
    return ref.lm_logits(w, ids, L, H, CONFIG.layer_norm_epsilon)


def step(ctx: Context, module, ids: np.ndarray, keys: np.ndarray, values: np.ndarray):
    out = ctx.call(
        "CachedGPT2LMHeadModel.forward", module, tensor(ids), tensor(keys), tensor(values)
    )
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        raise Fail(
            "forward should return (logits, keys, values).",
            "Return the logits and the grown caches, stacked over layers.",
        )
    return out


def empty() -> tuple[np.ndarray, np.ndarray]:
    return np.zeros((L, 1, H, 0, D), np.float32), np.zeros((L, 1, H, 0, D), np.float32)


def prefill(ctx: Context) -> None:
    module, w = model(ctx)
    ids = ctx.token_ids(CONFIG.vocab_size, 1, 6)
    logits, keys, values = step(ctx, module, ids, *empty())
    want_keys, want_values = reference_cache(w, ids)
    expect_close(logits, full_logits(w, ids), "logits with an empty cache")
    expect_close(
        keys,
        want_keys,
        "the returned keys [n_layer, batch, heads, seq, head_dim]",
        hint="Stack every layer's keys (after _split_heads) along a new first axis.",
    )
    expect_close(
        values,
        want_values,
        "the returned values",
        {
            "These are the keys: return the values as the third output.": want_keys,
        },
    )


def incremental(ctx: Context) -> None:
    module, w = model(ctx)
    for prompt_length in (1, 5):
        ids = ctx.token_ids(CONFIG.vocab_size, 1, prompt_length)
        logits, keys, values = step(ctx, module, ids, *empty())
        for new in range(2):
            token = int(np.argmax(np.asarray(logits.to_numpy())[0, -1]))
            ids = np.concatenate([ids, [[token]]], axis=1)
            logits, keys, values = step(
                ctx, module, np.asarray([[token]]), keys.to_numpy(), values.to_numpy()
            )
            want = full_logits(w, ids)[:, -1:]
            mistakes = {
                "The new token got position 0: positions continue after the cached tokens "
                "(arange(num_cached, num_cached + seq)).": full_logits(w, np.asarray([[token]])),
            }
            expect_close(
                logits,
                want,
                f"logits for new token {new + 1} after a {prompt_length}-token "
                "prompt, fed alone with the cache",
                mistakes,
                hint="Append the new key and value to the cache along the sequence axis "
                "(axis 2 of [batch, heads, seq, head_dim]) and attend over all of it.",
            )


def chunk_after_cache(ctx: Context) -> None:
    module, w = model(ctx)
    ids = ctx.token_ids(CONFIG.vocab_size, 1, 7)
    _, keys, values = step(ctx, module, ids[:, :4], *empty())
    logits, _, _ = step(ctx, module, ids[:, 4:], keys.to_numpy(), values.to_numpy())
    expect_close(
        logits,
        full_logits(w, ids)[:, 4:],
        "logits for 3 new tokens after 4 cached ones",
        hint="Several new tokens need the causal mask offset by the cache length: "
        "causal_mask(seq, num_cached) from step 02.",
    )


def greedy_matches(ctx: Context) -> None:
    module, w = model(ctx)
    prompt = [3, 14, 15, 92, 65]
    want = ref.greedy_generate(w, prompt, 4, L, H, CONFIG.layer_norm_epsilon)
    fed: list[int] = []

    def forward(input_ids, past_keys, past_values):  # the model, recording what it is fed
        fed.append(int(input_ids.shape[-1]))
        return module(input_ids, past_keys, past_values)

    fn = ctx.get("generate_cached")
    got = ctx.call("generate_cached", lambda: [int(t) for t in fn(forward, CONFIG, prompt, 4)])
    if fed != [len(prompt), 1, 1, 1]:
        raise Fail(
            f"generate_cached fed the model {fed} tokens per call; with a cache that is "
            f"{[len(prompt), 1, 1, 1]}.",
            "Feed the prompt once, then only the newest token: the cache holds the rest.",
        )
    if got != want:
        raise Fail(
            f"generate_cached gave {got}; recomputing everything gives {want}.",
            "Pass the cache returned by each call into the next one.",
        )


STEP = Step(
    number=17,
    title="KV cache",
    typical=4,  # seconds, slowest check: token-by-token decoding, eagerly
    required={
        "CachedAttention": ["forward"],
        "CachedBlock": ["forward"],
        "CachedGPT2LMHeadModel": ["forward"],
        "generate_cached": [],
    },
    checks=[
        Check("with an empty cache: GPT-2's logits, and each layer's keys and values", prefill),
        Check(
            "one token at a time with the cache = recomputing everything (prompts of 1 and 5)",
            incremental,
        ),
        Check(
            "several new tokens after a cache: the mask is offset by the cache", chunk_after_cache
        ),
        Check("greedy generation with the cache matches GPT-2's", greedy_matches),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
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
]
