"""Tiny random-weight vision-language models built from configs, one per architecture users run.

No package ships a vision-language model small enough for two CPU cores, and nothing may be
downloaded. Each model here has its family's real code paths: the family's model class, its
processor class (image processor, image-token expansion), a tokenizer of its family's kind
(byte-level BPE for Qwen and Llama, SentencePiece-style BPE with byte fallback for Gemma) carrying
the family's special tokens, and a chat template in the family's own format. Weights are
random: the models exercise the backends (prompt building, image tokens, prefix reuse,
constrained verdicts), never the quality of an answer.

:func:`tiny_model` builds a family once per machine and caches it under a key of this file's
source and the transformers version, so an edited builder or a new transformers never reuses a
stale folder. Builders are registered in :data:`FAMILIES`; the compatibility table in the README
lists them (tests/backends/test_architectures.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
SEED = 0
VOCAB_SIZE = 1024  # trained BPE size before the family's special tokens


@dataclass(frozen=True)
class Family:
    """One architecture: what users run it as, and how the tiny one is made."""

    name: str  # the key used by tests and the table
    architecture: str  # the model class (config.architectures[0])
    runs_as: str  # the real models this stands for
    build: Callable[[Path], None]
    # Why the pinned vLLM cannot run it (None: it can).
    vllm_unsupported: str | None = None


def _corpus() -> list[str]:
    """Text to train the tiny tokenizers on: the sample's questions and rubrics, and the judge's
    instructions (so prompts tokenise into words, not bytes, as with a real tokenizer)."""
    root = HERE.parents[1] / "gamut_hf"
    lines = (root / "data" / "gamut-sample" / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    lines += (root / "evaluation" / "judge.py").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip()]


def _bpe(
    special: list[str], *, sentencepiece: bool = False, prefix_space: bool = True, split: str | None = None
) -> Any:
    """A BPE ``tokenizers.Tokenizer`` trained on the corpus, with ``special`` as special tokens:
    byte-level (GPT-2 style: Qwen, Llama, SmolLM; ``split``, a regex, splits words first as
    tiktoken-style tokenizers do, Llama 3 and 4) or, with ``sentencepiece``, Metaspace with byte
    fallback (Gemma, Llama 2, Mistral; ``prefix_space=False`` for Gemma, whose SentencePiece model
    adds no dummy prefix)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    if sentencepiece:
        tokenizer = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
        tokenizer.normalizer = normalizers.Replace(" ", "▁")
        prepend = "first" if prefix_space else "never"
        # Trained word by word (SentencePiece's pieces never span a space: "▁the"), then run
        # unsplit as SentencePiece-converted tokenizers do.
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=prepend, split=True)
        tokenizer.decoder = decoders.Sequence(
            [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
        )
        alphabet = [f"<0x{b:02X}>" for b in range(256)]
        trainer = trainers.BpeTrainer(
            vocab_size=VOCAB_SIZE + 256, special_tokens=["<unk>", *alphabet], show_progress=False
        )
    else:
        tokenizer = Tokenizer(models.BPE())
        if split is None:
            tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        else:
            tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
                [
                    pre_tokenizers.Split(Regex(split), behavior="isolated", invert=False),
                    pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
                ]
            )
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=VOCAB_SIZE,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
    tokenizer.train_from_iterator(_corpus(), trainer=trainer)
    if sentencepiece:
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=prepend, split=False)
        # The trainer keeps its special tokens as added (special) tokens; the byte pieces are
        # ordinary vocabulary in a SentencePiece model, or decoding with skip_special_tokens (as
        # vLLM's detokenizer does) would drop every byte-fallback piece from the text.
        spec = json.loads(tokenizer.to_str())
        spec["added_tokens"] = [token for token in spec["added_tokens"] if token["content"] not in alphabet]
        tokenizer = Tokenizer.from_str(json.dumps(spec))
    tokenizer.add_special_tokens(special)
    return tokenizer


