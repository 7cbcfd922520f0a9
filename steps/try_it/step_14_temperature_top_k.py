# %% [markdown]
# # Step 14, try it: what temperature and top-k do to the next-token distribution
#
# One fixed vector of logits over a made-up vocabulary of 1,000 tokens, shaped
# like a language model's: a few likely tokens, then a long tail. For each
# setting it draws 5,000 tokens with `sample_next_token` and prints how often the
# five most likely tokens came up, how much went to all the others, and how many
# different tokens were drawn at all.

# %%
import numpy as np

from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(14)  # yours once it passes its check, else the reference
sample_next_token = code.sample_next_token

VOCAB, DRAWS = 1000, 5000


# %%
def made_up_logits() -> np.ndarray:
    """Token i is the (i+1)-th most likely: logits fall off like a log of the rank."""
    rank = np.arange(1, VOCAB + 1)
    noise = np.random.default_rng(0).normal(0.0, 0.05, VOCAB)
    return (4.0 - 1.2 * np.log(rank) + noise).astype(np.float32)


def draw(logits: np.ndarray, **options) -> np.ndarray:
    """DRAWS tokens, each from sample_next_token with these options."""
    rng = np.random.default_rng(0)
    return np.array([sample_next_token(logits, rng=rng, **options) for _ in range(DRAWS)])


def row(label: str, drawn: np.ndarray) -> str:
    share = np.bincount(drawn, minlength=VOCAB) / DRAWS
    top = " ".join(f"{p:5.2f}" for p in share[:5])
    return f"{label:<16} {top}   {share[5:].sum():5.2f}   {len(set(drawn.tolist())):>5}"


# %%
logits = made_up_logits()
settings = {f"temperature {t}": dict(temperature=t) for t in (0.5, 1.0, 2.0)}
settings |= {f"top_k {k}": dict(top_k=k) for k in (1, 5, 50)}
settings["T 2.0, top_k 5"] = dict(temperature=2.0, top_k=5)
drawn = {label: draw(logits, **options) for label, options in settings.items()}

print(f"{'setting':<16} {'tok0  tok1  tok2  tok3  tok4':<29}  rest   distinct")
for label, tokens in drawn.items():
    print(row(label, tokens))

# %% [markdown]
# The head of each distribution: how often each of the 20 most likely tokens
# came up.

# %%
plt = pyplot()
if plt:
    figure, panels = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True, layout="constrained")
    for axes, knob in zip(panels, ("temperature", "top_k"), strict=True):
        for label, tokens in drawn.items():
            if knob in label:
                axes.plot(
                    np.bincount(tokens, minlength=VOCAB)[:20] / DRAWS, marker=".", label=label
                )
        axes.set(xlabel="token (0 = the most likely)", xticks=range(0, 20, 2))
        axes.legend()
        axes.grid(alpha=0.3)
    panels[0].set_ylabel("share of the draws")
    show(figure, "step_14_distributions")
