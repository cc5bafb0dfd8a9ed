//! Sandbox gateways: a payment provider and a carrier that keep their ledger in the store (the
//! SQLite file of the embedded default, or the DynamoDB table) and behave by magic values, like
//! card processors' test cards, so a new user can exercise every path of the saga by typing a
//! value:
//!
//! | field | value | behaviour |
//! |---|---|---|
//! | payment method | `pm_card_visa` | the charge succeeds |
//! | payment method | `pm_card_chargeDeclined` | declined (`Rejected`) |
//! | payment method | `pm_card_unavailable_once` | `Unavailable` on the first attempt, then succeeds |
//! | payment method | `pm_card_lost_response` | charges, then answers `Unavailable` once: the retry finds the charge |
//! | payment method | anything else | `Rejected`: unknown test payment method |
//! | postal code | `00000` | the shipment is rejected |
//! | postal code | `99999` | `Unavailable` on the first attempt, then shipped |
//!
//! "Once" is counted per idempotency key (per order for shipments) in the store, so it stays once
//! across restarts. Ids are derived from the keys, so a replay of a scenario shows the same
//! charge, refund, shipment and tracking number.
//!
//! The behaviour is written once, over the [`Ledger`] trait; each backend implements only the
//! storage (`sqlite/ledger.rs`, `dynamodb/ledger.rs`).

mod payments;
mod shipping;

pub use payments::SandboxPayments;
pub use shipping::SandboxShipping;
pub use store::ledger::{self, Ledger};

use sha2::{Digest, Sha256};
use std::sync::Arc;
use store::ports::{InventoryRepository, OrderRepository, Ports};

/// A store's ports with the sandbox providers: its orders and stock, and the sandbox gateways
/// over its ledger. The embedded default's bundle (`SqliteStore`), and AWS mode's when no
/// real provider is configured (`DynamoStore`).
pub fn ports<S>(store: &S) -> Ports
where
    S: OrderRepository + InventoryRepository + Ledger + Clone + 'static,
{
    Ports {
        orders: Arc::new(store.clone()),
        inventory: Arc::new(store.clone()),
        payments: Arc::new(SandboxPayments::new(store.clone())),
        shipping: Arc::new(SandboxShipping::new(store.clone())),
    }
}

pub const PM_SUCCEEDS: &str = "pm_card_visa";
pub const PM_DECLINED: &str = "pm_card_chargeDeclined";
pub const PM_UNAVAILABLE_ONCE: &str = "pm_card_unavailable_once";
pub const PM_LOST_RESPONSE: &str = "pm_card_lost_response";
pub const POSTAL_REJECTED: &str = "00000";
pub const POSTAL_UNAVAILABLE_ONCE: &str = "99999";

/// `prefix` + 24 hex digits of SHA-256 of `seed`.
fn derive_id(prefix: &str, seed: &str) -> String {
    let digest = Sha256::digest(seed.as_bytes());
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}{hex}")
}

/// `1Z` + 16 uppercase letters and digits, the same for the same order every time.
fn tracking_number(order_id: &str) -> String {
    const ALPHABET: &[u8; 36] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let digest = Sha256::digest(format!("tracking:{order_id}").as_bytes());
    let tail: String = digest[..16]
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect();
    format!("1Z{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracking_numbers_are_stable_per_order_and_look_like_ups() {
        let a = tracking_number("o1");
        assert_eq!(a, tracking_number("o1"));
        assert_ne!(a, tracking_number("o2"));
        assert_eq!(a.len(), 18);
        assert!(a.starts_with("1Z"));
        assert!(
            a[2..]
                .chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
        );
    }

    #[test]
    fn ids_carry_their_prefix_and_differ_by_seed() {
        let id = derive_id("ch_", "charge:o1");
        assert!(id.starts_with("ch_") && id.len() == 27);
        assert_ne!(id, derive_id("ch_", "charge:o2"));
    }
}
