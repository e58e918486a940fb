"""Real servers on 127.0.0.1 for the remote-scene tests and scripts/bench_remote.sh.

  Nginx(root)            Debian nginx(-light): static files with Range support, keep-alive,
                         /forbidden/... answers 403, optional limit_rate (bandwidth emulation).
  FaultProxy(upstream)   a small HTTP/1.1 proxy in front of nginx that fails every n-th GET
                         deterministically: HTTP 503, or a connection reset (RST) before any byte.
  S3rver(directory)      the npm package s3rver (pinned), an S3-compatible server; installed on first
                         use into HSIPIPE_REMOTE_NPM_DIR (default <build>/remote-npm) with npm.

Every server is a context manager: it is stopped (and its process reaped) on exit, also when the
test fails. Ports are free ports picked by the kernel. Nothing listens beyond 127.0.0.1.
Use /usr/bin/python3 (standard library only here).
"""
import contextlib
import http.client
import http.server
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

S3RVER_VERSION = "3.7.1"
S3RVER_KEY = "S3RVER"  # s3rver's fixed access key id and secret
LOOPBACK = "127.0.0.1"


class Unavailable(Exception):
    """A server cannot run here (package missing): tests skip, or fail under CI=true."""


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def wait_port(port, proc=None, timeout=20.0, what="server"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode} before listening on {port}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.2)
            if s.connect_ex((LOOPBACK, port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {LOOPBACK}:{port} within {timeout} s")


def stop_process(proc, timeout=10.0):
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout)


def find_nginx():
    for p in (shutil.which("nginx"), "/usr/sbin/nginx"):
        if p and os.access(p, os.X_OK):
            return p
    raise Unavailable("nginx not found (Debian package nginx-light; scripts/setup.sh installs it)")


class Nginx:
    """nginx serving `root` on a free loopback port. limit_rate: bytes/s per connection (None = off)."""

    def __init__(self, root, limit_rate=None, workdir=None):
        self.root = os.path.abspath(root)
        self.limit_rate = limit_rate
        self.port = None
        self.proc = None
        self._own_dir = workdir is None
        self.dir = workdir or tempfile.mkdtemp(prefix="hsipipe-nginx-")

    @property
    def url(self):
        return f"http://{LOOPBACK}:{self.port}"

    def access_log(self):
        path = os.path.join(self.dir, "access.log")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return f.read().splitlines()

    def __enter__(self):
        nginx = find_nginx()
        self.port = free_port()
        d = self.dir
        os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
        rate = f"limit_rate {int(self.limit_rate)};" if self.limit_rate else ""
        user = "user root;" if os.geteuid() == 0 else ""
        conf = f"""
{user}
worker_processes 2;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 256; }}
http {{
  log_format ranges '$request_method $uri $status $body_bytes_sent "$http_range"';
  access_log {d}/access.log ranges;
  client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp;
  uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;
  sendfile on; tcp_nopush on;
  keepalive_timeout 60; keepalive_requests 100000;
  default_type application/octet-stream;
  server {{
    listen {LOOPBACK}:{self.port};
    root {self.root};
    location /forbidden/ {{ return 403; }}
    location / {{ {rate} }}
  }}
}}
"""
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen(
            [nginx, "-p", d, "-c", os.path.join(d, "nginx.conf"), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "stderr.log"), "w"),
            start_new_session=True)
        try:
            wait_port(self.port, self.proc, what="nginx")
        except Exception:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        stop_process(self.proc)
        if self._own_dir and not os.environ.get("HSIPIPE_KEEP_TMP"):
            shutil.rmtree(self.dir, ignore_errors=True)
        return False


