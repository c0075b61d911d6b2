"""What the bench scripts share about a server they started over HTTP."""

import re
import subprocess
import sys
import threading

# Lines of the server's stderr read while looking for its address.
MAX_STARTUP_LINES = 100


def http_address(server: subprocess.Popen) -> str:
    """The `http://HOST:PORT…` the server prints on stderr (a pipe); exits
    if it prints none within its first lines. Its stderr is read on after
    that, so a full pipe never stalls the server."""
    for _ in range(MAX_STARTUP_LINES):
        line = server.stderr.readline().decode(errors="replace")
        if not line:
            break
        found = re.search(r"http://[\d.]+:\d+\S*", line)
        if found:
            threading.Thread(target=server.stderr.read, daemon=True).start()
            return found.group(0)
    sys.exit("the server printed no http://HOST:PORT on stderr")