def _save_tokenizer(folder: Path, tokenizer_object: Any, tokenizer_class: str, **config: Any) -> Any:
    """Save ``tokenizer_object`` as the family's tokenizer class and load it back as such."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    PreTrainedTokenizerFast(tokenizer_object=tokenizer_object, **config).save_pretrained(folder)
    settings_file = folder / "tokenizer_config.json"
    settings = json.loads(settings_file.read_text(encoding="utf-8"))
    settings["tokenizer_class"] = tokenizer_class
    settings_file.write_text(json.dumps(settings, indent=2), encoding="utf-8")
    return AutoTokenizer.from_pretrained(folder)


def _transpose_weights(folder: Path, suffixes: tuple[str, ...]) -> None:
    """Swap the last two dimensions of the saved weights whose names end with ``suffixes``."""
    from safetensors.torch import load_file, save_file

    weights_file = folder / "model.safetensors"
    weights = load_file(weights_file)
    for name in weights:
        if name.endswith(suffixes):
            weights[name] = weights[name].transpose(1, 2).contiguous()
    save_file(weights, weights_file, metadata={"format": "pt"})


def _save_model(
    folder: Path,
    model_class: Any,
    config: Any,
    eos_token_id: int | list[int],
    renames: tuple[tuple[str, str], ...] = (),
) -> None:
    """Save a random-weight ``model_class``; ``renames`` (regex, replacement) turn the weight
    names transformers writes into the released checkpoints' names, where they differ (loaders
    such as vLLM's expect the released ones; transformers reads both)."""
    import re

    import torch
    from safetensors.torch import load_file, save_file

    torch.manual_seed(SEED)
    model = model_class(config).eval()
    model.generation_config.eos_token_id = eos_token_id
    model.generation_config.do_sample = False
    model.save_pretrained(folder)
    for weights_file in folder.glob("*.safetensors") if renames else ():
        weights = load_file(weights_file)
        for pattern, replacement in renames:
            weights = {re.sub(pattern, replacement, name): value for name, value in weights.items()}
        save_file(weights, weights_file, metadata={"format": "pt"})


# -- Qwen (Qwen2.5-VL, Qwen3-VL dense and MoE) -------------------------------------------------

QWEN_SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<think>",
    "</think>",
]
# Qwen's ChatML with vision placeholders, as the Qwen2.5-VL and Qwen3-VL releases write it
# (Qwen2.5-VL adds a default system turn; Qwen3-VL does not).
QWEN_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' and DEFAULT_SYSTEM %}"
    "<|im_start|>system\nDEFAULT_SYSTEM<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _qwen_template(default_system: str | None) -> str:
    if default_system is None:
        return QWEN_TEMPLATE.replace(" and DEFAULT_SYSTEM", " and false").replace("DEFAULT_SYSTEM", "")
    return QWEN_TEMPLATE.replace(" and DEFAULT_SYSTEM", "").replace("DEFAULT_SYSTEM", default_system)


def _qwen_tokenizer(folder: Path, special: list[str] = QWEN_SPECIAL) -> Any:
    return _save_tokenizer(
        folder,
        _bpe(special),
        "Qwen2Tokenizer",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=32768,
    )


def _qwen_ids(tokenizer: Any) -> dict[str, int]:
    ids = tokenizer.convert_tokens_to_ids
    return {
        "image_token_id": ids("<|image_pad|>"),
        "video_token_id": ids("<|video_pad|>"),
        "vision_start_token_id": ids("<|vision_start|>"),
        "vision_end_token_id": ids("<|vision_end|>"),
    }


def _qwen_text(tokenizer: Any, **extra: Any) -> dict[str, Any]:
    return dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=32768,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0, "mrope_section": [6, 5, 5]},
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
        **extra,
    )