class FaultProxy:
    """Forwards GET/HEAD (with their Range header) to http://127.0.0.1:upstream_port and fails every
    `every`-th GET: mode "503" answers 503 Service Unavailable, mode "reset" closes the connection with
    an RST before sending anything. Counts requests and injected faults (deterministic)."""

    def __init__(self, upstream_port, every=4, mode="503"):
        assert mode in ("503", "reset") and every >= 2
        self.upstream_port, self.every, self.mode = upstream_port, every, mode
        self.gets = 0
        self.faults = 0
        self.lock = threading.Lock()
        self.server = None
        self.thread = None

    @property
    def url(self):
        return f"http://{LOOPBACK}:{self.port}"

    def __enter__(self):
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self, method):
                if method == "GET":
                    with proxy.lock:
                        proxy.gets += 1
                        fail = proxy.gets % proxy.every == 0
                        if fail:
                            proxy.faults += 1
                    if fail and proxy.mode == "503":
                        body = b"injected fault\n"
                        self.send_response(503)
                        self.send_header("Content-Length", str(len(body)))
                        self.send_header("Content-Type", "text/plain")
                        self.end_headers()
                        self.wfile.write(body)
                        return
                    if fail and proxy.mode == "reset":
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        self.close_connection = True
                        self.connection.close()
                        return
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("range", "if-range", "accept")}
                conn = http.client.HTTPConnection(LOOPBACK, proxy.upstream_port, timeout=30)
                try:
                    conn.request(method, self.path, headers=headers)
                    r = conn.getresponse()
                    data = r.read()
                    self.send_response(r.status, r.reason)
                    for k, v in r.getheaders():
                        if k.lower() not in ("connection", "keep-alive", "transfer-encoding", "server", "date"):
                            self.send_header(k, v)
                    if method == "HEAD":
                        self.end_headers()
                    else:
                        if r.getheader("Content-Length") is None:
                            self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                finally:
                    conn.close()

            def do_GET(self):
                self._forward("GET")

            def do_HEAD(self):
                self._forward("HEAD")

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server((LOOPBACK, 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.server:
            self.server.shutdown()
            self.server.server_close()
        return False


def npm_dir():
    d = os.environ.get("HSIPIPE_REMOTE_NPM_DIR")
    if d:
        return d
    build = os.environ.get("HSIPIPE_BUILD_DIR") or os.path.dirname(os.environ.get("HSIPIPE_BIN", "build/hsipipe"))
    return os.path.join(os.path.abspath(build or "build"), "remote-npm")


def ensure_s3rver():
    """Path of the s3rver executable, installing s3rver@S3RVER_VERSION with npm on first use."""
    d = npm_dir()
    exe = os.path.join(d, "node_modules", ".bin", "s3rver")
    pkg = os.path.join(d, "node_modules", "s3rver", "package.json")
    if os.path.exists(exe) and os.path.exists(pkg):
        import json
        with open(pkg) as f:
            if json.load(f).get("version") == S3RVER_VERSION:
                return exe
    if not shutil.which("node") or not shutil.which("npm"):
        raise Unavailable("node/npm not found: cannot install the S3-compatible test server s3rver")
    os.makedirs(d, exist_ok=True)
    cmd = ["npm", "install", "--prefix", d, "--no-audit", "--no-fund", "--loglevel=error",
           f"s3rver@{S3RVER_VERSION}"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    if r.returncode != 0 or not os.path.exists(exe):
        raise Unavailable(f"npm install s3rver@{S3RVER_VERSION} failed:\n{r.stdout[-2000:]}")
    return exe


class S3rver:
    """s3rver on a free loopback port with bucket `bucket`; env() gives the AWS_* variables for it."""

    def __init__(self, bucket="hsi"):
        self.bucket = bucket
        self.proc = None
        self.dir = tempfile.mkdtemp(prefix="hsipipe-s3rver-")

    def env(self, secret=S3RVER_KEY):
        return {"AWS_S3_ENDPOINT": f"http://{LOOPBACK}:{self.port}", "AWS_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": S3RVER_KEY, "AWS_SECRET_ACCESS_KEY": secret,
                "AWS_VIRTUAL_HOSTING": "FALSE"}

    def __enter__(self):
        exe = ensure_s3rver()
        self.port = free_port()
        self.proc = subprocess.Popen(
            [exe, "-d", os.path.join(self.dir, "data"), "-a", LOOPBACK, "-p", str(self.port), "--silent",
             "--no-vhost-buckets", "--configure-bucket", self.bucket],
            stdout=open(os.path.join(self.dir, "stdout.log"), "w"), stderr=subprocess.STDOUT,
            start_new_session=True)
        try:
            wait_port(self.port, self.proc, timeout=60, what="s3rver")
        except Exception:
            self.__exit__(None, None, None)
            raise
        return self

    def put(self, local_path, key):
        """Uploads a file with GDAL's /vsis3/ writer (Debian python3-gdal), signed with s3rver's key."""
        from osgeo import gdal
        gdal.UseExceptions()
        env = self.env()
        env["AWS_S3_ENDPOINT"] = f"{LOOPBACK}:{self.port}"
        env["AWS_HTTPS"] = "NO"
        for k, v in env.items():
            gdal.SetConfigOption(k, v)
        try:
            with open(local_path, "rb") as f:
                data = f.read()
            fp = gdal.VSIFOpenL(f"/vsis3/{self.bucket}/{key}", "wb")
            if fp is None:
                raise RuntimeError(f"cannot open /vsis3/{self.bucket}/{key} for writing")
            gdal.VSIFWriteL(data, 1, len(data), fp)
            if gdal.VSIFCloseL(fp) != 0:
                raise RuntimeError(f"upload of {key} to s3rver failed")
        finally:
            for k in env:
                gdal.SetConfigOption(k, None)

    def __exit__(self, *exc):
        stop_process(self.proc)
        if not os.environ.get("HSIPIPE_KEEP_TMP"):
            shutil.rmtree(self.dir, ignore_errors=True)
        return False


SKIP = 77  # ctest SKIP_RETURN_CODE of the remote tests


def skip_or_fail(msg):
    """Skip (exit 77, which ctest reports as skipped), or fail under CI=true."""
    if os.environ.get("CI") == "true":
        print(f"FAIL (CI=true): {msg}", file=sys.stderr)
        sys.exit(1)
    print(f"SKIPPED: {msg}")
    sys.exit(SKIP)
