"""A model folder vLLM can serve with ``--load-format dummy`` and no download: a catalog
``config.json`` and a word-level tokenizer whose every id decodes to one word and encodes back
to the same id, so the benchmark's random prompts keep their exact token counts.

    python3 benchmarks/vllm_sweep/make_model_dir.py meta-llama--Llama-3.1-8B /tmp/model
    python3 benchmarks/vllm_sweep/make_model_dir.py meta-llama--Llama-3.1-70B /tmp/model fp8

The weights are random (vLLM's dummy loader): the step times are the real model's, the text is
not. ``fp8`` makes the folder an FP8 checkpoint's: the config gains the ``quantization_config``
that published FP8 checkpoints of these models carry (``"quant_method": "fp8"``, per-tensor weight
scales, ``ignored_layers: ["lm_head"]``, as in neuralmagic/Meta-Llama-3-70B-Instruct-FP8 and
amd/Llama-3.1-70B-Instruct-FP8-KV), with dynamic activation scales (no calibrated input scales
to fake), so the dummy loader creates FP8 weights directly instead of loading BF16 and
quantizing (a 70B model's BF16 weights, 141 GB, fit no single GPU). Runs where ``tokenizers`` and ``transformers`` are installed (the GPU machine), not in
servecap's own environment.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

CATALOG = Path(__file__).resolve().parents[2] / "src" / "servecap" / "catalog" / "data" / "models"


FP8_QUANTIZATION_CONFIG = {
    "quant_method": "fp8",
    "activation_scheme": "dynamic",
    "ignored_layers": ["lm_head"],
}
QUANTIZATIONS = {"bf16": None, "fp8": FP8_QUANTIZATION_CONFIG}


def main(model: str, out: Path, quantization: str = "bf16") -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    if quantization not in QUANTIZATIONS:
        raise SystemExit(f"quantization: {quantization!r} is not one of {sorted(QUANTIZATIONS)}")
    out.mkdir(parents=True, exist_ok=True)
    config = json.loads((CATALOG / f"{model}.json").read_text())
    quantization_config = QUANTIZATIONS[quantization]
    if quantization_config is None:
        shutil.copy(CATALOG / f"{model}.json", out / "config.json")
    else:
        config["quantization_config"] = quantization_config
        (out / "config.json").write_text(json.dumps(config, indent=2))
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
    print(f"{out}: config.json of {model} ({quantization}), word-level tokenizer of {vocab_size:,} ids")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        raise SystemExit("usage: make_model_dir.py CATALOG_MODEL OUT_DIR [bf16|fp8]")
    main(sys.argv[1], Path(sys.argv[2]), *sys.argv[3:])