def _qwen3_vl(folder: Path, *, moe: bool) -> None:
    from transformers import (
        Qwen2VLImageProcessor,
        Qwen3VLConfig,
        Qwen3VLForConditionalGeneration,
        Qwen3VLMoeConfig,
        Qwen3VLMoeForConditionalGeneration,
        Qwen3VLProcessor,
        Qwen3VLVideoProcessor,
    )

    tokenizer = _qwen_tokenizer(folder)
    vision = dict(
        depth=2,
        hidden_size=64,
        intermediate_size=128,
        num_heads=2,
        out_hidden_size=64,
        patch_size=16,
        spatial_merge_size=2,
        temporal_patch_size=2,
        num_position_embeddings=256,
        deepstack_visual_indexes=[1],
    )
    text = _qwen_text(tokenizer)
    if moe:
        # norm_topk_prob as the released configs carry it (vLLM reads it; transformers' class omits
        # it); an expert width unlike the hidden size, so a transposed expert weight cannot pass.
        text.update(
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1, norm_topk_prob=True
        )
        config = Qwen3VLMoeConfig(text_config=text, vision_config=vision, **_qwen_ids(tokenizer))
        _save_model(folder, Qwen3VLMoeForConditionalGeneration, config, tokenizer.eos_token_id)
        # transformers keeps the fused expert weights transposed against the release and saves a
        # model built from a config that way; its loader takes both, vLLM's only the release's.
        _transpose_weights(folder, ("mlp.experts.gate_up_proj", "mlp.experts.down_proj"))
    else:
        config = Qwen3VLConfig(text_config=text, vision_config=vision, **_qwen_ids(tokenizer))
        _save_model(folder, Qwen3VLForConditionalGeneration, config, tokenizer.eos_token_id)
    # Qwen3-VL's image processor: 16-pixel patches merged 2x2 (32x32 pixels a token), between
    # 64 and 16,384 tokens a photo by default, as released.
    image_processor = Qwen2VLImageProcessor(
        patch_size=16,
        merge_size=2,
        temporal_patch_size=2,
        size={"shortest_edge": 65_536, "longest_edge": 16_777_216},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    video_processor = Qwen3VLVideoProcessor(patch_size=16, merge_size=2, temporal_patch_size=2)
    Qwen3VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=_qwen_template(None),
    ).save_pretrained(folder)


# Qwen2.5-VL's special tokens (no <think>: not a thinking model).
QWEN2_5_SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]


def _qwen2_5_vl(folder: Path) -> None:
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    tokenizer = _qwen_tokenizer(folder, QWEN2_5_SPECIAL)
    # Qwen2.5-VL's window-attention ViT, tiny: 14-pixel patches merged 2x2, windows of 112
    # pixels except in the full-attention blocks.
    vision = dict(
        depth=2,
        hidden_size=64,
        intermediate_size=128,
        num_heads=2,
        out_hidden_size=64,
        patch_size=14,
        spatial_merge_size=2,
        temporal_patch_size=2,
        window_size=112,
        fullatt_block_indexes=[1],
        tokens_per_second=2,
    )
    text = _qwen_text(tokenizer, bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"))
    config = Qwen2_5_VLConfig(text_config=text, vision_config=vision, **_qwen_ids(tokenizer))
    # As released: <|im_end|> then <|endoftext|> end a turn.
    eos = [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|endoftext|>")]
    _save_model(folder, Qwen2_5_VLForConditionalGeneration, config, eos)
    # As released: 28x28 pixels a token, 4 to 16,384 tokens a photo (min/max_pixels 3,136 and
    # 12,845,056), CLIP's normalisation; a 512x512 photo is resized to 504x504, 18x18 tokens.
    clip_mean, clip_std = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
    image_processor = Qwen2VLImageProcessor(
        patch_size=14,
        merge_size=2,
        temporal_patch_size=2,
        size={"shortest_edge": 3136, "longest_edge": 12_845_056},
        image_mean=clip_mean,
        image_std=clip_std,
    )
    video_processor = Qwen2VLVideoProcessor(
        patch_size=14, merge_size=2, temporal_patch_size=2, image_mean=clip_mean, image_std=clip_std
    )
    Qwen2_5_VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=_qwen_template("You are a helpful assistant."),
    ).save_pretrained(folder)


# -- Gemma 3 (4B, 12B, 27B) -------------------------------------------------------------------

GEMMA_SPECIAL = [
    "<pad>",
    "<eos>",
    "<bos>",
    "<mask>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<start_of_image>",
    "<end_of_image>",
    "<image_soft_token>",
]
# Gemma 3's template as released: <bos>, a system message folded into the first user turn, the
# assistant called "model", and <start_of_image> where the image goes (the processor expands it
# to <start_of_image>, mm_tokens_per_image soft tokens, <end_of_image>).
GEMMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- if messages[0]['content'] is string -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- else -%}"
    "{%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}"
    "{%- endif -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}"
    "{%- set first_user_prefix = '' -%}"
    "{%- set loop_messages = messages -%}"
    "{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{%- endif -%}"
    "{%- if message['role'] == 'assistant' -%}{%- set role = 'model' -%}"
    "{%- else -%}{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}"
    "{%- if message['content'] is string -%}"
    "{{ message['content'] | trim }}"
    "{%- elif message['content'] is iterable -%}"
    "{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' -%}{{ '<start_of_image>' }}"
    "{%- elif item['type'] == 'text' -%}{{ item['text'] | trim }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- else -%}"
    "{{ raise_exception('Invalid content type') }}"
    "{%- endif -%}"
    "{{ '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)


