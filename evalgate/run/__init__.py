"""Stage 3–4, run and score: items × rollouts against a served endpoint, journaled, summarised.

``session`` serves each model and runs each suite on it, ``engine`` schedules rollouts, ``cache``
and ``journal`` make re-runs free and crashes lossless, ``rundir`` finds and loads runs in the
output tree (``layout`` spells it, ``runfiles`` types run_config.json and metadata.json,
``records`` checks results.jsonl, ``manifest`` builds what a run records),
``summary`` turns rollouts into per-item scores, ``fingerprint`` says what was measured,
``sequential`` schedules early-stopping looks, ``budget`` enforces caps, ``costs`` prices tokens,
``progress`` shows it all. The chat client itself is :mod:`evalgate.serve.client`.
"""
