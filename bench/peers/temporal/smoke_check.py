"""The HTTP side of smoke.sh: drives the front and checks its records against the contract.

  python smoke_check.py sagas URL ADDRESS         one order per outcome; exact records checked
  python smoke_check.py post URL PREFIX N RATE    posts N small orders at about RATE/s
                                                  (retrying while the server is down)
  python smoke_check.py finished URL PREFIX N     waits until the N orders have all finished
  python smoke_check.py invariants URL            the invariants the bench checks, on every record

Exits non-zero (with the reason on stderr) on the first failure.
"""

import asyncio
import json
import os
import sys
import time

import aiohttp
from temporalio.client import Client

THRESHOLD = 100000


class Failed(Exception):
    pass


def check(cond: bool, what: str) -> None:
    if not cond:
        raise Failed(what)


def order(oid: str, lines: list[tuple[str, int]], method: str = "pm_card_visa", postal: str = "N1 9GU") -> dict:
    return {
        "orderId": oid,
        "customerId": "cus_smoke",
        "currency": "EUR",
        "shippingAddress": {"name": "Ada", "line1": "1 Way", "city": "London", "postalCode": postal, "country": "GB"},
        # The caller's price is deliberately wrong: the saga must price from the catalog.
        "items": [{"sku": sku, "quantity": q, "unitPriceCents": 1} for sku, q in lines],
        "paymentMethod": method,
    }


async def req(http: aiohttp.ClientSession, method: str, path: str, body=None, raw: bytes | None = None):
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    async with http.request(method, path, data=data) as r:
        text = await r.text()
        try:
            return r.status, json.loads(text) if text else None
        except ValueError:
            return r.status, text


