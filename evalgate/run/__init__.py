"""Stage 3–4, run and score: items × rollouts against a served endpoint, journaled, summarised.

``engine`` schedules rollouts, ``client`` speaks the chat-completions wire, ``cache`` and
``journal`` make re-runs free and crashes lossless, ``rundir`` owns the output tree, ``summary``
turns rollouts into per-item scores, ``fingerprint`` says what was measured, ``sequential``
schedules early-stopping looks, ``costs`` prices tokens, ``progress`` shows it all.
"""
