//! The error names the saga's steps report with `SendTaskFailure`: the names the definition's
//! Retry and Catch match (`workflow/order_saga.asl.json`), so they are part of the definition.
//! Each is declared once, below, with its name and whether it passes; each step declares which
//! of them it may raise ([`crate::Declaration::raises`]).

use std::fmt;

/// Declares the error names, one line each: the variant, its name in the definition, and
/// `transient` for the ones the definition retries with back-off (the rest are caught).
macro_rules! error_names {
    ($($(#[$doc:meta])* $variant:ident => $name:literal $(, $transient:ident)?;)+) => {
        /// Every error name a saga step reports with `SendTaskFailure`. The state machine
        /// definition retries the transient ones and catches the rest.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorName {
            $($(#[$doc])* $variant,)+
        }

        impl ErrorName {
            pub const ALL: [ErrorName; [$($name),+].len()] = [$(ErrorName::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorName::$variant => $name,)+
                }
            }

            /// Transient errors are retried by the definition with back-off; the rest are
            /// caught.
            pub fn is_transient(self) -> bool {
                match self {
                    $(ErrorName::$variant => error_names!(@transient $($transient)?),)+
                }
            }
        }
    };
    (@transient transient) => { true };
    (@transient) => { false };
}

error_names! {
    /// Some item is not in stock; nothing was reserved.
    InventoryOutOfStock => "Inventory.OutOfStock";
    /// The payment provider declined the charge.
    PaymentDeclined => "Payment.Declined";
    /// The payment provider did not answer; the charge is retried with the same key.
    PaymentUnavailable => "Payment.Unavailable", transient;
    /// The charge's idempotency key was used with another amount: never a second charge.
    PaymentKeyReused => "Payment.IdempotencyKeyReused";
    /// The payment provider refused the request as one no retry can fix (an amount under its
    /// minimum, an account setting the charge does not fit): final, and not a decline.
    PaymentInvalid => "Payment.Invalid";
    /// A provider refused this service's credentials or URL: the operator's fault, retried
    /// patiently (for days) by its own retrier, never a reason to cancel an order.
    ProviderMisconfigured => "Provider.Misconfigured", transient;
    /// The carrier refused the shipment (e.g. an undeliverable address).
    ShipmentRejected => "Shipment.Rejected";
    /// The carrier did not answer; the shipment is retried (one per order).
    ShipmentUnavailable => "Shipment.Unavailable", transient;
    /// An operator rejected the order.
    OrderRejected => "Order.Rejected";
    /// The order's client or an operator cancelled it before it shipped: the step that saw the
    /// cancellation did nothing, and the compensation undoes what earlier steps did.
    OrderCancelled => "Order.Cancelled";
    /// The approval window closed (at the deadline fixed when it opened) before an operator
    /// decided: the approval keeper fails the parked task with it.
    OrderApprovalExpired => "Order.ApprovalExpired";
    /// The order's record is missing or inconsistent with the step (a bug, never retried).
    OrderInvalid => "Order.Invalid";
    /// The store could not be reached; the step is retried.
    StoreUnavailable => "Store.Unavailable", transient;
    /// An unexpected failure inside a step.
    StepFailed => "Step.Failed";
}

impl ErrorName {
    /// The error of this name, if it is one of ours.
    pub fn parse(name: &str) -> Option<ErrorName> {
        ErrorName::ALL.into_iter().find(|n| n.as_str() == name)
    }
}

impl fmt::Display for ErrorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A provider's names for its own failures, for [`crate::gateway_failed`].
pub struct ProviderErrors {
    /// Its final "no" (a decline, an undeliverable address).
    pub rejected: ErrorName,
    /// It did not answer, or answered that it is overloaded.
    pub unavailable: ErrorName,
    /// A request no retry can fix that is not a "no" of the customer's.
    pub invalid: ErrorName,
}

/// The payment provider's failures as the definition names them (the charge's and the
/// refund's).
pub const PAYMENT_ERRORS: ProviderErrors = ProviderErrors {
    rejected: ErrorName::PaymentDeclined,
    unavailable: ErrorName::PaymentUnavailable,
    invalid: ErrorName::PaymentInvalid,
};

/// The carrier's failures as the definition names them (the shipment's and its void's): a
/// request it cannot serve is a rejected shipment.
pub const SHIPPING_ERRORS: ProviderErrors = ProviderErrors {
    rejected: ErrorName::ShipmentRejected,
    unavailable: ErrorName::ShipmentUnavailable,
    invalid: ErrorName::ShipmentRejected,
};

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

    #[test]
    fn every_name_parses_back_to_itself() {
        for name in ErrorName::ALL {
            assert_eq!(ErrorName::parse(name.as_str()), Some(name));
        }
        assert_eq!(ErrorName::parse("States.Timeout"), None);
    }
}
