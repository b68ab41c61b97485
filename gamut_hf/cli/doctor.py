"""``gamut doctor``: the machine checked for a run before any model loads."""

from __future__ import annotations

from typing import Any

import click

from gamut_hf.cli.options import EXIT_BAD_INPUT, key_values


@click.command(
    "doctor",
    epilog=f"Exit status: 0 the job can start; {EXIT_BAD_INPUT} one line per problem that would stop it.",
)
@click.option(
    "--model", "models", multiple=True, metavar="NAME", help="A candidate to check (folder or hub id); repeatable."
)
@click.option("--judge", "judges", multiple=True, metavar="NAME", help="A judge to check; repeatable.")
@click.option(
    "--model-option", "model_options", multiple=True, metavar="KEY=VALUE", help="The candidates' vLLM options."
)
@click.option("--judge-option", "judge_options", multiple=True, metavar="KEY=VALUE", help="The judges' vLLM options.")
@click.option("--require-gpu", is_flag=True, help="vLLM on the CPU is a problem too (a GPU job).")
def doctor(models: tuple[str, ...], judges: tuple[str, ...], require_gpu: bool, **options: Any) -> None:
    """What a run depends on here, and one line for each problem that would stop it.

    Reads Python, torch and the CUDA runtime it was built for, the NVIDIA driver and each GPU's
    free memory, vLLM's version and platform (and whether it imports), transformers and the hub
    cache's free disk; with --model/--judge, whether each model's weights fit its GPUs under its
    options (tensor_parallel_size, pipeline_parallel_size, gpu_memory_utilization, dtype), which
    are checked as `gamut run` checks them. Loads no model.

    \b
      gamut doctor
      gamut doctor --judge Qwen/Qwen3-VL-235B-A22B-Instruct --judge-option tensor_parallel_size=8
    """
    from gamut_hf.backends import check_options
    from gamut_hf.backends.doctor import ModelPlan, diagnose

    model_options = key_values(options["model_options"], "--model-option")
    judge_options = key_values(options["judge_options"], "--judge-option")
    check_options("vllm", model_options)
    check_options("vllm", judge_options)
    plans = [ModelPlan(name, model_options) for name in models] + [ModelPlan(name, judge_options) for name in judges]
    diagnosis = diagnose(plans, require_gpu=require_gpu)
    width = max(len(finding.what) for finding in diagnosis.findings)
    for finding in diagnosis.findings:
        click.echo(f"{finding.what:<{width}}  {finding.value}")
    if diagnosis.problems:
        for problem in diagnosis.problems:
            click.echo(f"gamut doctor: {problem}", err=True)
        raise click.exceptions.Exit(EXIT_BAD_INPUT)
    click.echo("gamut doctor: ready")


COMMANDS = [doctor]
