"""Train the small model's byte-level BPE tokenizer (a few thousand tokens) with the fixture's special tokens.

Same special tokens and ids as ``backend/tiny_model/builder.py`` (<pad>=0 <eos>=1 <bos>=2 <unk> <mask>
<start_of_turn> <end_of_turn>) and the same Gemma-style chat template, so every code path that serves the
fixture serves this model. Digits are split one per token so JSON numbers copy exactly.

    python -m training.tokenizer --pack .train_data/pack.jsonl.gz --out backend/models/small
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator
from pathlib import Path

from ..fixtures.tiny import CHAT_TEMPLATE, SPECIAL_TOKENS
from . import sources

VOCAB_SIZE = 4096


def _corpus(pack: str, python_files: int, seed: int = 0) -> Iterator[str]:
    rng = random.Random(seed)
    docs = [d.text for d in sources.iter_python("train", python_files, salt="tok")]
    docs += [d.text for d in sources.load_pack(pack, "train")]
    rng.shuffle(docs)
    # Chat scaffolding and the markers our prompts use, so they get whole tokens.
    docs.append(Path(CHAT_TEMPLATE).read_text(encoding="utf-8") * 50)
    yield from docs


def train_tokenizer(pack: str, vocab_size: int = VOCAB_SIZE, python_files: int = 3000):
    """Return a ``PreTrainedTokenizerFast`` with the fixture's special tokens and chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(pack, python_files), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
        mask_token="<mask>",
        additional_special_tokens=["<start_of_turn>", "<end_of_turn>"],
    )
    fast.chat_template = Path(CHAT_TEMPLATE).read_text(encoding="utf-8")
    ids = {t: fast.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    assert ids["<pad>"] == 0 and ids["<eos>"] == 1 and ids["<bos>"] == 2, ids
    return fast


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pack", default=".train_data/pack.jsonl.gz")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "models" / "small"))
    ap.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    ap.add_argument("--python-files", type=int, default=3000)
    a = ap.parse_args()
    tok = train_tokenizer(a.pack, a.vocab_size, a.python_files)
    tok.save_pretrained(a.out)
    print(f"saved tokenizer ({len(tok)} tokens) to {a.out}")


if __name__ == "__main__":
    main()
