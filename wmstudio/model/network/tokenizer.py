"""The world-model tokenizer: byte-level BPE with one token per digit and the canvas's special tokens.

Digits are split one per token so any number is composable and number spans can be constrained
character by character; the special tokens are stored in the tokenizer files so that
`AutoTokenizer.from_pretrained(dir)` restores them."""

from __future__ import annotations

from typing import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

from wmstudio.world.prompt.render import PromptBudget

MASK_TOKEN = "<|mask|>"  # a masked canvas slot, still to be denoised
PAD_TOKEN = "<|pad|>"  # span filler removed after sampling (variable-length values); also batch padding
BOS_TOKEN = "<|bos|>"  # first token of every prompt
EOS_TOKEN = "<|eos|>"  # end of an autoregressive response
SEP_TOKEN = "<|sep|>"  # between the prompt and the response canvas
SPECIAL_TOKENS = (MASK_TOKEN, PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, SEP_TOKEN)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 4096, min_frequency: int = 2) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on `texts`, digits split one per token, with SPECIAL_TOKENS.

    Every byte is in the base alphabet, so any text encodes even with a tiny training set."""
    model = Tokenizer(models.BPE())
    model.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    model.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    model.train_from_iterator((text for text in texts if text), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=model,
        mask_token=MASK_TOKEN,
        pad_token=PAD_TOKEN,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        sep_token=SEP_TOKEN,
        clean_up_tokenization_spaces=False,
        model_max_length=1_000_000,
    )


PLAIN_BACKENDS = ("TokenizersBackend", "PreTrainedTokenizerFast")  # transformers 5's generic class, and 4's


def encode_text(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    """Token ids of `text` with no special tokens added (the canvas tokenizes its segments this way).

    A plain tokenizers-backed tokenizer (ours; no model-specific Python around it) is asked through its Rust
    backend directly: the same ids without the wrapper's per-call overhead. Other classes keep their own path."""
    if type(tokenizer).__name__ in PLAIN_BACKENDS:
        return tokenizer.backend_tokenizer.encode(text, add_special_tokens=False).ids
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt_text: str, max_tokens: int) -> list[int]:
    """`[bos] + prompt + [sep]` in at most `max_tokens` ids, cutting the prompt's middle if it is too long.

    Training rows and generation both use this, so the model always sees the same framing. Both ends matter: our
    sections put the call first and the prediction target last; a chat row's user turn (`State:`, `Action:`) is
    last. A prompt the renderer budgeted never needs the cut; one whose always-shown parts are over the budget
    loses the middle of the called tool's schema instead of the call."""
    if max_tokens < 3:
        raise ValueError(f"max_tokens={max_tokens} leaves no room for a prompt: allow at least 3 tokens")
    bos, sep = tokenizer.bos_token_id, tokenizer.sep_token_id
    if bos is None or sep is None:
        raise ValueError("this tokenizer has no bos/sep token: use a world-model tokenizer (train_tokenizer)")
    body = encode_text(tokenizer, prompt_text)
    room = max_tokens - 2
    if len(body) > room:
        head = room // 2
        body = body[:head] + body[len(body) - (room - head):]
    return [bos, *body, sep]


DEFAULT_PROMPT_TOKENS = 768  # what a small world model reads of a prompt (call-local: the call, state, turns)


def prompt_budget(tokenizer: PreTrainedTokenizerBase, max_positions: int, canvas_tokens: int,
                  prompt_tokens: int = DEFAULT_PROMPT_TOKENS) -> PromptBudget:
    """The budget a prompt is rendered within beside a canvas of `canvas_tokens`: `prompt_tokens`, less when the
    context cannot hold both, counted in `tokenizer`'s tokens with room for `[bos]` and `[sep]`. The one
    definition training and generation share."""
    tokens = min(prompt_tokens, max_positions - canvas_tokens) - 2
    return PromptBudget(max(1, tokens), lambda text: len(encode_text(tokenizer, text)))
