"""Step 22's checks of the rolling buffer: ring_write, ring_read and ring_decode."""

from collections.abc import Callable

import numpy as np

from tests import reference_llama as ref
from tests.checker import Context, Fail, expect_close, expect_shape, tensor, to_numpy
from tests.checker.compare import close

from .window import BATCH, HEAD_DIM, HEADS, WINDOW, qkv


def ring(num_written: int, values: np.ndarray) -> np.ndarray:
    """The rolling buffer after writing tokens 0 .. num_written - 1 of `values`."""
    buffer = np.zeros((BATCH, HEADS, WINDOW, HEAD_DIM), np.float32)
    for position in range(num_written):
        buffer[:, :, position % WINDOW] = values[:, :, position]
    return buffer


def wrong_slots(window: int) -> dict[str, Callable[[int], int]]:
    """{what is wrong: the slot that mistake gives position p}, for a buffer of `window` slots."""
    return {
        "The slot is one late: position p goes to slot p % window, so position 0 takes slot "
        f"0 and position {window} slot 0 again.": lambda p: (p + 1) % window,
        "The slot is one early: position p goes to slot p % window, so position 0 takes slot "
        f"0 and position {window} slot 0 again.": lambda p: (p - 1) % window,
        f"The slots are filled from the last one down: position 0 took slot {window - 1}. "
        "They fill from slot 0 up and wrap round to slot 0 after the last, so the oldest "
        "token always sits in the slot the next one will overwrite, where ring_read starts.": (
            lambda p: (window - 1 - p) % window
        ),
        "The slot stops at the last one once the buffer is full, so every later token "
        "overwrites the newest, the one just written, and the oldest stays. After the last "
        "slot the slot wraps round to slot 0.": lambda p: min(p, window - 1),
        "The slot is position // window, how many times the buffer has wrapped; the slot is "
        "the remainder of that division.": lambda p: p // window,
        f"The slot is the position modulo window - 1 = {window - 1}: the buffer has window = "
        f"{window} slots, int(buffer.shape[2]), since the new token is stored in it before "
        "the read.": lambda p: p % (window - 1),
    }


def ring_writes_slots(ctx: Context) -> None:
    """Each position written into the right buffer (ring(position, values)),
    so that every write is judged alone; the first wrong one is named slot by
    slot, and the slot rule the writes follow, if it is a known wrong one."""
    write = ctx.get("ring_write")
    values = ctx.normal(BATCH, HEADS, 2 * WINDOW + 1, HEAD_DIM)
    landed: list[int | None] = []  # the slot each position went to
    first_wrong: tuple[int, np.ndarray] | None = None
    for position in range(values.shape[2]):
        new = values[:, :, position : position + 1]
        try:
            got = ctx.call(
                "ring_write", write, tensor(ring(position, values)), tensor(new), position
            )
        except Fail as failure:
            if first_wrong or "out of range" not in failure.message:
                break
            raise past_the_buffer(position, landed, failure) from failure
        what = f"the buffer after ring_write(position={position})"
        array = to_numpy(got, what)
        held = positions_held(array, values, position + 1) if array.ndim == 4 else []
        places = [place for place, p in enumerate(held) if p == position]
        landed.append(places[0] if len(places) == 1 else None)
        if first_wrong is None and not close(array, ring(position + 1, values)):
            first_wrong = (position, array)
    if first_wrong is None:
        return
    position, array = first_wrong
    expect_shape(
        array,
        (BATCH, HEADS, array.shape[2] if array.ndim == 4 else WINDOW, HEAD_DIM),
        f"the buffer after ring_write(position={position})",
        "The buffer is [batch, heads, window, head_dim]: a token replaces one slot along axis 2.",
    )
    raise Fail(wrong_write(position, array, values), slot_rule_hint(landed))


