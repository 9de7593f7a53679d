"""The example as a classic verifiers environment: ``load_environment(**env_args)``.

The API of verifiers <= 0.3.x (``verifiers.legacy`` in 0.3.x, the package root before): a
``SingleTurnEnv`` over a ``datasets.Dataset`` and a ``Rubric`` of reward functions. Most
environments on the Prime hub are still written this way.
"""

from __future__ import annotations

from evalgate_vf_example import PROBLEMS, SYSTEM_PROMPT, final_number, is_correct

__all__ = ["load_environment"]


def _reply(completion) -> str:
    if isinstance(completion, str):
        return completion
    for message in reversed(completion or []):
        role = message.get("role") if isinstance(message, dict) else getattr(message, "role", "")
        if role == "assistant":
            content = message.get("content") if isinstance(message, dict) else message.content
            return content or ""
    return ""


def correct(completion, answer, **kwargs) -> float:
    return is_correct(_reply(completion), answer)


def has_number(completion, **kwargs) -> float:
    return 0.0 if final_number(_reply(completion)) is None else 1.0


def bare_answer(completion, answer, **kwargs) -> float:
    return 1.0 if _reply(completion).strip() == answer else 0.0


def load_environment(num_tasks: int | None = None, system_prompt: str = SYSTEM_PROMPT):
    # Imported here so that importing this module (evalgate's `api: auto` probe) needs no
    # verifiers; `import verifiers as vf` is the classic surface on 0.3.x and earlier.
    import verifiers as vf
    from datasets import Dataset

    rows = [
        {"id": row_id, "question": question, "answer": answer}
        for row_id, question, answer in PROBLEMS[:num_tasks]
    ]
    rubric = vf.Rubric(funcs=[correct], weights=[1.0])
    rubric.add_metric(has_number)
    rubric.add_metric(bare_answer)
    return vf.SingleTurnEnv(
        eval_dataset=Dataset.from_list(rows), system_prompt=system_prompt, rubric=rubric
    )