async def wait_status(http, oid: str, want: set[str], timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status, body = await req(http, "GET", f"/orders/{oid}/status")
        if status == 200 and body["status"] in want:
            return body
        if time.monotonic() > deadline:
            raise Failed(f"{oid}: still {status} {body} after {timeout}s, wanted {sorted(want)}")
        await asyncio.sleep(0.1)


def invariants(audit: dict, allow_waiting: bool = True) -> None:
    """What the bench checks on every peer after a run."""
    held: dict[str, int] = {}
    for oid, o in audit["orders"].items():
        st = o["status"]
        for sku, r in o["reserved"].items():
            if not r["released"]:
                held[sku] = held.get(sku, 0) + r["quantity"]
        if st == "COMPLETED":
            check(o["charge"] is not None and not o["charge"]["refunded"], f"{oid}: completed but charge {o['charge']}")
            check(o["shipped"], f"{oid}: completed but not shipped")
            check(o["reserved"] and all(not r["released"] for r in o["reserved"].values()),
                  f"{oid}: completed but stock not held: {o['reserved']}")
        elif st == "CANCELLED":
            check(o["charge"] is None or o["charge"]["refunded"], f"{oid}: cancelled with a charge standing")
            check(all(r["released"] for r in o["reserved"].values()), f"{oid}: cancelled, stock not released")
            check(not o["shipped"], f"{oid}: cancelled but shipped")
        else:
            check(allow_waiting and st == "AWAITING_APPROVAL", f"{oid}: left non-terminal in {st}")
    for sku, s in audit["skus"].items():
        check(s["given"] == s["available"] + held.get(sku, 0),
              f"{sku}: given {s['given']} != available {s['available']} + held {held.get(sku, 0)}")


async def sagas(url: str, address: str) -> None:
    async with aiohttp.ClientSession(url) as http:
        # Stock: A cheap and plenty, B dear and scarce (two B's are over the approval threshold).
        for sku, available, price in (("smoke-a", 100, 1500), ("smoke-b", 10, 60000)):
            status, body = await req(http, "PUT", f"/inventory/{sku}", {"available": available, "priceCents": price})
            check(status == 200, f"PUT /inventory/{sku}: {status} {body}")

        # Malformed bodies, unknown orders.
        status, _ = await req(http, "POST", "/orders", raw=b"{not json")
        check(status == 400, f"malformed JSON: {status}, wanted 400")
        status, _ = await req(http, "POST", "/orders", {"orderId": "x", "items": []})
        check(status == 400, f"order without lines: {status}, wanted 400")
        status, _ = await req(http, "GET", "/orders/smoke-nope/status")
        check(status == 404, f"status of an unknown order: {status}, wanted 404")
        status, _ = await req(http, "POST", "/orders/smoke-nope/approval", {"decision": "approve"})
        check(status == 404, f"approval of an unknown order: {status}, wanted 404")

        orders = {
            "smoke-small": order("smoke-small", [("smoke-a", 2)]),
            "smoke-declined": order("smoke-declined", [("smoke-a", 1)], method="pm_card_chargeDeclined"),
            "smoke-nozip": order("smoke-nozip", [("smoke-a", 1), ("smoke-b", 1)], postal="00000"),
            "smoke-big-ok": order("smoke-big-ok", [("smoke-b", 2)]),
            "smoke-big-no": order("smoke-big-no", [("smoke-b", 2)]),
            "smoke-oos": order("smoke-oos", [("smoke-a", 1), ("smoke-b", 50)]),
            "smoke-twice": order("smoke-twice", [("smoke-a", 1)]),
        }
        for oid, body in orders.items():
            status, answer = await req(http, "POST", "/orders", body)
            check(status == 202 and answer == {"orderId": oid}, f"POST {oid}: {status} {answer}")
        # The same order again, at once (its saga running) ...
        status, _ = await req(http, "POST", "/orders", orders["smoke-twice"])
        check(status == 202, f"second POST smoke-twice: {status}")

        # Approvals: decisions arrive while the orders wait.
        for oid, decision in (("smoke-big-ok", "approve"), ("smoke-big-no", "reject")):
            await wait_status(http, oid, {"AWAITING_APPROVAL"})
            status, _ = await req(http, "POST", f"/orders/{oid}/approval", {"decision": "maybe"})
            check(status == 400, f"approval with a bad decision: {status}, wanted 400")
            status, body = await req(http, "POST", f"/orders/{oid}/approval", {"decision": decision})
            check(status == 200, f"approval {oid}: {status} {body}")

        expect = {
            "smoke-small": ("COMPLETED", None),
            "smoke-declined": ("CANCELLED", "PAYMENT_DECLINED"),
            "smoke-nozip": ("CANCELLED", "SHIPMENT_REJECTED"),
            "smoke-big-ok": ("COMPLETED", None),
            "smoke-big-no": ("CANCELLED", "REJECTED"),
            "smoke-oos": ("CANCELLED", "OUT_OF_STOCK"),
            "smoke-twice": ("COMPLETED", None),
        }
        for oid, (st, reason) in expect.items():
            body = await wait_status(http, oid, {"COMPLETED", "CANCELLED"})
            check(body == {"status": st, "reason": reason}, f"{oid}: {body}, wanted {st}/{reason}")

        # ... and once more after it finished: 202, and nothing new starts.
        status, _ = await req(http, "POST", "/orders", orders["smoke-twice"])
        check(status == 202, f"third POST smoke-twice: {status}")
        status, _ = await req(http, "POST", "/orders/smoke-small/approval", {"decision": "approve"})
        check(status == 409, f"approval of a finished order: {status}, wanted 409")

        status, audit = await req(http, "GET", "/audit")
        check(status == 200, f"GET /audit: {status}")
        o = audit["orders"]

        def rec(reserved: dict, charge, shipped: bool, st: str, reason) -> dict:
            return {"status": st, "reason": reason, "reserved": reserved, "charge": charge, "shipped": shipped}

        def held(q: int, released: bool = False) -> dict:
            return {"quantity": q, "released": released}

        want = {
            "smoke-small": rec({"smoke-a": held(2)}, {"amountCents": 3000, "refunded": False}, True, "COMPLETED", None),
            "smoke-declined": rec({"smoke-a": held(1, True)}, None, False, "CANCELLED", "PAYMENT_DECLINED"),
            "smoke-nozip": rec({"smoke-a": held(1, True), "smoke-b": held(1, True)},
                               {"amountCents": 61500, "refunded": True}, False, "CANCELLED", "SHIPMENT_REJECTED"),
            "smoke-big-ok": rec({"smoke-b": held(2)}, {"amountCents": 120000, "refunded": False}, True, "COMPLETED", None),
            "smoke-big-no": rec({"smoke-b": held(2, True)}, {"amountCents": 120000, "refunded": True}, False,
                                "CANCELLED", "REJECTED"),
            "smoke-oos": rec({"smoke-a": held(1, True)}, None, False, "CANCELLED", "OUT_OF_STOCK"),
            "smoke-twice": rec({"smoke-a": held(1)}, {"amountCents": 1500, "refunded": False}, True, "COMPLETED", None),
        }
        for oid, w in want.items():
            check(o.get(oid) == w, f"audit of {oid}:\n  got  {o.get(oid)}\n  want {w}")
        # A: 100 given, held by small (2) and twice (1). B: 10 given, held by big-ok (2).
        check(audit["skus"]["smoke-a"] == {"available": 97, "given": 100}, f"smoke-a: {audit['skus']['smoke-a']}")
        check(audit["skus"]["smoke-b"] == {"available": 8, "given": 10}, f"smoke-b: {audit['skus']['smoke-b']}")
        invariants(audit)

        status, stats = await req(http, "GET", "/stats")
        check(stats == {"COMPLETED": 3, "CANCELLED": 4}, f"/stats: {stats}")

        # Restocking keeps `given` cumulative: +5 to A.
        status, body = await req(http, "PUT", "/inventory/smoke-a", {"available": 102, "priceCents": 1500})
        check(status == 200 and body["given"] == 105, f"restock: {status} {body}")

    # Exactly one workflow run per order id, however often it was posted.
    client = await Client.connect(address)
    runs = [w async for w in client.list_workflows("WorkflowId = 'smoke-twice'")]
    check(len(runs) == 1, f"smoke-twice has {len(runs)} workflow runs, wanted 1")
    print("sagas: all outcomes and records as the contract says")


async def post(url: str, prefix: str, n: int, rate: float) -> None:
    """Posts n small orders from 16 clients at about `rate` a second in all; a POST that fails
    (server down) is retried."""
    async with aiohttp.ClientSession(url) as http:
        status, _ = await req(http, "PUT", f"/inventory/{prefix}-sku", {"available": n, "priceCents": 1500})
        check(status == 200, f"PUT inventory: {status}")
        queue = list(range(n))
        posted = 0
        retries = 0

        async def client() -> None:
            nonlocal posted, retries
            while queue:
                i = queue.pop()
                body = order(f"{prefix}-{i}", [(f"{prefix}-sku", 1)])
                deadline = time.monotonic() + 120
                while True:
                    try:
                        status, _ = await req(http, "POST", "/orders", body)
                        if status == 202:
                            break
                    except aiohttp.ClientError:
                        pass
                    retries += 1
                    check(time.monotonic() < deadline, f"POST {prefix}-{i} never accepted")
                    await asyncio.sleep(0.2)
                posted += 1
                if posted % 10 == 0:
                    print(f"posted {posted}", flush=True)
                await asyncio.sleep(16 / rate)

        await asyncio.gather(*(client() for _ in range(16)))
        print(f"posted {posted} (POSTs retried: {retries})", flush=True)


async def finished(url: str, prefix: str, n: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession(url) as http:
        while True:
            status, audit = await req(http, "GET", "/audit")
            mine = {k: v for k, v in audit["orders"].items() if k.startswith(prefix + "-")}
            done = [k for k, v in mine.items() if v["status"] in ("COMPLETED", "CANCELLED")]
            if len(done) == n:
                break
            check(time.monotonic() < deadline, f"only {len(done)}/{n} of {prefix} finished after {timeout}s")
            await asyncio.sleep(0.5)
        bad = {k: v for k, v in mine.items() if v["status"] != "COMPLETED"}
        check(not bad, f"{len(bad)} of {prefix} did not complete: {list(bad.items())[:3]}")
        for k, v in mine.items():
            check(v["charge"] == {"amountCents": 1500, "refunded": False}, f"{k}: charge {v['charge']}")
        sku = audit["skus"][f"{prefix}-sku"]
        check(sku == {"available": 0, "given": n}, f"{prefix}-sku: {sku}")
        invariants(audit)
    print(f"finished: all {n} of {prefix} completed, each charged once, stock exact")


async def stats_finished(url: str) -> None:
    async with aiohttp.ClientSession(url) as http:
        _, stats = await req(http, "GET", "/stats")
        print(stats.get("COMPLETED", 0) + stats.get("CANCELLED", 0))


async def check_invariants(url: str) -> None:
    async with aiohttp.ClientSession(url) as http:
        _, audit = await req(http, "GET", "/audit")
        invariants(audit)
    print(f"invariants hold on {len(audit['orders'])} orders, {len(audit['skus'])} SKUs")


def main() -> int:
    cmd, args = sys.argv[1], sys.argv[2:]
    try:
        if cmd == "sagas":
            asyncio.run(sagas(args[0], args[1]))
        elif cmd == "post":
            asyncio.run(post(args[0], args[1], int(args[2]), float(args[3])))
        elif cmd == "finished":
            asyncio.run(finished(args[0], args[1], int(args[2])))
        elif cmd == "done-count":
            asyncio.run(stats_finished(args[0]))
        elif cmd == "invariants":
            asyncio.run(check_invariants(args[0]))
        else:
            print(f"unknown command {cmd}", file=sys.stderr)
            return 2
    except Failed as err:
        print(f"FAILED: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    code = main()
    # The temporalio client's Rust bridge leaves threads that can abort CPython's finalization
    # ("PyGILState_Release: thread state ... must be current", SIGABRT) after the work is done:
    # temporalio/sdk-python#300. Exit without finalizing, once the output is flushed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
