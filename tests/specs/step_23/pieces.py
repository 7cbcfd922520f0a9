"""Step 23's whole model taken apart: what each layer read and returned in one
forward call, compared piece by piece with Llama's (the stream after the
embeddings, after each layer, each layer's slice of the cache), so that a
wrong model is named where it first goes wrong, not by its logits alone."""

from collections.abc import Callable

import numpy as np

from tests import reference_llama as ref
from tests.checker import Context, Fail, tensor, to_numpy
from tests.checker.compare import close

# One layer call: (index of the layer, the stream it read, its key and value
# caches, what it returned).
LayerCall = tuple[int, object, object, object, object]


def recording(layer_class: type, index: int, calls: list[LayerCall]) -> type:
    """`layer_class` that notes each call of layer `index` in `calls`."""

    class Recording(layer_class):
        def forward(self, hidden_states, past_key, past_value, *args, **kwargs):
            out = super().forward(hidden_states, past_key, past_value, *args, **kwargs)
            calls.append((index, hidden_states, past_key, past_value, out))
            return out

    Recording.__name__ = Recording.__qualname__ = layer_class.__name__
    return Recording


def run_recorded(
    ctx: Context, model, ids: np.ndarray, past_keys: np.ndarray, past_values: np.ndarray
) -> tuple[object, list[LayerCall]]:
    """model(ids, past_keys, past_values) and every layer call it made, in order.
    The layers' classes are swapped for recording ones while it runs."""
    layers = list(getattr(getattr(model, "model", None), "layers", None) or [])
    calls: list[LayerCall] = []
    swapped = []
    for index, layer in enumerate(layers):
        original = type(layer)
        try:
            layer.__class__ = recording(original, index, calls)
        except TypeError:  # not a plain Python object: nothing recorded
            continue
        swapped.append((layer, original))
    args = (tensor(ids), tensor(past_keys), tensor(past_values))
    try:
        # The recorded tensors come back with the result: realized in the same run.
        result, _ = ctx.run_lazily("LlamaForCausalLM.forward", lambda: (model(*args), calls))
    finally:
        for layer, original in swapped:
            layer.__class__ = original
    if not isinstance(result, tuple) or len(result) != 3:
        raise Fail(
            f"LlamaForCausalLM.forward returned {type(result).__name__}, expected (logits, "
            "keys, values).",
        )
    return result, calls


def first_output(out, what: str) -> np.ndarray:
    return to_numpy(out[0] if isinstance(out, tuple) else out, what)


def expect_layers_in_order(
    calls: list[LayerCall], num_layers: int, weights: dict, ids: np.ndarray, layer: Callable
) -> np.ndarray:
    """Each layer reads the stream the one before returned (the embeddings for
    layer 0) and returns Llama's layer of it: a Fail naming the first layer
    that does not. `layer(weights, x, prefix)` is the reference layer. Returns
    the stream after the last layer."""
    if [index for index, *_ in calls] != list(range(num_layers)):
        order = ", ".join(str(index) for index, *_ in calls) or "none"
        raise Fail(
            f"One forward call ran the layers {order}; the model has {num_layers}, each run "
            "once, in order.",
            "Loop over every layer of self.layers, in order, each once.",
        )
    embeddings = weights["model.embed_tokens.weight"][ids]
    stream = embeddings
    for index, read, _, _, out in calls:
        got = to_numpy(read, f"the stream layer {index} read")
        if not close(got, stream):
            source = "the embeddings" if index == 0 else f"the stream layer {index - 1} returned"
            also = " It read the embeddings." if index > 0 and close(got, embeddings) else ""
            raise Fail(
                f"Layer {index} read a stream that is not {source}.{also}",
                "Each layer reads the stream the layer before it returned: the loop carries "
                "one stream from layer to layer.",
            )
        stream = layer(weights, stream, f"model.layers.{index}.")
        if not close(first_output(out, f"layer {index}"), stream):
            raise Fail(
                f"Layer {index} read the right stream but returned another than Llama's layer.",
                "The first check runs a layer alone: does it pass?",
            )
    return stream


def expect_own_caches(
    calls: list[LayerCall], past_keys: np.ndarray, past_values: np.ndarray
) -> None:
    """Layer i reads past_keys[i] and past_values[i]: a Fail naming the first that does not."""
    caches = {"key": past_keys, "value": past_values}
    for index, _, key, value, _ in calls:
        for name, given in (("key", key), ("value", value)):
            got = to_numpy(given, f"the {name} cache layer {index} read")
            if close(got, caches[name][index]):
                continue
            found = [
                f"layer {j}'s {other} cache"
                for other, cache in caches.items()
                for j in range(len(cache))
                if close(got, cache[j])
            ]
            read = found[0] if found else "a tensor that is no layer's cache"
            raise Fail(
                f"Layer {index} read {read} as its {name} cache; its own is layer {index}'s "
                f"{name} cache.",
                "Each layer reads its own layer of the cache: the slice of past_keys and "
                "past_values at the layer's index.",
            )


def reference_layer(heads: int, kv_heads: int, theta: float, eps: float) -> Callable:
    def layer(weights: dict, x: np.ndarray, prefix: str) -> np.ndarray:
        return ref.decoder_layer(weights, x, heads, kv_heads, theta, eps, prefix)

    return layer
