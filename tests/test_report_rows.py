"""report.html's data block: a batch of rows is encoded by orjson where it writes the stdlib's
bytes, and by the stdlib otherwise; the page's text is the same either way."""

from __future__ import annotations

import random
from typing import Any

import pytest

from evalgate.report import html

AWKWARD_TEXT = [
    "",
    "plain",
    "é 中文 🙂",
    'q"uote\\back',
    "\n\t\r\x00\x08\x0c\x1f\x7f\u2028\u2029",
    "</script><!-- -->",
    "x" * 5000,
]
AWKWARD_FLOATS = [
    None, 0.0, -0.0, 1.0, 0.5, 1 / 3, 2 / 3, 1e-4, 9.999e-5, 1e-5, 5e-324, 1e15, 1e16, 2.5e17,
    float("nan"), float("inf"), -1.0, 123456.789,
]  # fmt: skip


def _row(i: int, text: str, pr: float | None, base: float | None) -> dict[str, Any]:
    return {
        "id": f"item-{i}",
        "status": "same",
        "prompt": text,
        "answer": text[::-1],
        "base": None if i % 2 else text,
        "pr": text.upper(),
        "reward_pr": pr,
        "reward_base": base,
        "error": None if i % 3 else "timeout",
        "error_text": None if i % 3 else f"timeout: {text}",
        "judge": None,
    }


def _stdlib(batch: list[Any]) -> str:
    return html._json_for_script(batch)


@pytest.mark.parametrize("value", AWKWARD_FLOATS)
def test_a_batch_is_the_stdlibs_text_whatever_its_means(value: float | None) -> None:
    batch = [_row(i, text, value, 0.25) for i, text in enumerate(AWKWARD_TEXT)]
    assert html._rows_for_script(batch) == _stdlib(batch)


def _char(rnd: random.Random) -> int:
    """A code point: ASCII (controls too), the rest of the BMP, or past it; no surrogate."""
    low = rnd.choice([(0, 0x7F), (0x80, 0xD7FF), (0xE000, 0x10FFFF)])
    return rnd.randint(*low)


def test_random_means_and_texts_encode_alike() -> None:
    rnd = random.Random(7)
    for _ in range(200):
        batch = []
        for i in range(rnd.randint(1, 20)):
            text = "".join(chr(_char(rnd)) for _ in range(rnd.randint(0, 30)))
            mean = rnd.choice([None, rnd.random(), rnd.randint(0, 7) / 7, rnd.random() * 1e-6])
            batch.append(_row(i, text, mean, rnd.choice([None, rnd.random()])))
        assert html._rows_for_script(batch) == _stdlib(batch)


def test_a_lone_surrogate_is_left_to_the_stdlib() -> None:
    batch = [_row(0, "half a pair: \ud800", 1.0, 0.0)]
    assert html._rows_for_script(batch) == _stdlib(batch)
    assert "\ud800" in html._rows_for_script(batch)


def test_the_data_block_is_the_same_without_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [_row(i, AWKWARD_TEXT[i % len(AWKWARD_TEXT)], i / 700, None) for i in range(700)]

    class Table:
        def rows(self) -> Any:
            return iter(rows)

    runs: Any = [
        {"key": "m / b", "agent": False, "has_base": False, "counts": {}, "table": Table()}
    ]
    fast = "".join(html._data_chunks(runs))
    monkeypatch.setattr(html, "_fast_dumps", None)
    assert "".join(html._data_chunks(runs)) == fast


class _Message(dict):  # a dict of another type: the shown prompt takes the general path
    pass


PROMPTS: list[Any] = [
    [{"role": "system", "content": "calc"}, {"role": "user", "content": "What is 1 + 2?"}],
    [{"role": "user", "content": "first"}, {"role": "assistant", "content": "a reply"}],
    [{"role": "user", "content": "x" * 5000}],  # longer than a row shows
    [{"role": "user", "content": [{"type": "text", "text": "parts"}]}],  # not text
    [{"role": "user"}],  # no content
    [{"role": "user", "content": None}],
    [_Message(role="user", content="a dict subclass")],
    [{"role": "assistant", "content": "no user turn"}],
    ["not a message", {"role": "user", "content": "before a string"}],
    [],
    "a plain prompt",
    None,
]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_a_rows_prompt_is_its_last_user_turn_as_text_would_show_it(prompt: Any) -> None:
    """A row shows the prompt's last user turn, capped, as _text gives it, whatever its shape
    (the common chat prompt is read without _text's general pass)."""
    rec = {"prompt": prompt, "answer": "a", "completion": "c", "judge": None}
    assert html._shown(rec)["prompt"] == html._text(prompt)
