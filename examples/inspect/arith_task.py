"""A 10-sample inspect_ai task from a memory dataset: evalgate's `kind: inspect` example.

Run it with inspect itself (`inspect eval arith_task.py@arith --model ...`) or as a gate benchmark
(evals.yaml beside this file). The scorer is inspect's `match()` on the last number.
"""

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate, system_message

PAIRS = [(2, 3), (7, 5), (4, 4), (9, 1), (6, 2), (3, 8), (5, 5), (1, 1), (8, 7), (10, 4)]


@task
def arith(size: int = 10) -> Task:
    samples = [
        Sample(
            id=f"add-{a}-{b}",
            input=f"What is {a} + {b}? Answer with the number only.",
            target=str(a + b),
        )
        for a, b in PAIRS[:size]
    ]
    return Task(
        dataset=MemoryDataset(samples),
        solver=[system_message("You are a calculator."), generate()],
        scorer=match(numeric=True),
    )
