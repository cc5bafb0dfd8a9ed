//! `Payments`: one Restate virtual object per idempotency key, which is the order id. It stands in
//! for a card processor: `pm_card_visa` is charged, every other payment method is declined.
//!
//! Keying the object by the idempotency key is how Restate makes "one charge per key" hold: all
//! calls for one key run one at a time, and the charge is a state write committed with the
//! handler's result, so however often `charge` runs for an order (a retry, a replay, a second
//! caller), the second run finds the first one's charge and answers with it.
//!
//! State of `Payments/<orderId>` (JSON): `charge` = `{"chargeId","amountCents","refunded"}`,
//! present once the order was charged, `refunded` flipped by `refund`.

use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};

/// `charge`'s body.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChargeRequest {
    pub amount_cents: i64,
    pub payment_method: String,
}

/// The one charge of an order (state `charge`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Charge {
    pub charge_id: String,
    pub amount_cents: i64,
    pub refunded: bool,
}

/// The payment method the simulated processor accepts; the contract's `pm_card_chargeDeclined`,
/// like anything else, is declined.
const ACCEPTED_METHOD: &str = "pm_card_visa";

/// The decline's message: the saga uses it as the order's `reason`.
pub const DECLINED: &str = "PAYMENT_DECLINED";

const CHARGE: &str = "charge";

pub struct Payments;

#[restate_sdk::object(name = "Payments")]
impl Payments {
    /// Charges `amountCents` once per key and answers the charge id. A decline is a
    /// `TerminalError` (HTTP 402): Restate does not retry it, and the saga turns it into its
    /// compensations.
    #[handler]
    async fn charge(
        &self,
        ctx: ObjectContext<'_>,
        Json(req): Json<ChargeRequest>,
    ) -> Result<String, HandlerError> {
        if let Some(Json(charge)) = ctx.get::<Json<Charge>>(CHARGE).await? {
            // The key was charged already: the same charge, never a second one. A refunded
            // charge stays refunded (a saga never charges again after its refund).
            return Ok(charge.charge_id);
        }
        if req.payment_method != ACCEPTED_METHOD {
            return Err(TerminalError::new_with_code(402, DECLINED).into());
        }
        if req.amount_cents < 0 {
            return Err(TerminalError::new_with_code(400, "amountCents must be ≥ 0").into());
        }
        // The id derives from the key, which is unique per charge: deterministic on replay
        // without a journaled random or a `ctx.run`.
        let charge_id = format!("ch_{}", ctx.key());
        ctx.set(
            CHARGE,
            Json(Charge {
                charge_id: charge_id.clone(),
                amount_cents: req.amount_cents,
                refunded: false,
            }),
        );
        Ok(charge_id)
    }

    /// Refunds the key's charge, once; without a charge (declined, or never charged) there is
    /// nothing to refund and nothing is written.
    #[handler]
    async fn refund(&self, ctx: ObjectContext<'_>) -> Result<(), HandlerError> {
        let Some(Json(mut charge)) = ctx.get::<Json<Charge>>(CHARGE).await? else {
            return Ok(());
        };
        if !charge.refunded {
            charge.refunded = true;
            ctx.set(CHARGE, Json(charge));
        }
        Ok(())
    }
}
