cat > slug.py <<'PY'
"""URL slugs."""

import re


def slugify(text):
    """Turn a title into a URL slug (lower-case ASCII letters and digits joined by "-")."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
PY
