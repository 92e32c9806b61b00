"""A test worker for the pool: echoes, sleeps, spins, renews its budget or exits on request.

With ``STALL_IDLE_SPIN=<seconds>`` in its environment it also runs idle steps that each burn
that much CPU, as a warming worker does between requests."""

import os
import time

from rlvr.sandbox.pool import renew_budget, serve


def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def idle_steps(seconds):
    while True:
        spin(seconds)
        yield


def handle(request):
    if "sleep" in request:
        time.sleep(request["sleep"])
    if "spin" in request:
        spin(request["spin"])
    for _ in range(request.get("renewals", 0)):
        renew_budget()
        spin(request["spin"])
    if "exit" in request:
        os._exit(request["exit"])
    return {"echo": request.get("echo")}


if __name__ == "__main__":
    idle = float(os.environ.get("STALL_IDLE_SPIN") or 0)
    serve(handle, idle_steps=idle_steps(idle) if idle else None)