def wrong_write(position: int, array: np.ndarray, values: np.ndarray) -> str:
    """Where position went, and what each slot holds against what it should."""
    held = positions_held(array, values, position + 1)
    want = slot_positions(position + 1)
    places = [place for place, p in enumerate(held) if p == position]
    keeps = f"a window of {WINDOW} keeps it at slot {position} % {WINDOW} = {position % WINDOW}"
    if len(held) != WINDOW:
        said = (
            f"ring_write(position={position}) returned a buffer of {len(held)} slots, not {WINDOW}"
        )
    elif places == [position % WINDOW]:
        said = f"ring_write(position={position}) stored position {position} in its slot but changed others"
    elif places:
        where = " and ".join(str(place) for place in places)
        said = f"ring_write(position={position}) wrote position {position} at slot {where}; {keeps}"
    else:
        said = f"ring_write(position={position}) stored position {position} in no slot; {keeps}"
    legend = " (?: no token written there)" if None in held + want else ""
    return (
        f"{said}. Slot by slot the buffer holds positions {shown(held)}; it should hold "
        f"{shown(want)}{legend}."
    )


def slot_rule_hint(landed: list[int | None]) -> str:
    """The known wrong slot rule every observed write follows, else where each went."""
    for explanation, slot in wrong_slots(WINDOW).items():
        if all(got == slot(p) for p, got in enumerate(landed)):
            return explanation
    if landed == [p % WINDOW for p in range(len(landed))]:
        return (
            "Each position lands in its slot, p % window, but the buffer around it changed: "
            f"rebuild it from the slots before that slot, the new token and the slots after "
            f"it, {WINDOW} slots in all, each other slot keeping its token."
        )
    slots = ", ".join("?" if s is None else str(s) for s in landed)
    return (
        f"Positions 0 to {len(landed) - 1} went to slots {slots}; with window {WINDOW} they go "
        f"to {', '.join(str(p % WINDOW) for p in range(len(landed)))}. Position p replaces "
        "position p - window, the token that just left the window, and the other slots keep "
        "theirs."
    )


def past_the_buffer(position: int, landed: list[int | None], failure: Fail) -> Fail:
    """MAX refused a slice beyond the buffer: the slot asked for is window or more."""
    before = ""
    if landed:
        slots = ", ".join("?" if s is None else str(s) for s in landed)
        before = f" Positions 0 to {position - 1} went to slots {slots}."
    return Fail(
        f"ring_write(position={position}) asked for a slot past the buffer's {WINDOW} slots "
        f"(0 to {WINDOW - 1}), and MAX refused the slice; a window of {WINDOW} keeps position "
        f"{position} at slot {position} % {WINDOW} = {position % WINDOW}.{before} MAX said: "
        f"{failure.message}",
        f"A buffer of {WINDOW} slots has no slot {position}: the slot wraps round to slot 0 "
        "after the last, the position modulo the window, which is the buffer's length along "
        "axis 2.",
    )


def positions_held(got: np.ndarray, values: np.ndarray, written: int) -> list[int | None]:
    """Which of the tokens written so far each place along the sequence axis holds."""
    held = []
    for place in range(got.shape[2]):
        found = [p for p in range(written) if close(got[:, :, place], values[:, :, p])]
        held.append(found[-1] if found else None)
    return held


def slot_positions(written: int) -> list[int | None]:
    """The position each slot of the buffer holds after `written` tokens (None: none yet)."""
    return [
        max((p for p in range(written) if p % WINDOW == slot), default=None)
        for slot in range(WINDOW)
    ]


def shown(held: list[int | None]) -> str:
    """[2, 3, 4], a place that holds none of the tokens written shown as ?."""
    return "[" + ", ".join("?" if p is None else str(p) for p in held) + "]"