def _gemma3(folder: Path) -> None:
    from tokenizers import AddedToken
    from transformers import (
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3ImageProcessor,
        Gemma3Processor,
    )

    image_tokens = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}
    bpe = _bpe(GEMMA_SPECIAL, sentencepiece=True, prefix_space=False)
    # Gemma's vocabulary has runs of 1 to 31 newlines as (non-special) tokens of their own; the
    # processor's "\n\n" around an image merges with a neighbouring "\n\n" into "\n\n\n\n", and
    # vLLM's Gemma 3 processor looks these tokens up to do the same.
    bpe.add_tokens([AddedToken("\n" * n, normalized=False, special=False) for n in range(1, 32)])
    tokenizer = _save_tokenizer(
        folder,
        bpe,
        "GemmaTokenizer",
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
        add_bos_token=True,
        add_eos_token=False,
        extra_special_tokens=image_tokens,
        model_max_length=131072,
        **image_tokens,
    )
    ids = tokenizer.convert_tokens_to_ids
    # As released: <eos> and <end_of_turn> both end a turn (generation_config [1, 106]).
    eos = [tokenizer.eos_token_id, ids("<end_of_turn>")]
    text = dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        query_pre_attn_scalar=32,
        sliding_window=1024,
        layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=131072,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=eos,
    )
    # SigLIP, tiny: 128x128 pixels in 8-pixel patches (16x16), average-pooled to 8x8 = 64 soft
    # tokens an image (the real one: 896x896 in 14-pixel patches pooled to 256).
    vision = dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=128,
        patch_size=8,
        vision_use_head=False,
    )
    mm_tokens_per_image = 64
    config = Gemma3Config(
        text_config=text,
        vision_config=vision,
        mm_tokens_per_image=mm_tokens_per_image,
        boi_token_index=ids("<start_of_image>"),
        eoi_token_index=ids("<end_of_image>"),
        image_token_index=ids("<image_soft_token>"),
        eos_token_id=eos,
    )
    # Released as vision_tower.vision_model.*; transformers 5 writes vision_tower.* (it drops
    # SigLIP's vision_model on load and does not put it back on save).
    _save_model(
        folder,
        Gemma3ForConditionalGeneration,
        config,
        eos,
        renames=((r"^vision_tower\.", "vision_tower.vision_model."),),
    )
    image_processor = Gemma3ImageProcessor(
        size={"height": 128, "width": 128},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
        resample=2,
        do_pan_and_scan=False,
    )
    Gemma3Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        chat_template=GEMMA3_TEMPLATE,
        image_seq_length=mm_tokens_per_image,
    ).save_pretrained(folder)


# -- Llama 4 (Scout, Maverick) and Llama 3.2 Vision (11B, 90B) ------------------------------------

