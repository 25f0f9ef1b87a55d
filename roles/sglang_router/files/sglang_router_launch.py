"""Starts SGLang's router (smg, the Shepherd Model Gateway) with its API key handed over in-process.

systemd passes the key in the environment, from the secrets file (EnvironmentFile=, mode 0600);
this launcher takes it out of the environment and into the router's parsed arguments, so the
key is never a word of any process's argv, of the unit or of `systemctl show`. Every other
argument is the router's own, parsed by the router's own parser.
"""
import os
import sys

from smg.launch_router import launch_router, parse_router_args

KEY_VARIABLE = "SGLANG_ROUTER_API_KEY"


def main():
    args = parse_router_args(sys.argv[1:])
    args.api_key = os.environ.pop(KEY_VARIABLE, "") or None
    launch_router(args)


if __name__ == "__main__":
    main()
