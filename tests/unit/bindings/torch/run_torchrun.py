"""Runs the installed torch's torchrun (python -m torch.distributed.run,
static rendezvous) on a free port (ctest may run tests in parallel, so a
fixed port could clash):
    python run_torchrun.py [--probe] NPROC SCRIPT ARGS...
--probe first runs `SCRIPT --probe` alone: if it exits 77 (skip, with its
reason on stdout) this exits 77 too, before torchrun's failure report could
hide the reason."""
import socket
import subprocess
import sys
import tempfile

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
argv = sys.argv[1:]
probe_first = argv[:1] == ["--probe"]
nproc, script, *args = argv[1:] if probe_first else argv
if probe_first:
    probe = subprocess.run([sys.executable, script, "--probe"], capture_output=True, text=True)
    if probe.returncode == 77:
        print(probe.stdout, end="")
        sys.exit(77)
with tempfile.TemporaryDirectory(prefix="loom-torchrun-") as logs:
    sys.exit(subprocess.call([sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
                              "--nproc_per_node", nproc, "--master_addr", "127.0.0.1", "--master_port", str(port),
                              "--log_dir", logs, "--monitor_interval", "0.2", script, *args]))
