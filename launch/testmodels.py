"""The project's own tiny test models for real vLLM on CPU (generated, never downloaded).

Pipeline position: a build step (``make vllm-cpu``), not part of a sweep. It writes two Hugging Face model
directories that ``conf/service/tiny_cpu.yaml`` and the e2e tests serve with real vLLM::

    PYTHONPATH=. .venv-vllm/bin/python -m launch.testmodels models/

``tiny-random``
    A random-weight Llama (2 layers, hidden 128, 2 heads of head_dim 64) with a byte-level BPE tokenizer
    trained on a few lines of text. For throughput and lifecycle tests; its output is noise.

``tiny-chain``
    A Llama whose greedy output is known in advance. Every layer's ``o_proj`` and ``down_proj`` is zero,
    so the residual stream at the last position is the embedding of the last token alone. Chain tokens
    have one-hot embeddings and ``lm_head`` maps each one-hot direction to the next token of a fixed chain::

        count<N>  ->  step<N> step<N-1> ... step1  ->  </think>  ->  The answer is 42  ->  </s>

    Served with ``--reasoning-parser deepseek_r1`` and ``temperature: 0``, a chat request whose last word
    is ``count<N>`` (0 <= N <= :data:`MAX_REASONING_TOKENS`) streams exactly N ``reasoning`` deltas
    (``" step<N>"`` down to ``" step1"``), then the content ``" The answer is 42"`` in
    :data:`CHAIN_CONTENT_TOKENS` deltas, then stops with ``finish_reason: stop`` and
    ``usage.completion_tokens == N + 6`` (:func:`chain_completion_tokens`: ``</think>`` and ``</s>`` count
    as tokens; the parser swallows the lone ``</think>`` delta). vLLM reports
    ``completion_tokens_details.reasoning_tokens == 0`` here (it counts only inside ``<think>...</think>``):
    count reasoning deltas, not that field. With ``max_tokens <= N`` the visible answer never arrives. Any
    other last word ends the reply at once (one ``</s>`` token, no text). The chat template only joins the
    messages' contents, so the user's last word is the prompt's last token. Use :func:`chain_prompt`,
    :data:`CHAIN_PROMPTS` and :func:`expected_chain_output` in tests. Checked with vLLM 0.32 on CPU.

``tiny-head80``
    tiny-random with head_dim 80: served normally, but vLLM refuses ``--kv-cache-dtype fp8`` for it on any
    CPU ("FP8 KV cache requires head_size divisible by 32 on CPU."): an incompatible candidate on every
    machine, whether or not the CPU has the AVX-512 that FP8 KV cache otherwise needs.

This module is imported by the project's tests for its constants; torch, transformers and tokenizers are
imported only when a generator runs (:func:`_lib`): they live in ``.venv-vllm``, not in the project's venv.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

#: Names of the generated model directories (under the output root, e.g. ``models/``).
TINY_RANDOM = "tiny-random"
TINY_CHAIN = "tiny-chain"
TINY_HEAD80 = "tiny-head80"
#: The longest reasoning chain tiny-chain knows (prompt word ``count100``).
MAX_REASONING_TOKENS = 100
#: The content tiny-chain answers after ``</think>``, one token per word.
CHAIN_CONTENT = ("The", "answer", "is", "42")
CHAIN_CONTENT_TOKENS = len(CHAIN_CONTENT)
CHAIN_CONTENT_TEXT = " ".join(CHAIN_CONTENT)
#: Prompt text -> number of reasoning deltas tiny-chain streams before its content (greedy, one request).
CHAIN_PROMPTS: dict[str, int] = {f"count{n}": n for n in (0, 1, 2, 3, 5, 8, 16, 32, 64, MAX_REASONING_TOKENS)}
#: A prompt whose reply is empty (any last word that is not ``count<N>``).
CHAIN_EMPTY_PROMPT = "hello"

HIDDEN = 128
LAYERS = 2
HEADS = 2
HEAD_DIM = 64  # the CPU attention kernel supports 32, 64, 80, ... only; 16 kills the engine on a request
#: tiny-head80's head size: the CPU kernel supports it, but FP8 KV cache needs a multiple of 32 on every CPU.
HEAD80 = 80
INTERMEDIATE = 256
MAX_POSITIONS = 4096
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['content'] }}{% if not loop.last %}\n{% endif %}{% endfor %}"
)
TRAINING_LINES = (
    "The quick brown fox jumps over the lazy dog.",
    "A deployment candidate is measured under shared load before it replaces the retained service.",
    "Tokens stream back one chunk at a time; the first visible answer is what people wait for.",
    "Tensor parallelism splits every layer, data parallelism copies the whole model.",
    "Speculative decoding drafts several tokens and verifies them in one step.",
    "0 1 2 3 4 5 6 7 8 9 10 100 1000 pack my box with five dozen liquor jugs!",
)


def _lib(name: str) -> Any:
    """torch, tokenizers or transformers, imported on use (untyped: they are not in the project's venv)."""
    return importlib.import_module(name)


def chain_prompt(n: int) -> str:
    """The user message that makes tiny-chain reason for exactly ``n`` tokens before answering."""
    if not 0 <= n <= MAX_REASONING_TOKENS:
        raise ValueError(f"tiny-chain reasons for 0..{MAX_REASONING_TOKENS} tokens, not {n}")
    return f"count{n}"


def expected_chain_output(n: int) -> tuple[list[str], str]:
    """Exactly what tiny-chain streams for :func:`chain_prompt` ``(n)``: the reasoning deltas, one per token
    (``[" step5", " step4", ...]``, each with its leading space; a busy vLLM front end sends the tokens it
    has not sent yet as one delta, so a stream may hold fewer, their concatenation the same), and the
    content text (the concatenation of its deltas, ``" The answer is 42"``)."""
    chain_prompt(n)
    return [f" step{i}" for i in range(n, 0, -1)], " " + CHAIN_CONTENT_TEXT


def chain_completion_tokens(n: int) -> int:
    """``usage.completion_tokens`` of a full tiny-chain reply: n steps, ``</think>``, content, ``</s>``."""
    return n + 1 + CHAIN_CONTENT_TOKENS + 1


def _llama_config(vocab_size: int, bos: int, eos: int, head_dim: int = HEAD_DIM) -> Any:

    return _lib("transformers").LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        head_dim=head_dim,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=False,
        bos_token_id=bos,
        eos_token_id=eos,
        pad_token_id=eos,
        torch_dtype="float32",
    )


