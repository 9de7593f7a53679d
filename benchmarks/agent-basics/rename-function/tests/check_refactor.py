"""Hidden check: the new name works everywhere and the old one is gone."""

import os
import pathlib
import re
import sys

sys.path.insert(0, os.getcwd())
from shop import cart, pricing, report

assert hasattr(pricing, "total_price"), "shop.pricing.total_price is missing"
assert not hasattr(pricing, "calc"), "shop.pricing.calc still exists"
assert pricing.total_price([(10.0, 2), (2.5, 4)]) == 36.0
c = cart.Cart()
c.add(10.0, 2)
c.add(1.25)
assert c.total() == 25.5, c.total()
assert report.summary([c, cart.Cart()]) == {"carts": 2, "revenue": 25.5}
for path in pathlib.Path("shop").rglob("*.py"):
    if re.search(r"\bcalc\b", path.read_text()):
        sys.exit(f"{path} still mentions calc")
print("ok")
