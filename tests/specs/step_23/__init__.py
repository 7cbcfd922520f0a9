"""Checks for step 23: the Llama-style model and its loader (run eagerly)."""

import numpy as np

from tests import reference_llama as ref
from tests.checker import (
    Check,
    Context,
    Fail,
    Step,
    expect_close,
    expect_parameters,
    expect_shape,
    tensor,
    to_numpy,
)

from .pieces import expect_layers_in_order, expect_own_caches, reference_layer, run_recorded

SIZES = dict(
    vocab_size=97,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    rope_theta=100.0,
    # Large, so that a norm built without the config's eps (RMSNorm's default
    # is 1e-6) changes the numbers.
    rms_norm_eps=1e-2,
)
H, INTER, V = SIZES["hidden_size"], SIZES["intermediate_size"], SIZES["vocab_size"]
HEADS, KV_HEADS, LAYERS = SIZES["num_attention_heads"], SIZES["num_key_value_heads"], 2
D = H // HEADS
EPS = SIZES["rms_norm_eps"]
BATCH, SEQ = 2, 5
LAYER = reference_layer(HEADS, KV_HEADS, SIZES["rope_theta"], EPS)


def layer_shapes(prefix: str = "") -> dict[str, tuple[int, ...]]:
    return {
        prefix + "input_layernorm.weight": (H,),
        prefix + "self_attn.q_proj.weight": (HEADS * D, H),
        prefix + "self_attn.k_proj.weight": (KV_HEADS * D, H),
        prefix + "self_attn.v_proj.weight": (KV_HEADS * D, H),
        prefix + "self_attn.o_proj.weight": (H, HEADS * D),
        prefix + "post_attention_layernorm.weight": (H,),
        prefix + "mlp.gate_proj.weight": (INTER, H),
        prefix + "mlp.up_proj.weight": (INTER, H),
        prefix + "mlp.down_proj.weight": (H, INTER),
    }


def model_shapes() -> dict[str, tuple[int, ...]]:
    shapes = {"model.embed_tokens.weight": (V, H)}
    for i in range(LAYERS):
        shapes.update(layer_shapes(f"model.layers.{i}."))
    shapes["model.norm.weight"] = (H,)
    shapes["lm_head.weight"] = (V, H)
    return shapes


def random_weights(ctx: Context, shapes: dict) -> dict[str, np.ndarray]:
    """Norm scales near 1, matrices N(0, 0.1): large enough that every part shows."""
    return {
        name: (1.0 + ctx.normal(*shape, std=0.1))
        if len(shape) == 1
        else ctx.normal(*shape, std=0.1)
        for name, shape in shapes.items()
    }


def lazily(ctx: Context, name: str, *args):
    """The learner's class built without computing its random initial weights:
    every check loads weights of its own at once (as step 15's loader does)."""
    from max.experimental import functional as F

    with F.lazy():
        return ctx.build(name, *args)


def config(ctx: Context, tied: bool = True):
    config_class = ctx.get("LlamaConfig")
    return ctx.call("LlamaConfig", config_class, **SIZES, tie_word_embeddings=tied)


def empty_cache() -> tuple[np.ndarray, np.ndarray]:
    zeros = np.zeros((LAYERS, BATCH, KV_HEADS, 0, D), np.float32)
    return zeros, zeros.copy()


# -- one layer ------------------------------------------------------------------


def wrong_layers(w: dict, x: np.ndarray) -> dict[str, np.ndarray]:
    def attend(h):
        return ref.gqa_attention(w, h, HEADS, KV_HEADS, 100.0, prefix="self_attn.")[0]

    def mlp(h):
        return ref.swiglu_mlp(w, h, "mlp.")

    def norm(name, h, eps=EPS):
        return ref.rms_norm(h, w[name + ".weight"], eps)

    def layer(input_eps, post_eps):
        stream = x + attend(norm("input_layernorm", x, input_eps))
        return stream + mlp(norm("post_attention_layernorm", stream, post_eps))

    default = 1e-6  # RMSNorm's own default eps
    after_attention = x + attend(norm("input_layernorm", x))
    return {
        "Both norms use RMSNorm's default eps, not the config's rms_norm_eps.": layer(
            default, default
        ),
        "input_layernorm uses RMSNorm's default eps, not the config's rms_norm_eps.": layer(
            default, EPS
        ),
        "post_attention_layernorm uses RMSNorm's default eps, not the config's "
        "rms_norm_eps.": layer(EPS, default),
        "The MLP reads the stream through input_layernorm; it has its own norm, "
        "post_attention_layernorm.": after_attention
        + mlp(norm("input_layernorm", after_attention)),
        "The MLP reads the layer's input, not the stream after the attention was added: "
        "the two halves run one after the other.": after_attention
        + mlp(norm("post_attention_layernorm", x)),
        "The norms come after the additions (post-norm); Llama normalizes what each half "
        "reads and adds its output to the raw stream (pre-norm).": norm(
            "post_attention_layernorm",
            norm("input_layernorm", x + attend(x)) + mlp(norm("input_layernorm", x + attend(x))),
        ),
        "The attention's output replaces the stream instead of being added to it: "
        "hidden_states + attention.": (
            attend(norm("input_layernorm", x))
            + mlp(norm("post_attention_layernorm", attend(norm("input_layernorm", x))))
        ),
        "The MLP's output replaces the stream instead of being added to it: "
        "hidden_states + mlp.": mlp(norm("post_attention_layernorm", after_attention)),
        "The attention reads the raw stream: normalize it with input_layernorm first.": (
            x + attend(x) + mlp(norm("post_attention_layernorm", x + attend(x)))
        ),
    }


