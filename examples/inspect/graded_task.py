"""An inspect_ai task graded by a model (`model_graded_fact`): evalgate serves the grader.

inspect's model-graded scorers ask for the `grader` model role; with `grader:` on the benchmark
(evals.yaml), that role is evalgate's judge — served like any model, part of the exam (the
comparability fingerprint and the base branch's measurement), its tokens counted apart.
"""

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import model_graded_fact
from inspect_ai.solver import generate

FACTS = [
    ("What is the chemical symbol for gold?", "Au"),
    ("Which planet is closest to the Sun?", "Mercury"),
    ("How many legs does a spider have?", "Eight"),
    ("What is the largest ocean on Earth?", "The Pacific Ocean"),
]


@task
def graded() -> Task:
    samples = [Sample(id=f"fact-{i}", input=q, target=a) for i, (q, a) in enumerate(FACTS)]
    return Task(dataset=MemoryDataset(samples), solver=[generate()], scorer=model_graded_fact())
