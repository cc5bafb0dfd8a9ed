"""The Temporal worker of the order-saga peer: runs the OrderSaga workflow (workflows.py) and its
activities (activities.py) from one task queue.

Environment:
  PEER_DB            the SQLite file of the peer's records (required)
  TEMPORAL_ADDRESS   the dev server's frontend, default 127.0.0.1:7233
  TEMPORAL_NAMESPACE default "default"
  TASK_QUEUE         default "orders"
  WORKER_ACTIVITY_SLOTS / WORKER_WORKFLOW_SLOTS  override the slot counts chosen below

Run: python worker.py  (SIGINT/SIGTERM shut it down gracefully)
"""

import asyncio
import concurrent.futures
import logging
import os
import signal
import sys

from temporalio.client import Client
from temporalio.worker import Worker

import activities
import db
from workflows import OrderSaga

# Concurrency, for a 2-core machine that also runs the dev server and the HTTP front.
# - Activities are blocking SQLite transactions. SQLite has one writer at a time and a commit
#   spends most of its time in fsync (the GIL is released there), so more than a handful of threads
#   only queue on the write lock; 16 keeps the lock busy while some threads wait on the server's
#   answers. The executor has exactly as many threads as there are activity slots (the SDK warns
#   when it has fewer).
# - Workflow tasks are pure Python under the GIL: one core at most whatever the count, so the slot
#   count only decides how many tasks wait inside the process for the GIL. 16 (the SDK's default
#   is 100 slots of each kind) keeps the pollers fed without hundreds of threads
#   contending for one core.
# - Measured on 2 cores (README.md, "Rough rate"): the server, not the worker, is the limit; one
#   worker process uses about half a core, and a second process does not raise the rate.
# - Pollers: the SDK's default (up to 5 per kind) is enough for one local server.
# - Sticky cache: the SDK's default, 1000 workflows. With more sagas open at once (orders parked
#   for approval) the least recent are evicted and replayed from their history when they next
#   get a task, which is how Temporal is meant to work.
ACTIVITY_SLOTS = int(os.environ.get("WORKER_ACTIVITY_SLOTS", "16"))
WORKFLOW_SLOTS = int(os.environ.get("WORKER_WORKFLOW_SLOTS", "16"))


async def connect(address: str, namespace: str) -> Client:
    """Connects, waiting for the server for up to a minute (it may still be starting)."""
    delay, waited = 0.2, 0.0
    while True:
        try:
            return await Client.connect(address, namespace=namespace)
        except Exception:
            if waited >= 60:
                raise
            await asyncio.sleep(delay)
            waited += delay


async def main() -> None:
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "WARNING"), stream=sys.stderr)
    db.init_schema()
    address = os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233")
    namespace = os.environ.get("TEMPORAL_NAMESPACE", "default")
    task_queue = os.environ.get("TASK_QUEUE", "orders")
    client = await connect(address, namespace)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    with concurrent.futures.ThreadPoolExecutor(max_workers=ACTIVITY_SLOTS) as executor:
        worker = Worker(
            client,
            task_queue=task_queue,
            workflows=[OrderSaga],
            activities=activities.ALL,
            activity_executor=executor,
            max_concurrent_activities=ACTIVITY_SLOTS,
            max_concurrent_workflow_tasks=WORKFLOW_SLOTS,
        )
        async with worker:
            print(f"worker: task queue {task_queue} on {address}", file=sys.stderr, flush=True)
            await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
