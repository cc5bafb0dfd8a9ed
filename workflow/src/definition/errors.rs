//! The error names the saga's steps report with `SendTaskFailure`: the names the definition's
//! Retry and Catch match (`order_saga.asl.json`), so they are part of the definition.

use std::fmt;

/// Every error name a saga step reports with `SendTaskFailure`. The state machine definition
/// (`workflow/order_saga.asl.json`) retries the transient ones and catches the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorName {
    /// Some item is not in stock; nothing was reserved.
    InventoryOutOfStock,
    /// The payment provider declined the charge.
    PaymentDeclined,
    /// The payment provider did not answer; the charge is retried with the same key.
    PaymentUnavailable,
    /// The charge's idempotency key was used with another amount: never a second charge.
    PaymentKeyReused,
    /// The payment provider refused the request as one no retry can fix (an amount under its
    /// minimum, an account setting the charge does not fit): final, and not a decline.
    PaymentInvalid,
    /// A provider refused this service's credentials or URL: the operator's fault, retried
    /// patiently (for days) by its own retrier, never a reason to cancel an order.
    ProviderMisconfigured,
    /// The carrier refused the shipment (e.g. an undeliverable address).
    ShipmentRejected,
    /// The carrier did not answer; the shipment is retried (one per order).
    ShipmentUnavailable,
    /// An operator rejected the order.
    OrderRejected,
    /// The order's client or an operator cancelled it before it shipped: the step that saw the
    /// cancellation did nothing, and the compensation undoes what earlier steps did.
    OrderCancelled,
    /// The approval window closed (at the deadline fixed when it opened) before an operator
    /// decided: the approval keeper fails the parked task with it.
    OrderApprovalExpired,
    /// The order's record is missing or inconsistent with the step (a bug, never retried).
    OrderInvalid,
    /// The store could not be reached; the step is retried.
    StoreUnavailable,
    /// An unexpected failure inside a step.
    StepFailed,
}

impl ErrorName {
    pub const ALL: [ErrorName; 14] = [
        ErrorName::InventoryOutOfStock,
        ErrorName::PaymentDeclined,
        ErrorName::PaymentUnavailable,
        ErrorName::PaymentKeyReused,
        ErrorName::PaymentInvalid,
        ErrorName::ProviderMisconfigured,
        ErrorName::ShipmentRejected,
        ErrorName::ShipmentUnavailable,
        ErrorName::OrderRejected,
        ErrorName::OrderCancelled,
        ErrorName::OrderApprovalExpired,
        ErrorName::OrderInvalid,
        ErrorName::StoreUnavailable,
        ErrorName::StepFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorName::InventoryOutOfStock => "Inventory.OutOfStock",
            ErrorName::PaymentDeclined => "Payment.Declined",
            ErrorName::PaymentUnavailable => "Payment.Unavailable",
            ErrorName::PaymentKeyReused => "Payment.IdempotencyKeyReused",
            ErrorName::PaymentInvalid => "Payment.Invalid",
            ErrorName::ProviderMisconfigured => "Provider.Misconfigured",
            ErrorName::ShipmentRejected => "Shipment.Rejected",
            ErrorName::ShipmentUnavailable => "Shipment.Unavailable",
            ErrorName::OrderRejected => "Order.Rejected",
            ErrorName::OrderCancelled => "Order.Cancelled",
            ErrorName::OrderApprovalExpired => "Order.ApprovalExpired",
            ErrorName::OrderInvalid => "Order.Invalid",
            ErrorName::StoreUnavailable => "Store.Unavailable",
            ErrorName::StepFailed => "Step.Failed",
        }
    }

    /// Transient errors are retried by the definition with back-off; the rest are caught.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            ErrorName::PaymentUnavailable
                | ErrorName::ShipmentUnavailable
                | ErrorName::StoreUnavailable
                | ErrorName::ProviderMisconfigured
        )
    }
}

impl fmt::Display for ErrorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_are_unique_and_namespaced() {
        let names: std::collections::HashSet<_> =
            ErrorName::ALL.iter().map(|e| e.as_str()).collect();
        assert_eq!(names.len(), ErrorName::ALL.len());
        assert!(
            names
                .iter()
                .all(|n| n.contains('.') && !n.starts_with("States."))
        );
    }

    #[test]
    fn only_unavailability_and_misconfiguration_are_transient() {
        let transient: Vec<_> = ErrorName::ALL
            .iter()
            .filter(|e| e.is_transient())
            .map(|e| e.as_str())
            .collect();
        assert_eq!(
            transient,
            [
                "Payment.Unavailable",
                "Provider.Misconfigured",
                "Shipment.Unavailable",
                "Store.Unavailable"
            ]
        );
    }
}