# The word-splitting regexes of Meta's tiktoken-style tokenizers (Llama 3's; Llama 4's is o200k's).
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
LLAMA4_SPLIT = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _meta_tokenizer(folder: Path, special: list[str], split: str, **config: Any) -> Any:
    """A Meta-release tokenizer: byte-level BPE saved as PreTrainedTokenizerFast, whose
    post-processor puts <|begin_of_text|> first (as the released tokenizer.json does)."""
    from tokenizers import processors

    bpe = _bpe(special, split=split)
    bos = "<|begin_of_text|>"
    bos_id = bpe.token_to_id(bos)
    bpe.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1", special_tokens=[(bos, bos_id)]
            ),
        ]
    )
    return _save_tokenizer(folder, bpe, "PreTrainedTokenizerFast", bos_token=bos, **config)


LLAMA4_SPECIAL = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|header_start|>",
    "<|header_end|>",
    "<|eom|>",
    "<|eot|>",
    "<|step|>",
    "<|python_start|>",
    "<|python_end|>",
    "<|finetune_right_pad|>",
    "<|image_start|>",
    "<|image_end|>",
    "<|image|>",
    "<|patch|>",
    "<|tile_x_separator|>",
    "<|tile_y_separator|>",
]


def _llama4(folder: Path) -> None:
    from transformers import Llama4Config, Llama4ForConditionalGeneration, Llama4ImageProcessor, Llama4Processor
    from transformers.models.llama4.processing_llama4 import chat_template as llama4_template

    tokenizer = _meta_tokenizer(
        folder,
        LLAMA4_SPECIAL,
        LLAMA4_SPLIT,
        eos_token="<|eot|>",
        pad_token="<|finetune_right_pad|>",
        model_max_length=10_485_760,
    )
    ids = tokenizer.convert_tokens_to_ids
    # As released: <|end_of_text|>, <|eom|> and <|eot|> end a turn.
    eos = [ids("<|end_of_text|>"), ids("<|eom|>"), ids("<|eot|>")]
    # Scout's text model, tiny: every layer a mixture of experts (top-1 of 4, sigmoid-gated, plus
    # a shared expert), QK-norm, chunked attention with RoPE in one layer and a NoPE global one,
    # Llama 3 RoPE scaling. Expert width unlike the hidden size, so a transposed expert cannot load.
    text = dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=32,
        intermediate_size_mlp=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        num_local_experts=4,
        num_experts_per_tok=1,
        interleave_moe_layer_step=1,
        no_rope_layer_interval=2,
        attention_chunk_size=8192,
        use_qk_norm=True,
        max_position_embeddings=131072,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500_000.0,
            "factor": 16.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 1.0,
            "original_max_position_embeddings": 8192,
        },
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id,
    )
    # Its vision encoder, tiny: 112-pixel tiles (the real one: 336) in 14-pixel patches, pixel
    # shuffle 0.5: 16 tokens a tile (the real one: 144).
    vision = dict(
        hidden_size=64,
        intermediate_size=256,  # 4x hidden: the pixel shuffle's output feeds the adapter's fc1
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=112,
        patch_size=14,
        pixel_shuffle_ratio=0.5,
        projector_input_dim=64,
        projector_output_dim=64,
        vision_output_dim=64,
    )
    config = Llama4Config(
        text_config=text,
        vision_config=vision,
        boi_token_index=ids("<|image_start|>"),
        eoi_token_index=ids("<|image_end|>"),
        image_token_index=ids("<|patch|>"),
    )
    _save_model(folder, Llama4ForConditionalGeneration, config, eos)
    # Tiles as released (up to max_patches tiles of the best-fitting canvas, plus a global one),
    # tiny: up to 4 tiles of 112 pixels, so a 512x512 photo is 2x2 tiles + the global one, 5 x 16
    # <|patch|> tokens.
    image_processor = Llama4ImageProcessor(
        size={"height": 112, "width": 112},
        max_patches=4,
        resize_to_max_canvas=False,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    Llama4Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=14,
        pixel_shuffle_ratio=0.5,
        chat_template=llama4_template,
    ).save_pretrained(folder)


