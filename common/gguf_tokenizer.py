"""A GGUF file's tokenizer and chat template, built from its metadata.

A GGUF file carries its tokenizer as metadata rather than as a separate file:
`tokenizer.ggml.tokens` (the vocabulary, an id's string at its index),
`tokenizer.ggml.merges` (byte-level BPE's merge rules, "Ġ t" = merge "Ġ" and
"t", earliest first), `tokenizer.ggml.token_type` (3 marks a control token
such as <|im_end|>, which the text may name and which is never split),
`tokenizer.ggml.pre` (which split into words comes before the merges), the
special ids, and `tokenizer.chat_template` (Jinja2, as transformers uses it).

This module builds the same byte-level BPE as GPT-2's from those lists with the
`tokenizers` library, and renders the chat template with Jinja2. It reads the
metadata as a dict (step 29's reader gives one), so it does not read files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from common.cli import Failure

CONTROL = 3  # tokenizer.ggml.token_type of a control token (ggml's LLAMA_TOKEN_TYPE_CONTROL)

# tokenizer.ggml.pre -> how a text is split into words before the merges
# (llama.cpp's pre-tokenizer types; only those read here are listed): GPT-2's
# own split ("gpt2"), the same after each digit is made a word of its own
# ("digits"), or a regex's matches.
# Llama 3's: a contraction of any case, a run of letters with one other
# character before it, numbers three digits at a time, punctuation with its
# line breaks, then whitespace. Qwen2's is the same with one digit at a time.
LLAMA3_WORDS = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_WORDS = LLAMA3_WORDS.replace(r"\p{N}{1,3}", r"\p{N}")
PRE_TOKENIZERS = {
    "default": "gpt2",
    "gpt2": "gpt2",
    "smollm": "digits",  # SmolLM and SmolLM2
    "llama-bpe": LLAMA3_WORDS,  # Llama 3 and 3.x
    "qwen2": QWEN2_WORDS,  # Qwen2 and Qwen2.5
}


class GGUFTokenizer:
    """Text to ids and back for a GGUF file's byte-level BPE vocabulary, and
    its chat template; `source` names the file in every error."""

    def __init__(self, metadata: Mapping[str, object], source: str) -> None:
        self.source = source
        self.metadata = metadata
        self._tokenizer = build_tokenizer(metadata, source)
        self.bos_id = optional_id(metadata, "tokenizer.ggml.bos_token_id")
        self.eos_id = optional_id(metadata, "tokenizer.ggml.eos_token_id")
        # llama.cpp puts the BOS token before a prompt when the file asks for it.
        self.add_bos = bool(metadata.get("tokenizer.ggml.add_bos_token", False))

    def encode(self, text: str, *, add_bos: bool | None = None) -> list[int]:
        """`text`'s ids; control tokens written in the text ("<|im_start|>") are
        one id each. The BOS id first when the file asks for it (or `add_bos`)."""
        ids = self._tokenizer.encode(text, add_special_tokens=False).ids
        first = self.add_bos if add_bos is None else add_bos
        if first and self.bos_id is not None and ids[:1] != [self.bos_id]:
            ids = [self.bos_id, *ids]
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """The text of `ids`, control tokens left out."""
        return self._tokenizer.decode(list(ids), skip_special_tokens=True)

    @property
    def has_chat_template(self) -> bool:
        return isinstance(self.metadata.get("tokenizer.chat_template"), str)

    def chat_prompt(self, user_message: str) -> str:
        """The chat template rendered for one user message, ending where the
        assistant's answer begins."""
        if not self.has_chat_template:
            raise Failure(
                f"{self.source} has no chat template (tokenizer.chat_template): it is not an "
                "instruct model's file; drop --chat."
            )
        try:
            import jinja2
            from jinja2.sandbox import ImmutableSandboxedEnvironment
        except ImportError:
            raise Failure("--chat needs Jinja2: pip install jinja2") from None
        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        try:
            template = environment.from_string(self.metadata["tokenizer.chat_template"])
            return template.render(
                messages=[{"role": "user", "content": user_message}],
                add_generation_prompt=True,
                bos_token=self.token_text(self.bos_id),
                eos_token=self.token_text(self.eos_id),
            )
        except jinja2.TemplateError as error:
            raise Failure(f"{self.source}'s chat template cannot be rendered: {error}") from None

    def token_text(self, token_id: int | None) -> str:
        return "" if token_id is None else self._tokenizer.id_to_token(token_id) or ""


def word_split(split: str):
    """The `tokenizers` pre-tokenizer of a PRE_TOKENIZERS value: the words,
    then each word's bytes as byte-level BPE's characters."""
    from tokenizers import Regex, pre_tokenizers

    if split in ("gpt2", "digits"):
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        if split == "gpt2":
            return byte_level
        digits = pre_tokenizers.Digits(individual_digits=True)
        return pre_tokenizers.Sequence([digits, byte_level])
    words = pre_tokenizers.Split(Regex(split), behavior="isolated")
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    return pre_tokenizers.Sequence([words, byte_level])


def optional_id(metadata: Mapping[str, object], key: str) -> int | None:
    value = metadata.get(key)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def build_tokenizer(metadata: Mapping[str, object], source: str):
    """The `tokenizers` library's byte-level BPE from the metadata's lists;
    a vocabulary kind this module does not build is a Failure naming it."""
    from tokenizers import AddedToken, Tokenizer, decoders
    from tokenizers.models import BPE

    kind = metadata.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise Failure(
            f"{source}'s tokenizer is {kind!r} (tokenizer.ggml.model); only byte-level BPE "
            "('gpt2', as GPT-2, SmolLM2, Llama 3 and Qwen2 use) is read here."
        )
    pre = metadata.get("tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise Failure(
            f"{source} splits words before BPE the {pre!r} way (tokenizer.ggml.pre); "
            f"known here: {', '.join(sorted(PRE_TOKENIZERS))}."
        )
    tokens = metadata.get("tokenizer.ggml.tokens")
    merges = metadata.get("tokenizer.ggml.merges")
    if not isinstance(tokens, list) or not isinstance(merges, list):
        raise Failure(f"{source} has no tokenizer.ggml.tokens or tokenizer.ggml.merges list.")
    vocab = {token: index for index, token in enumerate(tokens)}
    pairs = [tuple(rule.split(" ", 1)) for rule in merges]
    tokenizer = Tokenizer(BPE(vocab=vocab, merges=pairs, fuse_unk=False))
    tokenizer.pre_tokenizer = word_split(PRE_TOKENIZERS[pre])
    tokenizer.decoder = decoders.ByteLevel()
    types = metadata.get("tokenizer.ggml.token_type") or []
    control = [tokens[index] for index, kind in enumerate(types) if kind == CONTROL]
    tokenizer.add_special_tokens([AddedToken(text, special=True) for text in control])
    return tokenizer
