"""Hidden check: the two requested changes, and nothing else changed."""

import configparser
import sys

cfg = configparser.ConfigParser()
if not cfg.read("app.ini"):
    sys.exit("app.ini is missing")
want = {
    "server": {"host": "0.0.0.0", "port": "8080", "workers": "4"},
    "database": {"url": "sqlite:///app.db", "pool": "5"},
    "logging": {"level": "debug"},
}
got = {section: dict(cfg[section]) for section in cfg.sections()}
if got != want:
    sys.exit(f"app.ini holds {got}, expected {want}")
print("ok")
