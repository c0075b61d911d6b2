"""Where an MCP server's time goes per call under the `mcp` bench's HTTP
client: user and kernel CPU, context switches by thread, page faults.

Usage: python3 server_time.py MCP_BENCH CLIENTS -- COMMAND...

Starts COMMAND (it must print its `http://HOST:PORT` on stderr and serve
MCP at `/mcp`), drives it once with `MCP_BENCH --drive-http` (ten rounds
of 2,000 `echo` calls) to warm it up, then once more while reading its
`/proc` counters before and after, and prints them per call. MCP_BENCH is
the `mcp` bench's binary (`cargo bench -p toolhost-cli --bench mcp
--no-run` prints its path); `MCP_BENCH --floor-http` is the floor.

Example (release build, store on tmpfs):
  python3 cli/benches/server_time.py target/release/deps/mcp-HASH 16 -- \\
    target/release/toolhost serve text_tools.wasm --http 127.0.0.1:0 \\
    --cache-dir /dev/shm/CACHE --state-dir /dev/shm/STATE
"""

import os
import subprocess
import sys

from served import http_address

# Calls in one round of `--drive-http` (the bench's `CALLS`).
CALLS_PER_ROUND = 2_000
# How long a drive may take before the measurement is abandoned.
DRIVE_TIMEOUT_S = 600
# How long a server may take to stop when asked, before it is killed.
STOP_TIMEOUT_S = 30


def process_times(pid: int) -> tuple:
    """User and kernel CPU in clock ticks, and minor page faults."""
    with open(f"/proc/{pid}/stat") as f:
        # The command name may hold spaces: fields count from after it.
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12]), int(fields[7])


def switches(pid: int) -> dict:
    """Voluntary and involuntary context switches, summed by thread name."""
    by_name = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except FileNotFoundError:
            continue  # the thread ended meanwhile
        counts = by_name.setdefault(name, [0, 0])
        counts[0] += int(status["voluntary_ctxt_switches"])
        counts[1] += int(status["nonvoluntary_ctxt_switches"])
    return by_name


def drive(bench: str, url: str, pid: int, clients: str) -> int:
    """Runs one drive; returns the calls it made."""
    out = subprocess.run(
        [bench, "--drive-http", url, str(pid), clients],
        capture_output=True,
        text=True,
        check=True,
        timeout=DRIVE_TIMEOUT_S,
    ).stdout
    return CALLS_PER_ROUND * sum("calls/s" in line for line in out.splitlines())


def stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def measure(bench: str, clients: str, command: list) -> None:
    server = subprocess.Popen(command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = http_address(server)
        drive(bench, url, server.pid, clients)
        times, before = process_times(server.pid), switches(server.pid)
        calls = drive(bench, url, server.pid, clients)
        after_times, after = process_times(server.pid), switches(server.pid)
    finally:
        stop(server)
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    user, kernel, faults = (b - a for a, b in zip(times, after_times))
    print(f"{calls} calls, {clients} client(s), per call:")
    print(f"  user {user * tick_us / calls:.1f} µs, kernel {kernel * tick_us / calls:.1f} µs")
    print(f"  minor page faults {faults / calls:.3f}")
    print("  context switches (voluntary, involuntary) by thread:")
    for name, (voluntary, involuntary) in sorted(after.items()):
        was = before.get(name, [0, 0])
        print(f"    {name:<16} {(voluntary - was[0]) / calls:.2f} {(involuntary - was[1]) / calls:.2f}")


def main() -> None:
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.exit(__doc__)
    measure(sys.argv[1], sys.argv[2], sys.argv[4:])


if __name__ == "__main__":
    main()