LLAMA3_SPECIAL = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>",
    "<|step_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|python_tag|>",
    "<|image|>",  # Llama 3.2 Vision's, last: outside the text model's output vocabulary, as released
]
# Llama 3.2 Vision Instruct's template: <|begin_of_text|>, header turns ended by <|eot_id|>, a
# system turn with the knowledge cut-off and today's date, <|image|> where the image goes. The
# release refuses a system message with an image ("Prompting with images is incompatible with
# system messages"), as here: the transformers backend then folds the judge's system text into the
# user turn. A system content is read from a string or a list of parts.
MLLAMA_TEMPLATE = (
    "{{- bos_token }}\n"
    "{%- if not date_string is defined %}\n"
    "    {%- if strftime_now is defined %}\n"
    '        {%- set date_string = strftime_now("%d %b %Y") %}\n'
    "    {%- else %}\n"
    '        {%- set date_string = "26 Jul 2024" %}\n'
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- if messages[0]['content'] is string %}\n"
    "        {%- set system_message = messages[0]['content']|trim %}\n"
    "    {%- else %}\n"
    "        {%- set system_message = messages[0]['content'][0]['text']|trim %}\n"
    "    {%- endif %}\n"
    "    {%- set messages = messages[1:] %}\n"
    "{%- else %}\n"
    '    {%- set system_message = "" %}\n'
    "{%- endif %}\n"
    "{%- set image_ns = namespace(has_images=false) %}\n"
    "{%- for message in messages %}\n"
    "    {%- if message['content'] is not string %}\n"
    "        {%- for content in message['content'] %}\n"
    "            {%- if content['type'] == 'image' %}\n"
    "                {%- set image_ns.has_images = true %}\n"
    "            {%- endif %}\n"
    "        {%- endfor %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    '{%- if image_ns.has_images and not system_message == "" %}\n'
    '    {{- raise_exception("Prompting with images is incompatible with system messages.") }}\n'
    "{%- endif %}\n"
    "{%- if not image_ns.has_images %}\n"
    '    {{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}\n'
    '    {{- "Cutting Knowledge Date: December 2023\\n" }}\n'
    '    {{- "Today Date: " + date_string + "\\n\\n" }}\n'
    "    {{- system_message }}\n"
    '    {{- "<|eot_id|>" }}\n'
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}\n"
    "    {%- if message['content'] is string %}\n"
    "        {{- message['content'] }}\n"
    "    {%- else %}\n"
    "        {%- for content in message['content'] %}\n"
    "            {%- if content['type'] == 'image' %}\n"
    "                {{- '<|image|>' }}\n"
    "            {%- elif content['type'] == 'text' %}\n"
    "                {{- content['text'] }}\n"
    "            {%- endif %}\n"
    "        {%- endfor %}\n"
    "    {%- endif %}\n"
    "    {{- '<|eot_id|>' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
    "{%- endif %}\n"
)


