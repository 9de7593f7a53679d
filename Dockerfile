# The evalgate Action image: Python, evalgate with the embedded model, bubblewrap for sandboxes.
FROM python:3.11-slim

# git: result store and base-branch policy; bubblewrap: sandboxed agent tasks;
# build tools: llama-cpp-python compiles llama.cpp at install.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git bubblewrap build-essential cmake \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/evalgate
COPY pyproject.toml README.md ./
COPY evalgate ./evalgate
COPY benchmarks ./benchmarks
RUN pip install --no-cache-dir '.[embedded,hf]' \
 && apt-get purge -y build-essential cmake && apt-get autoremove -y

ENV PYTHONUNBUFFERED=1
# No USER: container actions run as root so the workspace and GITHUB_* files are writable.
ENTRYPOINT ["/usr/local/bin/python", "-m", "evalgate", "action"]
