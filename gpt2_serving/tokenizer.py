"""MAX's text tokenizer, with the request checks OpenAI's API makes.

MAX 26.7 quietly accepts `max_tokens: 0` and clips a `max_tokens` that runs
past the context window (pipelines/lib/tokenizer.py, max_tokens_to_generate).
An InputError raised while the request becomes a context is answered by MAX's
router as HTTP 400 with our message (serve/router/openai_routes.py).
"""

from __future__ import annotations

from max.pipelines.context import TextContext
from max.pipelines.context.exceptions import InputError
from max.pipelines.lib import TextTokenizer


class GPT2Tokenizer(TextTokenizer):
    async def new_context(self, request) -> TextContext:
        asked = request.sampling_params.max_new_tokens
        if asked is not None and asked < 1:
            raise InputError(f"max_tokens must be at least 1, not {asked}.")
        context = await super().new_context(request)
        prompt_length = context.tokens.prompt_length
        if asked is not None and self.max_length and prompt_length + asked > self.max_length:
            raise InputError(
                f"The prompt ({prompt_length} tokens) plus max_tokens ({asked}) is more than "
                f"the model's context window of {self.max_length} tokens."
            )
        return context
