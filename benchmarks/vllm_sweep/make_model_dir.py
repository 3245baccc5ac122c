"""A model folder vLLM can serve with ``--load-format dummy`` and no download: a catalog
``config.json`` and a word-level tokenizer whose every id decodes to one word and encodes back
to the same id, so the benchmark's random prompts keep their exact token counts.

    python3 benchmarks/vllm_sweep/make_model_dir.py meta-llama--Llama-3.1-8B /tmp/model

The weights are random (vLLM's dummy loader): the step times are the real model's, the text is
not. Runs where ``tokenizers`` and ``transformers`` are installed (the GPU machine), not in
servecap's own environment.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

CATALOG = Path(__file__).resolve().parents[2] / "src" / "servecap" / "catalog" / "data" / "models"


def main(model: str, out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    out.mkdir(parents=True, exist_ok=True)
    config = json.loads((CATALOG / f"{model}.json").read_text())
    shutil.copy(CATALOG / f"{model}.json", out / "config.json")
    vocab_size = int(config["vocab_size"])
    specials = ["<unk>", "<s>", "</s>"]
    vocab = {tok: i for i, tok in enumerate(specials)}
    vocab.update({f"w{i}": i for i in range(len(specials), vocab_size)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    tok.add_special_tokens(specials)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "unk_token": "<unk>",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "model_max_length": int(config.get("max_position_embeddings", 8192)),
                "add_bos_token": False,
            }
        )
    )
    print(f"{out}: config.json of {model}, word-level tokenizer of {vocab_size:,} ids")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
