"""Hidden check: totals.csv has the right header, regions, order and sums."""

import sys

EXPECTED = ["region,total", "east,75", "north,155", "south,100", "west,200"]
try:
    with open("totals.csv") as fh:
        lines = [ln.strip() for ln in fh if ln.strip()]
except FileNotFoundError:
    sys.exit("totals.csv does not exist")
if lines != EXPECTED:
    sys.exit(f"totals.csv is {lines}, expected {EXPECTED}")
print("ok")
