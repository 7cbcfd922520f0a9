"""Checks for step 14: sampling and text generation."""

from tests.checker import Check, Step

from .generation import (
    crop_is_exact,
    greedy_matches_reference,
    long_prompt_is_cropped,
    sampling_follows_sample_next_token,
    sampling_is_seeded,
    streams_text,
)
from .sampling import (
    distribution,
    large_logits_do_not_overflow,
    never_outside_top_k,
    reproducible,
    top_k_keeps_k,
    top_k_on_gpt2_vocabulary,
    top_k_one_is_greedy,
)

STEP = Step(
    number=14,
    typical=3,  # seconds, slowest check: the 6,000-draw distribution and 50,257-token top-k checks
    required={"sample_next_token": [], "generate_tokens": [], "generate_text": []},
    checks=[
        Check("top_k=k keeps the k largest logits: not k-1, not k+1", top_k_keeps_k),
        Check("top_k=1 always picks the most likely token", top_k_one_is_greedy),
        Check("a token outside the top k is never drawn", never_outside_top_k),
        Check("draws follow softmax(logits / temperature)", distribution),
        Check(
            "top-k keeps exactly the k largest of 50,257 logits",
            top_k_on_gpt2_vocabulary,
        ),
        Check(
            "logits near 1000 do not overflow the softmax",
            large_logits_do_not_overflow,
        ),
        Check("the same seed gives the same draws", reproducible),
        Check("greedy generation matches GPT-2's", greedy_matches_reference),
        Check("sampling is reproducible with a seed", sampling_is_seeded),
        Check(
            "sampling passes temperature and top_k on to sample_next_token",
            sampling_follows_sample_next_token,
        ),
        Check("the model sees exactly the last context_length tokens", crop_is_exact),
        Check(
            "a prompt filling the context window still generates",
            long_prompt_is_cropped,
        ),
        Check("generate_text streams the new text", streams_text),
    ],
)
