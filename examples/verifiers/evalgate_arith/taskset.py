"""Arithmetic tasks with an exact-match reward and two metrics."""

from __future__ import annotations

import verifiers.v1 as vf
from evalgate_vf_example import PROBLEMS, SYSTEM_PROMPT, final_number, is_correct

__all__ = ["ArithConfig", "ArithData", "ArithTask", "ArithTaskset"]


class ArithData(vf.TaskData):
    """One problem: the prompt and system prompt live on TaskData; the reference is ours."""

    answer: str


class ArithTask(vf.Task[ArithData]):
    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return is_correct(trace.last_reply, self.data.answer)

    @vf.metric
    async def has_number(self, trace: vf.Trace) -> float:
        return 0.0 if final_number(trace.last_reply) is None else 1.0

    @vf.metric
    async def bare_answer(self, trace: vf.Trace) -> float:
        """The reply is the number and nothing else (what the system prompt asks for)."""
        return 1.0 if trace.last_reply.strip() == self.data.answer else 0.0


class ArithConfig(vf.TasksetConfig):
    num_tasks: int | None = None
    """Only the first N problems (None: all)."""
    system_prompt_text: str = SYSTEM_PROMPT
    """System prompt sent with every problem."""


class ArithTaskset(vf.Taskset[ArithTask, ArithConfig]):
    def load(self) -> list[ArithTask]:
        rows = PROBLEMS[: self.config.num_tasks]
        return [
            ArithTask(
                ArithData(
                    id=row_id,
                    prompt=question,
                    system_prompt=self.config.system_prompt_text,
                    answer=answer,
                ),
                self.config.task,
            )
            for row_id, question, answer in rows
        ]