def _mllama(folder: Path) -> None:
    from transformers import MllamaConfig, MllamaForConditionalGeneration, MllamaImageProcessor, MllamaProcessor

    tokenizer = _meta_tokenizer(
        folder,
        LLAMA3_SPECIAL,
        LLAMA3_SPLIT,
        eos_token="<|eot_id|>",
        pad_token="<|finetune_right_pad_id|>",
        model_max_length=131072,
    )
    ids = tokenizer.convert_tokens_to_ids
    image_token_id = ids("<|image|>")
    assert image_token_id == len(tokenizer) - 1
    # As released: <|end_of_text|>, <|eom_id|> and <|eot_id|> end a turn.
    eos = [ids("<|end_of_text|>"), ids("<|eom_id|>"), ids("<|eot_id|>")]
    # Llama 3.1 text layers with a gated cross-attention layer between them (the image is never
    # in the prompt but its one <|image|> token: the text cross-attends to the tiles' features).
    text = dict(
        vocab_size=image_token_id,  # the embedding has 8 rows more, <|image|> among them
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        cross_attention_layers=[1],
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=131072,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500_000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id,
    )
    # Its tiled ViT, tiny: up to 4 tiles of 56 pixels (the real one: 560) in 14-pixel patches,
    # 16 patches + CLS a tile, a local and a global encoder, features from every local layer.
    vision = dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_global_layers=1,
        attention_heads=2,
        image_size=56,
        patch_size=14,
        max_num_tiles=4,
        intermediate_layers_indices=[0, 1],
        vision_output_dim=64 * 3,  # the last layer's features and the two intermediate ones
    )
    config = MllamaConfig(text_config=text, vision_config=vision, image_token_index=image_token_id)
    _save_model(folder, MllamaForConditionalGeneration, config, eos)
    # As released (560-pixel tiles, up to 4, the canvas that fits best; CLIP's normalisation),
    # tiny: a 512x512 photo becomes 2x2 tiles of 56 pixels.
    image_processor = MllamaImageProcessor(
        size={"height": 56, "width": 56},
        max_image_tiles=4,
        image_mean=[0.48145466, 0.4578275, 0.40821073],
        image_std=[0.26862954, 0.26130258, 0.27577711],
    )
    MllamaProcessor(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=MLLAMA_TEMPLATE
    ).save_pretrained(folder)


# -- SmolVLM (SmolVLM2 256M, 500M, 2.2B; Idefics3's image splitting) ------------------------------

SMOLVLM_SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<fake_token_around_image>",
    "<image>",
    "<end_of_utterance>",
    "<global-img>",
    *(f"<row_{row}_col_{col}>" for row in range(1, 7) for col in range(1, 7)),
    "<video>",
]
# SmolVLM's template as released ("User:<image>...<end_of_utterance>\nAssistant:", one
# <|im_start|> before it all; a role's colon takes no space before an image), which also takes a
# content given as a plain string.
SMOLVLM_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{ message['role'] | capitalize }}"
    "{% if message['content'] is string %}{{ ': ' + message['content'] }}"
    "{% else %}{% if message['content'][0]['type'] == 'image' %}{{ ':' }}{% else %}{{ ': ' }}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{ line['text'] }}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% elif line['type'] == 'video' %}{{ '<video>' }}{% endif %}"
    "{% endfor %}{% endif %}<end_of_utterance>\n{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)