def layer_adds_both_halves(ctx: Context) -> None:
    layer = lazily(ctx, "LlamaDecoderLayer", config(ctx))
    shapes = layer_shapes()
    expect_parameters(layer, shapes)
    weights = random_weights(ctx, shapes)
    ctx.call("load_state_dict", layer.load_state_dict, weights)
    x = ctx.normal(BATCH, SEQ, H)
    past = np.zeros((BATCH, KV_HEADS, 0, D), np.float32)
    result = ctx.run_lazily(
        "LlamaDecoderLayer.forward", layer, tensor(x), tensor(past), tensor(past.copy())
    )
    if not isinstance(result, tuple) or len(result) != 3:
        raise Fail(
            f"LlamaDecoderLayer.forward returned {type(result).__name__}, expected "
            "(hidden_states, key, value).",
            "Return the new stream and the key and value caches the attention gave back.",
        )
    want = ref.decoder_layer(weights, x, HEADS, KV_HEADS, 100.0, EPS)
    expect_close(result[0], want, "LlamaDecoderLayer(x)", wrong_layers(weights, x), model="Llama")


# -- the model ------------------------------------------------------------------


def build_model(ctx: Context, tied: bool):
    """The learner's model with random weights (built once per run for each tie)."""
    return ctx.once(f"model tied={tied}", lambda: new_model(ctx, tied))


def new_model(ctx: Context, tied: bool):
    model = lazily(ctx, "LlamaForCausalLM", config(ctx, tied))
    shapes = model_shapes()
    expect_parameters(model, shapes)
    weights = random_weights(ctx, shapes)
    if tied:
        weights["lm_head.weight"] = weights["model.embed_tokens.weight"]
    ctx.call("load_state_dict", model.load_state_dict, weights)
    return model, weights


def expected_logits(weights: dict, ids: np.ndarray, tied: bool) -> np.ndarray:
    used = dict(weights)
    if tied:
        used.pop("lm_head.weight")
    return ref.llama_logits(
        used,
        ids,
        num_layers=LAYERS,
        num_heads=HEADS,
        num_kv_heads=KV_HEADS,
        theta=100.0,
        eps=EPS,
    )


def head_is_tied_as_configured(ctx: Context) -> None:
    for tied in (True, False):
        model = lazily(ctx, "LlamaForCausalLM", config(ctx, tied))
        head = getattr(getattr(model, "lm_head", None), "weight", None)
        table = getattr(
            getattr(getattr(model, "model", None), "embed_tokens", None), "weight", None
        )
        if head is None or table is None:
            raise Fail(
                "LlamaForCausalLM needs model.embed_tokens and lm_head, as in a Llama checkpoint.",
            )
        if tied and head is not table:
            raise Fail(
                "With tie_word_embeddings=True, lm_head.weight is a tensor of its own; a tied "
                "checkpoint stores the table once and the head reads the embeddings.",
                "Make lm_head's weight the embedding table itself when the config ties them.",
            )
        if not tied and head is table:
            raise Fail(
                "With tie_word_embeddings=False, lm_head.weight is the embedding table; an "
                "untied checkpoint (Llama 3 8B, Mistral) has a head of its own.",
                "Tie only when config.tie_word_embeddings says so.",
            )


def logits_match_llama(ctx: Context) -> None:
    for tied in (True, False):
        model, weights = build_model(ctx, tied)
        ids = ctx.token_ids(V, BATCH, SEQ)
        (logits, keys, values), calls = run_recorded(ctx, model, ids, *empty_cache())
        expect_layers_in_order(calls, LAYERS, weights, ids, LAYER)
        want = expected_logits(weights, ids, tied)
        mistakes = {}
        if not tied:
            mistakes[
                "The logits use the embedding table as the head although the config does not "
                "tie them."
            ] = expected_logits(
                dict(weights, **{"lm_head.weight": weights["model.embed_tokens.weight"]}),
                ids,
                False,
            )
        expect_close(
            logits,
            want,
            f"the logits ({'tied' if tied else 'untied'} head)",
            mistakes,
            model="Llama",
        )
        for name, cache in (("keys", keys), ("values", values)):
            expect_shape(
                cache,
                (LAYERS, BATCH, KV_HEADS, SEQ, D),
                f"the returned {name}",
                "One layer of cache per layer, stacked on a new first axis: [layers, batch, "
                "kv_heads, seq, head_dim].",
            )


