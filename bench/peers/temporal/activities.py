"""The saga's activities: every side effect of the order saga, each idempotent by its business key.

Temporal runs an activity at least once (a worker may finish the work and die before reporting it,
and the retry runs it again), so each one checks its own record first:
  reserve  per (order, SKU): a second run finds the reservation and takes nothing;
  charge   per order (the charges table's primary key is the idempotency key);
  ship     per order (shipments' primary key);
  refund   flips `refunded` once; release flips `released` once and gives back what was reserved.
Each also records the order's status in the same SQLite transaction as its effect, so the status
costs no activity of its own.

They are plain (non-async) functions: SQLite's calls block, and Temporal's Python guide says to
run blocking activities as sync functions on a ThreadPoolExecutor rather than inside the event loop.
Business refusals (no stock, declined card, carrier refusal) are non-retryable ApplicationErrors of
the BENIGN category (not logged as errors); everything else is retried by the retry policy.
"""

from dataclasses import dataclass

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

import db

# ApplicationError types the workflow maps to a cancellation reason.
OUT_OF_STOCK = "OutOfStock"
PAYMENT_DECLINED = "PaymentDeclined"
SHIPMENT_REJECTED = "ShipmentRejected"

ACCEPTED_PAYMENT_METHOD = "pm_card_visa"
REJECTED_POSTAL_CODE = "00000"


@dataclass
class ReserveInput:
    order_id: str
    sku: str
    quantity: int
    # Status to record once this line is held (RESERVED on the order's last line, else None).
    status_after: str | None = None


@dataclass
class ReleaseInput:
    order_id: str
    sku: str
    # Set on the last compensation the saga runs: the order ends CANCELLED with this reason.
    cancel_reason: str | None = None


@dataclass
class ChargeInput:
    order_id: str
    amount_cents: int
    payment_method: str
    status_after: str  # CHARGED, or AWAITING_APPROVAL when the total needs an operator


@dataclass
class RefundInput:
    order_id: str
    cancel_reason: str | None = None


@dataclass
class ShipInput:
    order_id: str
    postal_code: str


@dataclass
class CancelInput:
    order_id: str
    reason: str


def _refuse(message: str, kind: str) -> ApplicationError:
    return ApplicationError(
        message, type=kind, non_retryable=True, category=ApplicationErrorCategory.BENIGN
    )


@activity.defn
def reserve_stock(inp: ReserveInput) -> int:
    """Holds `quantity` of `sku` for the order; returns the SKU's catalog price in cents."""
    with db.write_txn() as c:
        row = c.execute("SELECT price_cents, available FROM skus WHERE sku = ?", (inp.sku,)).fetchone()
        held = c.execute(
            "SELECT 1 FROM reservations WHERE order_id = ? AND sku = ?", (inp.order_id, inp.sku)
        ).fetchone()
        if held is None:
            if row is None or row[1] < inp.quantity:
                raise _refuse(f"{inp.sku}: not enough stock for {inp.quantity}", OUT_OF_STOCK)
            c.execute("UPDATE skus SET available = available - ? WHERE sku = ?", (inp.quantity, inp.sku))
            c.execute(
                "INSERT INTO reservations (order_id, sku, quantity) VALUES (?, ?, ?)",
                (inp.order_id, inp.sku, inp.quantity),
            )
        if inp.status_after:
            db.set_status(c, inp.order_id, inp.status_after)
        return row[0] if row is not None else 0


@activity.defn
def release_stock(inp: ReleaseInput) -> None:
    """Gives back exactly what the order reserved of the SKU, once."""
    with db.write_txn() as c:
        row = c.execute(
            "SELECT quantity FROM reservations WHERE order_id = ? AND sku = ? AND released = 0",
            (inp.order_id, inp.sku),
        ).fetchone()
        if row is not None:
            c.execute("UPDATE skus SET available = available + ? WHERE sku = ?", (row[0], inp.sku))
            c.execute(
                "UPDATE reservations SET released = 1 WHERE order_id = ? AND sku = ?",
                (inp.order_id, inp.sku),
            )
        if inp.cancel_reason:
            db.set_status(c, inp.order_id, "CANCELLED", inp.cancel_reason)


@activity.defn
def charge_payment(inp: ChargeInput) -> None:
    """Charges the order's total once: the order id is the idempotency key."""
    with db.write_txn() as c:
        done = c.execute("SELECT 1 FROM charges WHERE order_id = ?", (inp.order_id,)).fetchone()
        if done is None:
            if inp.payment_method != ACCEPTED_PAYMENT_METHOD:
                raise _refuse(f"card declined ({inp.payment_method})", PAYMENT_DECLINED)
            c.execute(
                "INSERT INTO charges (order_id, amount_cents) VALUES (?, ?)",
                (inp.order_id, inp.amount_cents),
            )
        db.set_status(c, inp.order_id, inp.status_after)


@activity.defn
def refund_payment(inp: RefundInput) -> None:
    """Refunds the order's charge, once; nothing to do when there is none."""
    with db.write_txn() as c:
        c.execute("UPDATE charges SET refunded = 1 WHERE order_id = ? AND refunded = 0", (inp.order_id,))
        if inp.cancel_reason:
            db.set_status(c, inp.order_id, "CANCELLED", inp.cancel_reason)


@activity.defn
def ship_order(inp: ShipInput) -> None:
    """Books the shipment (keyed by the order id) and completes the order."""
    with db.write_txn() as c:
        done = c.execute("SELECT 1 FROM shipments WHERE order_id = ?", (inp.order_id,)).fetchone()
        if done is None:
            if inp.postal_code == REJECTED_POSTAL_CODE:
                raise _refuse(f"carrier refuses postal code {inp.postal_code}", SHIPMENT_REJECTED)
            c.execute(
                "INSERT INTO shipments (order_id, postal_code) VALUES (?, ?)",
                (inp.order_id, inp.postal_code),
            )
        db.set_status(c, inp.order_id, "COMPLETED")


@activity.defn
def cancel_order(inp: CancelInput) -> None:
    """Records CANCELLED when the saga has nothing to compensate (its first line was refused)."""
    with db.write_txn() as c:
        db.set_status(c, inp.order_id, "CANCELLED", inp.reason)


ALL = [reserve_stock, release_stock, charge_payment, refund_payment, ship_order, cancel_order]