def _smolvlm(folder: Path) -> None:
    from transformers import (
        SmolVLMConfig,
        SmolVLMForConditionalGeneration,
        SmolVLMImageProcessor,
        SmolVLMProcessor,
        SmolVLMVideoProcessor,
    )

    tokenizer = _save_tokenizer(
        folder,
        _bpe(SMOLVLM_SPECIAL),
        "GPT2Tokenizer",
        bos_token="<|im_start|>",
        eos_token="<end_of_utterance>",
        pad_token="<|im_end|>",
        unk_token="<|endoftext|>",
        model_max_length=8192,
    )
    ids = tokenizer.convert_tokens_to_ids
    eos = tokenizer.eos_token_id
    # SmolLM2 (Llama) under a SigLIP-style encoder, tiny: 64-pixel images in 8-pixel patches
    # (8x8), pixel-shuffled by 2: 16 tokens an image piece (SmolVLM2-2.2B: 384 pixels, 14-pixel
    # patches, scale 3: 81).
    text = dict(
        model_type="llama",
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=8192,
        rope_parameters={"rope_type": "default", "rope_theta": 100_000.0},
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id,
    )
    vision = dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2, image_size=64, patch_size=8
    )
    scale_factor = 2
    config = SmolVLMConfig(
        text_config=text,
        vision_config=vision,
        scale_factor=scale_factor,
        image_token_id=ids("<image>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    _save_model(folder, SmolVLMForConditionalGeneration, config, eos)
    # Image splitting as released (the photo resized to a longest edge of `size`, cut into
    # max_image_size squares, plus the whole photo at max_image_size), tiny: 128 and 64 pixels,
    # so a 512x512 photo is 2x2 pieces + the global one, 5 x 16 <image> tokens.
    sizes = dict(size={"longest_edge": 128}, max_image_size={"longest_edge": 64})
    image_processor = SmolVLMImageProcessor(
        do_image_splitting=True, image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5], resample=1, **sizes
    )
    video_processor = SmolVLMVideoProcessor(image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5], resample=1, **sizes)
    SmolVLMProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        image_seq_len=(vision["image_size"] // vision["patch_size"]) ** 2 // scale_factor**2,
        chat_template=SMOLVLM_TEMPLATE,
    ).save_pretrained(folder)


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family(
            "qwen3_vl",
            "Qwen3VLForConditionalGeneration",
            "Qwen3-VL dense (8B; the paper's Table 1)",
            lambda folder: _qwen3_vl(folder, moe=False),
        ),
        Family(
            "qwen3_vl_moe",
            "Qwen3VLMoeForConditionalGeneration",
            "Qwen3-VL MoE (235B-A22B; the 30B-A3B judge)",
            lambda folder: _qwen3_vl(folder, moe=True),
        ),
        Family(
            "qwen2_5_vl",
            "Qwen2_5_VLForConditionalGeneration",
            "Qwen2.5-VL (3B, 7B, 32B, 72B)",
            _qwen2_5_vl,
        ),
        Family(
            "gemma3",
            "Gemma3ForConditionalGeneration",
            "Gemma 3 (4B, 12B, 27B)",
            _gemma3,
        ),
        Family(
            "llama4",
            "Llama4ForConditionalGeneration",
            "Llama 4 (Scout 17B-16E, Maverick 17B-128E)",
            _llama4,
        ),
        Family(
            "smolvlm",
            "SmolVLMForConditionalGeneration",
            "SmolVLM2 (256M, 500M, 2.2B)",
            _smolvlm,
        ),
        Family(
            "mllama",
            "MllamaForConditionalGeneration",
            "Llama 3.2 Vision (11B, 90B)",
            _mllama,
            vllm_unsupported="removed from vLLM after 0.10.2",
        ),
    )
}


def cache_key() -> str:
    """This file's source and the transformers version: a change to either builds anew."""
    import transformers

    digest = hashlib.sha256(HERE.read_bytes())
    digest.update(transformers.__version__.encode())
    return digest.hexdigest()[:16]


def tiny_model(name: str) -> Path:
    """The folder of family ``name``'s tiny model, built on first use (staged, then renamed)."""
    from gamut_hf.files import cache_root

    family = FAMILIES[name]
    folder = cache_root() / "tiny-models" / f"{name}-{cache_key()}"
    if (folder / "config.json").is_file():
        return folder
    staging = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    family.build(staging)
    try:
        staging.rename(folder)
    except OSError:  # another process finished the same build first
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def build_tiny_llava(folder: Path) -> Path:
    """Save a tiny LLaVA with its processor into ``folder`` (the SmolLM2 tokenizer plus <image>)."""
    import torch
    from transformers import (
        AutoTokenizer,
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        Qwen2Config,
    )

    from gamut_hf.backends.models import resolve_model

    if (folder / "config.json").is_file():
        return folder
    tokenizer = AutoTokenizer.from_pretrained(resolve_model("smollm2-135m"))
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    image_token_id = tokenizer.convert_tokens_to_ids("<image>")
    vision = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=1,
        image_size=32,
        patch_size=8,
        projection_dim=32,
    )
    text = Qwen2Config(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=len(tokenizer),
        max_position_embeddings=4096,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=image_token_id,
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        image_seq_length=16,
    )
    torch.manual_seed(0)
    model = LlavaForConditionalGeneration(config).eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    image_processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        chat_template=LLAVA_TEMPLATE,
        num_additional_image_tokens=1,
    )
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


LLAVA_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}"
    "{% if p.type == 'image' %}<image>\n{% else %}{{ p.text }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
