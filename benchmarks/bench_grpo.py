"""GRPO step time on CPU: the tiny test model and the packaged SmolLM2-135M-Instruct planner.

trl's ``GRPOTrainer`` with ``GRPOConfig(use_cpu=True, bf16=False, num_generations=4,
report_to="none")``, one prompt (4 completions) per step, on planner-style prompts with a
cheap reward (well-formed JSON intents), so the step time is generation + scoring + backward.
Torch threads are set explicitly (on a shared 2-core machine, the default stalls). The first
step (warm-up) is excluded from the median. Baselines in the same run: generating the 4
completions alone with ``model.generate`` (the step's unavoidable part), and for SmolLM2 the
same steps with trl's default activation recomputation (``gradient_checkpointing``), which the
project turns off on CPU.

Importable: ``run(include_smollm2=False)`` skips SmolLM2 when time is short (``--skip-smollm2``).

    python benchmarks/bench_grpo.py --steps 4 [--skip-smollm2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from benchlib import machine, peak_rss_mb, ratio, write_result

from mera_pipelines.core.llm.tiny_lm import build_tiny_lm

PROMPTS = [
    "Question: When did Maya adopt Pepper?\nKnown: Maya has a dog.\nIntents as JSON:",
    "Question: Where does Jonas work?\nKnown: Jonas is a nurse.\nIntents as JSON:",
    "Question: What instrument does Lena play?\nKnown: nothing yet.\nIntents as JSON:",
    "Question: Which city did Priya move to?\nKnown: Priya moved in May.\nIntents as JSON:",
]
SMOLLM2_DIR = Path(__file__).resolve().parents[1] / "data" / "06_models" / "smollm2-135m-instruct"


def intents_reward(prompts, completions, **_) -> list[float]:
    """1 for a JSON list of intents, 0.5 for any JSON, 0 otherwise (cheap, like the format
    penalties of the retrieval reward)."""
    scores = []
    for completion in completions:
        try:
            parsed = json.loads(completion.strip())
            scores.append(1.0 if isinstance(parsed, list) else 0.5)
        except ValueError:
            scores.append(0.0)
    return scores


def smollm2_model() -> str:
    from mera_pipelines.core.llm.smollm2 import ensure_smollm2

    return str(ensure_smollm2(SMOLLM2_DIR))


def step_times(
    model_dir: str,
    steps: int,
    threads: int,
    completion_tokens: int,
    gradient_checkpointing: bool = False,
) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    class StepClock(TrainerCallback):
        def __init__(self) -> None:
            self.seconds: list[float] = []
            self._started = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            self._started = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.seconds.append(time.perf_counter() - self._started)

    clock = StepClock()
    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out,
            use_cpu=True,
            bf16=False,
            num_generations=4,
            per_device_train_batch_size=4,
            max_completion_length=completion_tokens,
            max_steps=steps + 1,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            dataloader_num_workers=0,
            seed=0,
            # the project's CPU setting (training.grpo.gradient_checkpointing: false)
            gradient_checkpointing=gradient_checkpointing,
        )
        trainer = GRPOTrainer(
            model=model_dir,
            reward_funcs=intents_reward,
            args=config,
            train_dataset=Dataset.from_dict({"prompt": PROMPTS * 4}),
            processing_class=tokenizer,
            callbacks=[clock],
        )
        started = time.perf_counter()
        trainer.train()
        train_seconds = time.perf_counter() - started
    measured = clock.seconds[1:] or clock.seconds
    # Baseline: only generating the step's 4 completions.
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    inputs = tokenizer([PROMPTS[0]] * 4, return_tensors="pt", padding=True)
    generation = []
    for _ in range(3):
        started = time.perf_counter()
        with torch.no_grad():
            model.generate(
                **inputs,
                max_new_tokens=completion_tokens,
                min_new_tokens=completion_tokens,
                do_sample=True,
                pad_token_id=tokenizer.pad_token_id,
            )
        generation.append(time.perf_counter() - started)
    step = statistics.median(measured)
    gen = statistics.median(generation)
    return {
        "model_dir": model_dir,
        "parameters": sum(p.numel() for p in model.parameters()),
        "torch_threads": threads,
        "gradient_checkpointing": gradient_checkpointing,
        "completion_tokens": completion_tokens,
        "steps_measured": len(measured),
        "step_seconds_median": step,
        "step_seconds_all": clock.seconds,
        "train_seconds": train_seconds,
        "baseline_generate_4_completions_seconds": gen,
        "ratio_step_vs_generation": ratio(step, gen),
    }


def run(include_smollm2: bool = True, steps: int = 3, completion_tokens: int = 24) -> dict:
    result: dict = {"benchmark": "grpo", "machine": machine()}
    with tempfile.TemporaryDirectory() as tmp:
        tiny = str(build_tiny_lm(Path(tmp) / "tiny"))
        result["tiny_qwen3"] = step_times(tiny, steps, 1, completion_tokens)
        print(f"[grpo] tiny: {result['tiny_qwen3']['step_seconds_median']:.2f} s/step", flush=True)
    if include_smollm2:
        smollm2 = smollm2_model()
        result["smollm2_135m"] = step_times(smollm2, steps, 2, completion_tokens)
        # Baseline: trl's default, activation recomputation on (saves GPU memory, costs time)
        recompute = step_times(smollm2, steps, 2, completion_tokens, gradient_checkpointing=True)
        result["smollm2_135m_trl_default_recompute"] = recompute
        result["smollm2_135m"]["ratio_step_vs_recompute"] = ratio(
            result["smollm2_135m"]["step_seconds_median"], recompute["step_seconds_median"]
        )
        print(
            f"[grpo] smollm2: {result['smollm2_135m']['step_seconds_median']:.1f} s/step "
            f"({recompute['step_seconds_median']:.1f} with activation recomputation)"
        )
    else:
        result["smollm2_135m"] = None
        result["note"] = "SmolLM2 skipped (--skip-smollm2)"
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="measured steps (after 1 warm-up)")
    parser.add_argument("--completion-tokens", type=int, default=24)
    parser.add_argument("--skip-smollm2", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    result = run(not args.skip_smollm2, args.steps, args.completion_tokens)
    print("wrote", write_result("grpo", result, args.out))


if __name__ == "__main__":
    main()