def _save_tokenizer(tok: Any, out: Path, extra: dict[str, str]) -> None:

    fast = _lib("transformers").PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="</s>", **extra
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = MAX_POSITIONS
    fast.save_pretrained(str(out))


def build_tiny_random(out: Path, head_dim: int = HEAD_DIM) -> None:
    """A random-weight 2-layer Llama with a BPE tokenizer trained on :data:`TRAINING_LINES`."""
    torch, tk = _lib("torch"), _lib("tokenizers")
    models, pre_tokenizers, decoders, trainers = tk.models, tk.pre_tokenizers, tk.decoders, tk.trainers

    tok = tk.Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(TRAINING_LINES) * 4, trainer=trainer)
    _save_tokenizer(tok, out, {})
    torch.manual_seed(0)
    config = _llama_config(tok.get_vocab_size(), tok.token_to_id("<s>"), tok.token_to_id("</s>"), head_dim)
    model = _lib("transformers").LlamaForCausalLM(config)
    model.save_pretrained(str(out))


def chain_vocab() -> list[str]:
    """tiny-chain's vocabulary in id order (word tokens carry the Metaspace marker ``▁``)."""
    words = ["<unk>", "<s>", "</s>", "<think>", "</think>"]
    words += [f"▁step{i}" for i in range(1, MAX_REASONING_TOKENS + 1)]
    words += [f"▁count{n}" for n in range(MAX_REASONING_TOKENS + 1)]
    words += [f"▁{word}" for word in CHAIN_CONTENT]
    words += [f"▁{word}" for word in ("hello", "world", "please", "answer", "count")]
    return list(dict.fromkeys(words))


