"""Runs torchrun (python3 -m torch.distributed.run, static rendezvous) on a
free port: python3 run_torchrun.py NPROC SCRIPT ARGS... (ctest may run tests
in parallel, so a fixed port could clash)."""
import socket
import subprocess
import sys
import tempfile

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
nproc, script, *args = sys.argv[1:]
with tempfile.TemporaryDirectory(prefix="loom-torchrun-") as logs:
    # Debian's torch 1.13 under Python 3.11 cannot parse torchrun's default
    # "--redirects 0 --tee 0" (its Std IntFlag lookup misses NONE and returns
    # None); "1" (stdout, teed to the console) parses.
    sys.exit(subprocess.call([sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
                              "--nproc_per_node", nproc, "--master_addr", "127.0.0.1", "--master_port", str(port),
                              "--redirects", "1", "--tee", "1", "--log_dir", logs, "--monitor_interval", "0.2",
                              script, *args]))
