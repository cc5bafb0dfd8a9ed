"""The thin HTTP front of the Temporal peer (HTTP/1.1, keep-alive), on 127.0.0.1:$PORT.

  PUT  /inventory/{sku}        {"available":n,"priceCents":p}  -> 200; written to SQLite directly
  POST /orders                 the order JSON -> 202 {"orderId":..} once start_workflow returned
  POST /orders/{id}/approval   {"decision":"approve"|"reject"} -> 200 (a signal to the workflow)
  GET  /orders/{id}/status     -> 200 {"status":..,"reason":..}; 404 when unknown
  GET  /stats[?prefix=p]       -> {"<STATUS>": count, ..} (of the orders whose id starts with p)
  GET  /readyz                 -> 200 when the Temporal server answers, 503 before
  GET  /audit                  -> every record (see README.md)

Environment: PORT (required), PEER_DB (required), TEMPORAL_ADDRESS (127.0.0.1:7233),
TEMPORAL_NAMESPACE (default), TASK_QUEUE (orders), APPROVAL_THRESHOLD_CENTS (100000).
"""

import asyncio
import concurrent.futures
import json
import os
import sys
from datetime import timedelta
from typing import Any

from aiohttp import web
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

import db
from workflows import Address, Line, OrderInput, OrderSaga

TASK_QUEUE = os.environ.get("TASK_QUEUE", "orders")
THRESHOLD = int(os.environ.get("APPROVAL_THRESHOLD_CENTS", "100000"))

CLIENT = web.AppKey("client", Client)
READER = web.AppKey("reader", Any)
WRITERS = web.AppKey("writers", concurrent.futures.ThreadPoolExecutor)


class BadRequest(Exception):
    pass


def _str(obj: dict, key: str, required: bool = True) -> str:
    value = obj.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise BadRequest(f"{key}: a non-empty string is required")
    return value


def _int(obj: dict, key: str, minimum: int) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise BadRequest(f"{key}: an integer >= {minimum} is required")
    return value


def parse_order(body: Any) -> OrderInput:
    if not isinstance(body, dict):
        raise BadRequest("the order must be a JSON object")
    addr = body.get("shippingAddress")
    if not isinstance(addr, dict):
        raise BadRequest("shippingAddress: an object is required")
    items = body.get("items")
    if not isinstance(items, list) or not items:
        raise BadRequest("items: a non-empty list is required")
    lines = []
    for item in items:
        if not isinstance(item, dict):
            raise BadRequest("items: each item must be an object")
        # unitPriceCents is the caller's and is never used: the saga prices from the catalog.
        lines.append(Line(sku=_str(item, "sku"), quantity=_int(item, "quantity", 1)))
    return OrderInput(
        order_id=_str(body, "orderId"),
        customer_id=_str(body, "customerId"),
        currency=_str(body, "currency"),
        shipping_address=Address(
            name=_str(addr, "name", False),
            line1=_str(addr, "line1", False),
            city=_str(addr, "city", False),
            postal_code=_str(addr, "postalCode"),
            country=_str(addr, "country", False),
        ),
        lines=lines,
        payment_method=_str(body, "paymentMethod"),
        approval_threshold_cents=THRESHOLD,
    )


async def json_body(request: web.Request) -> Any:
    try:
        return json.loads(await request.read())
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the body is not JSON")


def bad(message: str) -> web.Response:
    return web.json_response({"error": message}, status=400)


# --- inventory -------------------------------------------------------------------------------


def _put_sku(sku: str, available: int, price: int) -> int:
    """Sets the SKU's stock and price; `given` grows by what the stock grew (or shrinks by what it
    was lowered), so given = available + what orders hold stays true."""
    with db.write_txn() as c:
        c.execute(
            """INSERT INTO skus (sku, available, price_cents, given) VALUES (?, ?, ?, ?)
               ON CONFLICT (sku) DO UPDATE SET
                   given = skus.given + excluded.available - skus.available,
                   available = excluded.available, price_cents = excluded.price_cents""",
            (sku, available, price, available),
        )
        return c.execute("SELECT given FROM skus WHERE sku = ?", (sku,)).fetchone()[0]


async def put_inventory(request: web.Request) -> web.Response:
    sku = request.match_info["sku"]
    try:
        body = await json_body(request)
        if not isinstance(body, dict):
            raise BadRequest("a JSON object is required")
        available = _int(body, "available", 0)
        price = _int(body, "priceCents", 0)
    except BadRequest as err:
        return bad(str(err))
    loop = asyncio.get_running_loop()
    given = await loop.run_in_executor(request.app[WRITERS], _put_sku, sku, available, price)
    return web.json_response({"sku": sku, "available": available, "priceCents": price, "given": given})


# --- orders ----------------------------------------------------------------------------------


