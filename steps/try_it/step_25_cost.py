# %% [markdown]
# # Step 25, try it: what a decoded token costs, three ways
#
# One DeepSeek-V3 attention layer (128 heads, parts of 128 and 64 features,
# values of 128, a latent of 512) decodes one token after n cached ones. For
# each way of doing it, this counts the multiply-adds the attention does and
# the bytes of cache it reads (bfloat16), as the text grows:
#
# - **expand, then attend** (step 24): kv_b_proj turns every cached latent
#   into every head's key and value, then ordinary attention;
# - **an expanded cache**: the same attention, had the cache kept every
#   head's key and value (multi-head attention's cache, computed once);
# - **absorbed** (step 25): kv_b_proj's halves fold into the query and into
#   the output, and the heads read the latents as they are.
#
# Only arithmetic, no model: the counts follow from the shapes. The
# projections of the new token itself (q_a_proj, kv_a_proj_with_mqa, o_proj
# and so on) cost the same in all three and are left out.

# %%
import numpy as np

from steps.try_it.figures import pyplot, show

HEADS, NOPE, ROPE, V, RANK = 128, 128, 64, 128, 512  # DeepSeek-V3
QK = NOPE + ROPE  # one head's query and key: 192 features
BYTES = 2  # bfloat16


def expand_then_attend(n: int) -> tuple[int, int]:
    """Multiply-adds and cache bytes read for one token after n cached ones."""
    expand = n * RANK * HEADS * (NOPE + V)  # kv_b_proj on every cached latent
    attend = n * HEADS * QK + n * HEADS * V  # the scores, then the weighted values
    return expand + attend, n * (RANK + ROPE) * BYTES


def expanded_cache(n: int) -> tuple[int, int]:
    attend = n * HEADS * QK + n * HEADS * V
    return attend, n * HEADS * (QK + V) * BYTES


def absorbed(n: int) -> tuple[int, int]:
    fold = HEADS * NOPE * RANK + HEADS * RANK * V  # key half into the query, value half after
    attend = n * HEADS * (RANK + ROPE) + n * HEADS * RANK  # scores and the weighted latents
    return fold + attend, n * (RANK + ROPE) * BYTES


WAYS = {"expand, then attend": expand_then_attend, "expanded cache": expanded_cache}
WAYS["absorbed"] = absorbed

# %%
print("for each cached token (what one more cached token adds to a decode step):")
print("way                 | multiply-adds | cache bytes read | multiply-adds per byte read")
for name, cost in WAYS.items():
    (macs, read), (macs_1, read_1) = cost(1), cost(2)
    macs, read = macs_1 - macs, read_1 - read
    print(f"{name:19s} | {macs:13,d} | {read:16,d} | {macs / read:27,.1f}")

lengths = (1024, 4096, 32768, 131072)
header = "way                 | " + " | ".join(f"{n:>7,d} tokens" for n in lengths)
print("\none decode step of one layer, multiply-adds in millions:")
print(header)
for name, cost in WAYS.items():
    print(f"{name:19s} | " + " | ".join(f"{cost(n)[0] / 1e6:14,.0f}" for n in lengths))
print("\none decode step of one layer, cache read in MiB:")
print(header)
for name, cost in WAYS.items():
    print(f"{name:19s} | " + " | ".join(f"{cost(n)[1] / 2**20:14,.1f}" for n in lengths))
weights = HEADS * (NOPE + V) * RANK * BYTES
print(
    f"\nkv_b_proj's weight, {weights / 2**20:.0f} MiB, is read by both MLA ways once per step,"
    " for every sequence of a batch at once"
)

# %% [markdown]
# Against the expanded cache, the absorbed decode reads 71 times fewer bytes
# and does more multiply-adds per cached token; against step 24's
# expand-then-attend it reads the same bytes and does far fewer. As curves,
# both axes logarithmic (on the right, the absorbed line lies on step 24's):

# %%
tokens = 2 ** np.arange(7, 18)  # 128 to 131,072
plt = pyplot()
if plt:
    figure, (work, reads) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    for name, cost in WAYS.items():
        macs, read = np.array([cost(int(n)) for n in tokens]).T
        style = dict(marker="o", markersize=3, ls="--" if name == "absorbed" else "-")
        work.plot(tokens, macs, label=name, **style)
        reads.plot(tokens, read / 2**20, label=name, **style)
    for axes, label in ((work, "multiply-adds"), (reads, "cache read (MiB)")):
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set(xlabel="cached tokens", ylabel=label)
        axes.grid(alpha=0.3, which="both")
        axes.legend(fontsize=8)
    work.set_title("work per decoded token, one layer")
    reads.set_title("cache read per decoded token, one layer (bfloat16)")
    show(figure, "step_25_cost")