def chain_edges(vocab: list[str]) -> tuple[dict[str, int], dict[int, int]]:
    """(token -> one-hot direction, direction -> id of the next token): the greedy walk of tiny-chain."""
    ids = {word: i for i, word in enumerate(vocab)}
    direction: dict[str, int] = {}
    successor: dict[int, int] = {}

    def edge(dim: int, nxt: str) -> None:
        successor[dim] = ids[nxt]

    default = 0
    edge(default, "</s>")  # any other last token: end at once
    for i in range(1, MAX_REASONING_TOKENS + 1):
        direction[f"▁step{i}"] = i
        edge(i, f"▁step{i - 1}" if i > 1 else "</think>")
    think_end = MAX_REASONING_TOKENS + 1
    direction["</think>"] = think_end
    content = [f"▁{word}" for word in CHAIN_CONTENT]
    edge(think_end, content[0])
    for j, word in enumerate(content):
        direction[word] = think_end + 1 + j
        edge(think_end + 1 + j, content[j + 1] if j + 1 < len(content) else "</s>")
    eos = think_end + 1 + len(content)
    direction["</s>"] = eos
    edge(eos, "</s>")  # with ignore_eos the model keeps emitting </s>
    start_max = eos + 1
    edge(start_max, f"▁step{MAX_REASONING_TOKENS}")
    for n in range(MAX_REASONING_TOKENS + 1):
        # count<n> shares the direction of the token whose successor is step<n> (or </think> for n = 0).
        direction[f"▁count{n}"] = start_max if n == MAX_REASONING_TOKENS else n + 1
    if start_max >= HIDDEN:
        raise ValueError(f"tiny-chain needs {start_max + 1} one-hot directions but hidden size is {HIDDEN}")
    return direction, successor


def build_tiny_chain(out: Path) -> None:
    """The known-output model: see the module docstring for the chain it walks."""
    torch, tk = _lib("torch"), _lib("tokenizers")
    models, pre_tokenizers, decoders, AddedToken = tk.models, tk.pre_tokenizers, tk.decoders, tk.AddedToken

    vocab = chain_vocab()
    tok = tk.Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ("<unk>", "<s>", "</s>")])
    # <think> and </think> are ordinary (non-special) tokens so they appear in the text the parser splits.
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ("<think>", "</think>")])
    _save_tokenizer(tok, out, {})

    ids = {word: i for i, word in enumerate(vocab)}
    direction, successor = chain_edges(vocab)
    torch.manual_seed(0)
    model = _lib("transformers").LlamaForCausalLM(_llama_config(len(vocab), ids["<s>"], ids["</s>"]))
    with torch.no_grad():
        embed = torch.zeros(len(vocab), HIDDEN)
        for i, word in enumerate(vocab):
            embed[i, direction.get(word, 0)] = 1.0
        model.model.embed_tokens.weight.copy_(embed)
        head = torch.zeros(len(vocab), HIDDEN)
        for dim, nxt in successor.items():
            head[nxt, dim] = 1.0
        model.lm_head.weight.copy_(head)
        model.model.norm.weight.fill_(1.0)
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    model.save_pretrained(str(out))
    _check_chain(model, tok, ids)


def _check_chain(model: Any, tok: Any, ids: dict[str, int]) -> None:
    """Walk the chain greedily with transformers before vLLM ever sees the model."""
    torch = _lib("torch")

    for prompt, n in CHAIN_PROMPTS.items():
        tokens = tok.encode(prompt).ids
        produced: list[int] = []
        with torch.no_grad():
            for _ in range(n + CHAIN_CONTENT_TOKENS + 2):
                logits = model(torch.tensor([tokens + produced])).logits[0, -1]
                produced.append(int(logits.argmax()))
                if produced[-1] == ids["</s>"]:
                    break
        reasoning, _ = expected_chain_output(n)
        want = [ids[f"▁{w.strip()}"] for w in reasoning] + [ids["</think>"]]
        want += [ids[f"▁{w}"] for w in CHAIN_CONTENT] + [ids["</s>"]]
        if produced != want:
            raise RuntimeError(f"tiny-chain walked {produced} for {prompt!r}, expected {want}")


def build_tiny_head80(out: Path) -> None:
    """tiny-random with head_dim 80: served fine, but vLLM refuses an FP8 KV cache for it on any CPU."""
    build_tiny_random(out, head_dim=HEAD80)


BUILDERS = {TINY_RANDOM: build_tiny_random, TINY_CHAIN: build_tiny_chain, TINY_HEAD80: build_tiny_head80}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("root", type=Path, help="output directory, e.g. models/")
    parser.add_argument("--force", action="store_true", help="rebuild models that already exist")
    args = parser.parse_args(argv)
    for name, build in BUILDERS.items():
        out = args.root / name
        stamp = out / "gauntlet-testmodel.json"
        if stamp.is_file() and not args.force:
            print(f"{out}: already built")
            continue
        out.mkdir(parents=True, exist_ok=True)
        build(out)
        stamp.write_text(json.dumps({"name": name, "generator": "launch.testmodels"}) + "\n")
        print(f"{out}: built")
    return 0


if __name__ == "__main__":
    sys.exit(main())
