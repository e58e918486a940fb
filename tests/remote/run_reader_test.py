#!/usr/bin/python3
"""Driver of the [server] cases of test_remote: builds the remote world (tests/remote/fixture.py:
a synthetic scene -> `hsipipe cog` -> nginx, 503 and reset proxies, s3rver), runs
`test_remote [server]` with the URLs in HSIPIPE_REMOTE_* variables, and stops every server on exit.
Usage: run_reader_test.py PATH/TO/test_remote [catch2 args...]
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture  # noqa: E402
import servers  # noqa: E402


def main():
    exe = sys.argv[1]
    extra = sys.argv[2:] or ["[server]"]
    try:
        servers.find_nginx()
    except servers.Unavailable as e:
        servers.skip_or_fail(str(e))
    s3 = True
    try:
        servers.ensure_s3rver()
    except servers.Unavailable as e:
        if os.environ.get("CI") == "true":
            servers.skip_or_fail(str(e))
        print(f"note: S3 cases skipped: {e}")
        s3 = False
        extra = extra + ["~[s3]"]
    with tempfile.TemporaryDirectory(prefix="hsipipe-remote-") as d:
        with fixture.remote_world(d, s3=s3) as w:
            env = dict(os.environ)
            env.update(w.env)
            env.update({
                "HSIPIPE_REMOTE_LOCAL": w.cog,
                "HSIPIPE_REMOTE_HTTP": w.http,
                "HSIPIPE_REMOTE_HTTP_MISSING": w.http_missing,
                "HSIPIPE_REMOTE_HTTP_FORBIDDEN": w.http_forbidden,
                "HSIPIPE_REMOTE_FAULT503": w.fault503,
                "HSIPIPE_REMOTE_FAULTRESET": w.faultreset,
            })
            if s3:
                env["HSIPIPE_REMOTE_S3"] = w.s3
                env["HSIPIPE_REMOTE_S3_MISSING"] = w.s3_missing
            r = subprocess.run([exe] + extra, env=env, timeout=240)
            print(f"fault proxies: 503 injected {w.proxy503.faults} of {w.proxy503.gets} GETs, "
                  f"resets {w.proxyreset.faults} of {w.proxyreset.gets} GETs")
            if r.returncode == 0 and (w.proxy503.faults == 0 or w.proxyreset.faults == 0):
                print("FAIL: a fault proxy injected no fault, the retry cases proved nothing", file=sys.stderr)
                return 1
            return r.returncode


if __name__ == "__main__":
    sys.exit(main())
