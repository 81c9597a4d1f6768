"""A stand-in for ``cuzk-daemon`` on PATH: it picks its address exactly as the real daemon does
(cuzk-daemon main.rs: ``-l`` wins, else ``[daemon].listen`` of ``-c`` (default /data/zk/cuzk.toml),
else the built-in unix:///run/curio/cuzk.sock), then runs cuzk-engine there.

It refuses the built-in default rather than take it: a stand-in must never sit where a real
daemon (and Curio) expects the real one.
"""

from __future__ import annotations

import argparse
import os
import sys
import tomllib

DAEMON_DEFAULT_CONFIG = "/data/zk/cuzk.toml"
DAEMON_DEFAULT_LISTEN = "unix:///run/curio/cuzk.sock"


def main() -> None:
    parser = argparse.ArgumentParser(prog="cuzk-daemon")
    parser.add_argument("-c", "--config", default=DAEMON_DEFAULT_CONFIG)
    parser.add_argument("-l", "--listen")
    parser.add_argument("--log-level")
    args = parser.parse_args()
    listen = args.listen
    if listen is None and os.path.exists(args.config):
        with open(args.config, "rb") as handle:
            listen = tomllib.load(handle).get("daemon", {}).get("listen")
    listen = listen or DAEMON_DEFAULT_LISTEN
    if listen == DAEMON_DEFAULT_LISTEN:
        sys.exit(f"stand-in cuzk-daemon: refusing the real daemon's default address {listen}")
    argv = [sys.executable, "-m", "engine", "-c", args.config, "-l", listen]
    if args.log_level:
        argv += ["--log-level", args.log_level]
    os.execv(sys.executable, argv)


if __name__ == "__main__":
    main()
