"""A test worker for the pool: echoes, sleeps or exits on request."""

import os
import time

from sandbox.pool import serve


def handle(request):
    if "sleep" in request:
        time.sleep(request["sleep"])
    if "exit" in request:
        os._exit(request["exit"])
    return {"echo": request.get("echo")}


if __name__ == "__main__":
    serve(handle)