def ring_reads_oldest_first(ctx: Context) -> None:
    read = ctx.get("ring_read")
    values = ctx.normal(BATCH, HEADS, 2 * WINDOW + 2, HEAD_DIM)
    for num_seen in (2, WINDOW, WINDOW + 2, 2 * WINDOW + 1):
        buffer = ring(num_seen, values)
        kept = min(num_seen, WINDOW)
        want = values[:, :, num_seen - kept : num_seen]
        what = f"ring_read after {num_seen} tokens (window {WINDOW})"
        got = ctx.call("ring_read", read, tensor(buffer), num_seen)
        array = expect_shape(
            got,
            want.shape,
            what,
            f"The last min(num_seen, window) tokens: {kept} here.",
        )
        if close(array, want):
            continue
        held = positions_held(array, values, num_seen)
        window = list(range(num_seen - kept, num_seen))
        raise Fail(
            f"{what} returned positions {shown(held)}; the window holds {window}, oldest first.",
            read_hint(held, window, num_seen),
        )


def read_hint(held: list[int | None], window: list[int], num_seen: int) -> str:
    """Where the learner's read started, and where the oldest token sits."""
    oldest = num_seen % WINDOW
    if num_seen <= WINDOW or None in held or sorted(held) != window:
        return (
            f"After {num_seen} tokens the slots hold positions {shown(slot_positions(num_seen))}: "
            f"read the last "
            f"{len(window)} of them, oldest first."
        )
    start = held[0] % WINDOW
    order = " (slot order)" if start == 0 else ""
    return (
        f"The read starts at slot {start}{order}; after {num_seen} tokens the oldest token, "
        f"position {window[0]}, sits in slot {num_seen} % {WINDOW} = {oldest}: read from "
        "there round to the slot before it."
    )


SEES_ITSELF = (
    "The new token does not see itself: store it in the buffers first, then read the "
    "position + 1 tokens written so far."
)


def decodes_like_full_attention(ctx: Context) -> None:
    decode = ctx.get("ring_decode")
    length = 2 * WINDOW + 1
    q, k, v = qkv(ctx, length)
    want = ref.attention(q, k, v, 0, window=WINDOW)
    buffer_k = buffer_v = np.zeros((BATCH, HEADS, WINDOW, HEAD_DIM), np.float32)
    for p in range(length):
        one = [tensor(np.ascontiguousarray(t[:, :, p : p + 1])) for t in (q, k, v)]
        result = ctx.run_lazily("ring_decode", decode, *one, tensor(buffer_k), tensor(buffer_v), p)
        if not isinstance(result, tuple) or len(result) != 3:
            raise Fail(
                f"ring_decode returned {type(result).__name__}, expected (output, key "
                "buffer, value buffer).",
            )
        out, buffer_k, buffer_v = result
        for name, got, full in (("key", buffer_k, k), ("value", buffer_v, v)):
            expect_buffer(got, full, p, name)
        what = f"ring_decode's output for the token at position {p}"
        mistakes = {}
        if 0 < p < WINDOW:
            older = ref.attention(q[:, :, p : p + 1], k[:, :, :p], v[:, :, :p], p - 1)
            mistakes[SEES_ITSELF] = older
        hint = (
            "At position 0 the new token is the only one to attend to, so the output is its "
            "own value: is it stored before the buffers are read, and read with them?"
            if p == 0
            else "Both buffers hold the right tokens after the write: look at what is read "
            "from them (the tokens written so far, the new one included, oldest first) and "
            "at the scores."
        )
        expect_close(out, want[:, :, p : p + 1], what, mistakes, hint, model="Mistral")
        buffer_k = to_numpy(buffer_k, "the key buffer")
        buffer_v = to_numpy(buffer_v, "the value buffer")


def expect_buffer(got, full: np.ndarray, p: int, name: str) -> None:
    """ring_decode's buffer after the token at position p: the token written to each slot."""
    what = f"ring_decode's {name} buffer after position {p}"
    array = expect_shape(
        got,
        (BATCH, HEADS, WINDOW, HEAD_DIM),
        what,
        f"The buffer keeps its {WINDOW} slots: return the buffer ring_write gave back.",
    )
    want = ring(p + 1, full)
    if close(array, want):
        return
    raise Fail(
        f"{what} holds positions {shown(positions_held(array, full, p + 1))} in its slots; "
        f"it should hold {shown(slot_positions(p + 1))}.",
        f"Store the new {name} at its position with ring_write, and return the buffer it "
        "gives back.",
    )