async def post_order(request: web.Request) -> web.Response:
    try:
        order = parse_order(await json_body(request))
    except BadRequest as err:
        return bad(str(err))
    client = request.app[CLIENT]
    try:
        # Workflow id = order id. A running saga of that id is reused (USE_EXISTING) and a
        # finished one is not started again (REJECT_DUPLICATE): a second POST starts nothing.
        await client.start_workflow(
            OrderSaga.run,
            order,
            id=order.order_id,
            task_queue=TASK_QUEUE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except WorkflowAlreadyStartedError:
        pass
    return web.json_response({"orderId": order.order_id}, status=202)


def _order_row(conn, order_id: str):
    return conn.execute("SELECT status, reason FROM orders WHERE id = ?", (order_id,)).fetchone()


async def post_approval(request: web.Request) -> web.Response:
    order_id = request.match_info["id"]
    try:
        body = await json_body(request)
        decision = body.get("decision") if isinstance(body, dict) else None
        if decision not in ("approve", "reject"):
            raise BadRequest('decision: "approve" or "reject" is required')
    except BadRequest as err:
        return bad(str(err))
    handle = request.app[CLIENT].get_workflow_handle(order_id)
    try:
        await handle.signal(OrderSaga.approval, decision)
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        # Not found: no such order, or its saga has already finished.
        if _order_row(request.app[READER], order_id) is None:
            return web.json_response({"error": "unknown order"}, status=404)
        return web.json_response({"error": "the order is no longer waiting"}, status=409)
    return web.json_response({"orderId": order_id, "decision": decision})


async def get_status(request: web.Request) -> web.Response:
    order_id = request.match_info["id"]
    row = _order_row(request.app[READER], order_id)
    if row is not None:
        return web.json_response({"status": row[0], "reason": row[1]})
    # Started, but its first step has not recorded anything yet: ask Temporal whether it exists.
    try:
        desc = await request.app[CLIENT].get_workflow_handle(order_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return web.json_response({"error": "unknown order"}, status=404)
        raise
    if desc.status == WorkflowExecutionStatus.RUNNING:
        return web.json_response({"status": "ACCEPTED", "reason": None})
    # Closed without a record: it failed or was terminated outside the saga's own paths.
    return web.json_response({"status": desc.status.name if desc.status else None, "reason": None})


async def get_stats(request: web.Request) -> web.Response:
    # ?prefix= counts one phase of the bench's orders (their ids share it) and no others.
    prefix = request.query.get("prefix", "")
    upper = prefix + "\uffff"
    rows = request.app[READER].execute(
        "SELECT status, count(*) FROM orders WHERE id >= ? AND id < ? GROUP BY status",
        (prefix, upper),
    )
    return web.json_response({status: n for status, n in rows})


async def get_readyz(request: web.Request) -> web.Response:
    # Ready when the Temporal server answers: orders can be started again.
    try:
        up = await request.app[CLIENT].service_client.check_health(timeout=timedelta(seconds=2))
    except Exception as e:  # any failure means "not yet"
        return web.json_response({"ready": False, "why": str(e)}, status=503)
    if not up:
        return web.json_response({"ready": False, "why": "the workflow service is not serving"}, status=503)
    return web.json_response({"ready": True})


async def get_audit(request: web.Request) -> web.Response:
    conn = request.app[READER]
    conn.execute("BEGIN")  # one snapshot for all tables
    try:
        skus = {
            sku: {"available": available, "given": given}
            for sku, available, given in conn.execute("SELECT sku, available, given FROM skus")
        }
        orders: dict[str, dict] = {}
        for oid, status, reason in conn.execute("SELECT id, status, reason FROM orders"):
            orders[oid] = {"status": status, "reason": reason, "reserved": {}, "charge": None, "shipped": False}

        def order(oid: str) -> dict:
            return orders.setdefault(
                oid, {"status": None, "reason": None, "reserved": {}, "charge": None, "shipped": False}
            )

        for oid, sku, qty, released in conn.execute(
            "SELECT order_id, sku, quantity, released FROM reservations"
        ):
            order(oid)["reserved"][sku] = {"quantity": qty, "released": bool(released)}
        for oid, amount, refunded in conn.execute("SELECT order_id, amount_cents, refunded FROM charges"):
            order(oid)["charge"] = {"amountCents": amount, "refunded": bool(refunded)}
        for (oid,) in conn.execute("SELECT order_id FROM shipments"):
            order(oid)["shipped"] = True
    finally:
        conn.execute("COMMIT")
    return web.json_response({"skus": skus, "orders": orders})


# --- app -------------------------------------------------------------------------------------


async def on_startup(app: web.Application) -> None:
    address = os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233")
    namespace = os.environ.get("TEMPORAL_NAMESPACE", "default")
    waited = 0.0
    while True:
        try:
            app[CLIENT] = await Client.connect(address, namespace=namespace)
            break
        except Exception:
            if waited >= 60:
                raise
            await asyncio.sleep(0.2)
            waited += 0.2
    db.init_schema()
    app[READER] = db.connect()
    # Inventory writes block on fsync: they run off the event loop, one at a time.
    app[WRITERS] = concurrent.futures.ThreadPoolExecutor(max_workers=1)


async def on_cleanup(app: web.Application) -> None:
    app[WRITERS].shutdown(wait=True)
    app[READER].close()


def make_app() -> web.Application:
    app = web.Application()
    app.router.add_put("/inventory/{sku}", put_inventory)
    app.router.add_post("/orders", post_order)
    app.router.add_post("/orders/{id}/approval", post_approval)
    app.router.add_get("/orders/{id}/status", get_status)
    app.router.add_get("/stats", get_stats)
    app.router.add_get("/readyz", get_readyz)
    app.router.add_get("/audit", get_audit)
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app


if __name__ == "__main__":
    db.db_path()  # fail early when PEER_DB is missing
    port = int(os.environ["PORT"])
    print(f"front: http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    web.run_app(make_app(), host="127.0.0.1", port=port, access_log=None, print=None)
