"""Hidden check: slugify follows its docstring."""

import os
import sys

sys.path.insert(0, os.getcwd())
from slug import slugify

CASES = {
    "Hello, World!": "hello-world",
    "  Sandboxed   agents -- 101 ": "sandboxed-agents-101",
    "C++ & Rust": "c-rust",
    "already-a-slug": "already-a-slug",
    "MiXeD_Case__Words": "mixed-case-words",
    "---": "",
    "": "",
    "caf\u00e9 cr\u00e8me": "caf-cr-me",
}
for text, want in CASES.items():
    got = slugify(text)
    if got != want:
        sys.exit(f"slugify({text!r}) = {got!r}, expected {want!r}")
print("ok")
