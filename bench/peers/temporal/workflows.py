"""The order saga as a Temporal workflow.

Deterministic: no clock, no randomness, no I/O here. Every side effect is an activity
(activities.py); the approval decision comes in as a signal; `status` is a query. The saga's
compensations are kept as a list while the steps succeed and run in reverse when a step is refused.

This file holds only workflow code and the types it passes, as Temporal's Python guide advises:
the sandbox re-imports the workflow's file for every workflow run, and the activities module (and
the SQLite code under it) is imported with `imports_passed_through`, so it is loaded once.
"""

from dataclasses import dataclass
from datetime import timedelta
from typing import Awaitable, Callable, Optional

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    import activities as acts


@dataclass
class Line:
    sku: str
    quantity: int


@dataclass
class Address:
    name: str
    line1: str
    city: str
    postal_code: str
    country: str


@dataclass
class OrderInput:
    order_id: str
    customer_id: str
    currency: str
    shipping_address: Address
    lines: list[Line]
    payment_method: str
    # Set by whoever starts the saga (the front reads APPROVAL_THRESHOLD_CENTS), so the workflow
    # never reads the environment and its history says which threshold applied.
    approval_threshold_cents: int


@dataclass
class OrderStatus:
    status: str
    reason: Optional[str] = None


APPROVE = "approve"
REJECT = "reject"

# Which refusal ends the order with which reason.
REASONS = {
    acts.OUT_OF_STOCK: "OUT_OF_STOCK",
    acts.PAYMENT_DECLINED: "PAYMENT_DECLINED",
    acts.SHIPMENT_REJECTED: "SHIPMENT_REJECTED",
}

# Forward steps: retried (backing off to 10 s between tries) until they succeed or are refused; a
# refusal is a non-retryable ApplicationError, so it comes back at once. 10 s to finish a try: each
# is one SQLite transaction of a few milliseconds, and a try whose result was lost (worker or
# server killed) is run again after that long.
FORWARD = dict(
    start_to_close_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=500),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=10),
        non_retryable_error_types=list(REASONS),
    ),
)
# Compensations must end up done: unlimited tries, same back-off.
COMPENSATE = dict(
    start_to_close_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=500),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=10),
    ),
)


def _refusal(err: ActivityError) -> Optional[str]:
    """The cancellation reason when an activity was refused for a business reason."""
    cause = err.cause
    if isinstance(cause, ApplicationError):
        return REASONS.get(cause.type or "")
    return None


@workflow.defn
class OrderSaga:
    def __init__(self) -> None:
        self._status = "ACCEPTED"
        self._reason: Optional[str] = None
        self._decision: Optional[str] = None
        # Each takes the cancellation reason (given to the last one run only, so that the order's
        # CANCELLED status is written in the same transaction as the saga's last compensation).
        self._compensations: list[Callable[[Optional[str]], Awaitable[None]]] = []

    @workflow.run
    async def run(self, order: OrderInput) -> OrderStatus:
        try:
            reason = await self._forward(order)
        except ActivityError as err:
            reason = _refusal(err)
            if reason is None:
                raise
        if reason is not None:
            await self._compensate(order.order_id, reason)
            self._status, self._reason = "CANCELLED", reason
        return OrderStatus(self._status, self._reason)

    @workflow.signal
    def approval(self, decision: str) -> None:
        # The first valid decision counts; later ones change nothing.
        if self._decision is None and decision in (APPROVE, REJECT):
            self._decision = decision

    @workflow.query
    def status(self) -> OrderStatus:
        return OrderStatus(self._status, self._reason)

    async def _forward(self, order: OrderInput) -> Optional[str]:
        """Runs the steps; returns None when the order completed, else the reason to cancel."""
        oid = order.order_id

        # 1. Reserve each SKU (lines of the same SKU held together: a reservation is per
        #    (order, SKU)); 2. price each from the catalog price the reservation returns.
        lines = _merge(order.lines)
        total = 0
        for i, line in enumerate(lines):
            last = i == len(lines) - 1
            price = await workflow.execute_activity(
                acts.reserve_stock,
                acts.ReserveInput(oid, line.sku, line.quantity, "RESERVED" if last else None),
                **FORWARD,
            )
            self._compensations.append(
                lambda reason, sku=line.sku: workflow.execute_activity(
                    acts.release_stock, acts.ReleaseInput(oid, sku, reason), **COMPENSATE
                )
            )
            total += price * line.quantity
        self._status = "RESERVED"

        # 3. Charge the total, once (the activity is idempotent on the order id).
        needs_approval = total >= order.approval_threshold_cents
        after_charge = "AWAITING_APPROVAL" if needs_approval else "CHARGED"
        await workflow.execute_activity(
            acts.charge_payment,
            acts.ChargeInput(oid, total, order.payment_method, after_charge),
            **FORWARD,
        )
        self._compensations.append(
            lambda reason: workflow.execute_activity(
                acts.refund_payment, acts.RefundInput(oid, reason), **COMPENSATE
            )
        )
        self._status = after_charge

        # 4. An operator's decision, however long it takes (the wait is durable).
        if needs_approval:
            await workflow.wait_condition(lambda: self._decision is not None)
            if self._decision == REJECT:
                return "REJECTED"

        # 5. Ship; 6. the ship step records COMPLETED.
        await workflow.execute_activity(
            acts.ship_order, acts.ShipInput(oid, order.shipping_address.postal_code), **FORWARD
        )
        self._status = "COMPLETED"
        return None

    async def _compensate(self, order_id: str, reason: str) -> None:
        """Undoes the steps done, in reverse order; the last one run records CANCELLED."""
        if not self._compensations:
            await workflow.execute_activity(
                acts.cancel_order, acts.CancelInput(order_id, reason), **COMPENSATE
            )
            return
        for i, undo in enumerate(reversed(self._compensations)):
            last = i == len(self._compensations) - 1
            await undo(reason if last else None)


def _merge(lines: list[Line]) -> list[Line]:
    merged: dict[str, int] = {}
    for line in lines:
        merged[line.sku] = merged.get(line.sku, 0) + line.quantity
    return [Line(sku, qty) for sku, qty in merged.items()]
