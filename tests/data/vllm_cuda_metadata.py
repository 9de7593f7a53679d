"""Dev time, not a test: records which torch each vLLM release pins and which CUDA that torch's
wheels need, from the index's metadata only (``pip install --dry-run --report`` reads a wheel's
METADATA; no wheel is downloaded). Run ``python tests/data/vllm_cuda_metadata.py 0.33.0 …`` on a
machine whose pip index serves the CUDA builds of torch, and commit vllm_cuda_metadata.json."""

import json
import re
import subprocess
import sys
from pathlib import Path
from tempfile import TemporaryDirectory

OUT = Path(__file__).with_suffix(".json")


def meta(req: str) -> list[str]:
    with TemporaryDirectory() as tmp:
        report = Path(tmp) / "r.json"
        argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps"]
        argv += ["--ignore-installed", "-q", "--report", str(report), req]
        subprocess.run(argv, check=True, capture_output=True)
        return json.loads(report.read_text())["install"][0]["metadata"].get("requires_dist", [])


def main(versions: list[str]) -> None:
    out = json.loads(OUT.read_text()) if OUT.is_file() else {}
    for v in versions:
        torch = [d for d in meta(f"vllm=={v}") if re.match(r"torch\s*==", d)]
        pin = torch[0].split("==")[1].split(";")[0].strip()
        cuda = [
            d
            for d in meta(f"torch=={pin}")
            if d.startswith(("cuda-toolkit", "nvidia-cuda-runtime"))
        ]
        if not cuda:
            sys.exit(f"torch=={pin}: no CUDA requirement (this index serves a CPU build)")
        out[v] = {"vllm_requires_torch": torch[0], "torch_requires_cuda": cuda}
    OUT.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