def cache_continues_the_text(ctx: Context) -> None:
    model, weights = build_model(ctx, True)
    ids = ctx.token_ids(V, BATCH, SEQ + 1)
    want = expected_logits(weights, ids, True)
    (_, keys, values), _ = run_recorded(ctx, model, ids[:, :SEQ], *empty_cache())
    keys, values = to_numpy(keys, "the returned keys"), to_numpy(values, "the returned values")
    (logits, grown, _), calls = run_recorded(ctx, model, ids[:, SEQ:], keys, values)
    expect_own_caches(calls, keys, values)
    expect_close(
        logits,
        want[:, SEQ:],
        f"the logits of token {SEQ} after a cache of {SEQ}",
        hint="Does each layer read its own layer of the cache, past_keys[index], and the "
        "model return every layer's grown cache?",
        model="Llama",
    )
    expect_shape(
        grown, (LAYERS, BATCH, KV_HEADS, SEQ + 1, D), "the keys after one more token", None
    )


# -- loading ------------------------------------------------------------------


def loader_ties_and_explains(ctx: Context) -> None:
    to_state = ctx.get("to_llama_state")
    shapes = model_shapes()
    weights = random_weights(ctx, shapes)
    stored = {name: array for name, array in weights.items() if name != "lm_head.weight"}
    stored["model.layers.0.self_attn.rotary_emb.inv_freq"] = np.ones(D // 2, np.float32)
    state = ctx.call("to_llama_state", to_state, dict(stored), config(ctx, True))
    if not isinstance(state, dict):
        raise Fail(f"to_llama_state returned {type(state).__name__}, expected a dict.")
    if "lm_head.weight" not in state:
        raise Fail(
            "A tied checkpoint has no lm_head.weight, and the state to_llama_state made has "
            "none either: the model's head cannot load.",
            "When the config ties them, lm_head.weight is model.embed_tokens.weight.",
        )
    if not np.array_equal(np.asarray(state["lm_head.weight"]), stored["model.embed_tokens.weight"]):
        raise Fail(
            "For a tied checkpoint, lm_head.weight in the state is not the embedding table.",
            "When the config ties them, lm_head.weight is model.embed_tokens.weight.",
        )
    if any(name.endswith("inv_freq") for name in state):
        raise Fail(
            "The state keeps rotary_emb.inv_freq, a table some checkpoints store; the model "
            "computes it (step 19) and has no such parameter.",
        )
    untied = ctx.call("to_llama_state", to_state, dict(weights), config(ctx, False))
    if not isinstance(untied, dict) or not np.array_equal(
        np.asarray(untied.get("lm_head.weight")), weights["lm_head.weight"]
    ):
        raise Fail(
            "For an untied checkpoint that stores lm_head.weight, the state's lm_head.weight "
            "is not the checkpoint's.",
            "An untied head has weights of its own: keep the checkpoint's lm_head.weight as it "
            "is, and fill it from the embeddings only when the config ties them.",
        )
    error_class = ctx.get("CheckpointError")
    try:
        to_state(dict(stored), config(ctx, False))
    except error_class as error:
        said = str(error)
        if "lm_head.weight" not in said or "tie_word_embeddings" not in said:
            raise Fail(
                f"For an untied checkpoint without lm_head.weight, the error says {said!r}; "
                "it should name the missing tensor, lm_head.weight, and the config's "
                "tie_word_embeddings.",
                "A learner who reads it should know which tensor is missing and why it is needed.",
            ) from None
        return
    except Exception as error:
        raise Fail(
            f"For an untied checkpoint without lm_head.weight, to_llama_state raised "
            f"{type(error).__name__}: {error}; expected a CheckpointError.",
        ) from None
    raise Fail(
        "An untied checkpoint (tie_word_embeddings false) without lm_head.weight was accepted; "
        "the head would keep random weights.",
        "Raise a CheckpointError naming lm_head.weight and tie_word_embeddings.",
    )


STEP = Step(
    number=23,
    required={
        "LlamaDecoderLayer": ["__init__", "forward"],
        "LlamaModel": ["__init__", "forward"],
        "LlamaForCausalLM": ["__init__", "forward"],
        "to_llama_state": [],
    },
    checks=[
        Check(
            "a layer adds attention, then the MLP, each after its own RMSNorm",
            layer_adds_both_halves,
        ),
        Check(
            "the head is the embedding table exactly when the config ties them",
            head_is_tied_as_configured,
        ),
        Check("the logits equal Llama's", logits_match_llama),
        Check("the cache carries the text on, one token at a time", cache_continues_the_text),
        Check("the loader fills a tied head and names a missing one", loader_ties_and_explains),
    ],
    typical=4.0,
)
